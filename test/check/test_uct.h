/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the uct test files. */
#ifndef RINGK_TEST_UCT_H
#define RINGK_TEST_UCT_H

#include <check.h>
#include <uct/api/uct.h>

/** The registered ringk component; fails the test when the plugin is not loaded. */
uct_component_h test_ringk_component(void);

/** Opens the ringk memory domain. */
uct_md_h test_ringk_md_open(void);

/** Connects @a iface to the iface whose addresses are given; fails the test unless reachable
 * and created. */
uct_ep_h test_uct_connect(uct_iface_h iface, const void *addr, const void *dev_addr);

/** uct_config_modify() of the ringk transport's option @a name ("RING_SIZE"), as each UCX
 *  release names it: bare up to 1.13, with the table's prefix (RINGK_RING_SIZE) where UCX
 *  matches names that way. */
ucs_status_t test_uct_config_set(void *config, const char *name, const char *value);

/** A symbol of the plugin, however UCX loaded it: a preload puts it in the global scope, UCX's
 *  own module loader (UCX_PLUGIN_PATH, UCX >= 1.22) does not. NULL when not found. */
void *test_plugin_sym(const char *name);

/** UCX errors logged between test_capture_errors_begin() and _end(). */
extern char test_captured[8192];
void test_capture_errors_begin(void);
void test_capture_errors_end(void);

/** Adds the data-path test cases of test_uct_ep.c. */
void test_uct_ep_tcases(Suite *s);

/** Adds the ringk_shm md and "mapped" device cases of test_uct_shm.c. */
void test_uct_shm_tcases(Suite *s);

#endif
