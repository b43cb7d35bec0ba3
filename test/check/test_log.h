/* SPDX-License-Identifier: BSD-3-Clause */
/* The log hooks of tests that look for libringk's warnings and errors in what it logged. */
#ifndef RINGK_TEST_LOG_H
#define RINGK_TEST_LOG_H

#include <pthread.h>
#include <string.h>

/** Appends @a message and a newline to @a buf (@a size bytes) under @a mu while there is room;
 *  once the buffer is full the rest is dropped. */
static inline void test_log_append(char *buf, size_t size, pthread_mutex_t *mu,
                                   const char *message)
{
    size_t used;

    pthread_mutex_lock(mu);
    used = strlen(buf);
    if (used + 2 < size) {
        strncat(buf, message, size - used - 2);
        strcat(buf, "\n");
    }
    pthread_mutex_unlock(mu);
}

#endif
