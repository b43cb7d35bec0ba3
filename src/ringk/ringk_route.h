/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk routes: the name compares of the send path, inlined where a send is made. */
#ifndef RINGK_ROUTE_H
#define RINGK_ROUTE_H

#include "ringk_internal.h"

/* strcmp(b, name) == 0, stopping at b's first character that differs: never reads past b's
 * end. Out of line, but static in each file that uses it: the compiler then knows which
 * registers it uses, and the send path around the call saves fewer of its own. */
static __attribute__((noinline, unused)) int
ringk_route_name_eq_bytes(const char *name, uint32_t len, const char *b)
{
    uint32_t j;

    for (j = 0; j < len; j++) {
        if (b[j] != name[j]) {
            return 0;
        }
    }
    return b[len] == '\0';
}

/* x86-64 only: little-endian, and no memory tagging (on aarch64 with MTE or under HWASan, a
 * load past a name's end into another allocation's 16-byte granule faults even in one page) */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define RINGK_NAME_WORDS 1
#endif

/* Whether @a b names route @a rt (@a name: its name). A name under 16 characters is compared
 * as two 8-byte words with the bytes past its terminating zero masked off, when b's first 16
 * bytes lie in one page: the loads can read past the end of a shorter b, but never into
 * another page, as the C library's own string functions do (a byte loop is a large part of
 * a send by name). Otherwise byte by
 * byte, stopping at b's first character that differs; always so under ASan or TSan, under
 * valgrind (names_bytewise), and off x86-64. */
static inline int ringk_route_name_eq(const route_t *rt, const char *name, const char *b)
{
#ifdef RINGK_NAME_WORDS
    if (__builtin_expect((rt->name_m[0] != 0) && (((uintptr_t)b & 4095u) <= 4096u - 16u), 1)) {
        uint64_t x0, x1;

        memcpy(&x0, b, 8);
        memcpy(&x1, b + 8, 8);
        return ((((x0 & rt->name_m[0]) ^ rt->name_w[0]) |
                 ((x1 & rt->name_m[1]) ^ rt->name_w[1])) == 0);
    }
#endif
    return ringk_route_name_eq_bytes(name, rt->name_len, b);
}

/* strcmp() == 0 for the short names of the send path, without a call into the C library */
static inline int ringk_name_eq(const char *a, const char *b)
{
    while (*a == *b) {
        if (*a == '\0') {
            return 1;
        }
        a++;
        b++;
    }
    return 0;
}

#endif
