/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk endpoint: a sender's lane in a peer's receive segment. */
#ifndef UCT_RINGK_EP_H
#define UCT_RINGK_EP_H

#include <uct/base/uct_iface.h>

#endif
