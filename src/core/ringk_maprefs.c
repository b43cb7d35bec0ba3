/* SPDX-License-Identifier: BSD-3-Clause */
/* ringk mapping references (ringk_maprefs.h). */
#ifdef HAVE_CONFIG_H
#include "ringk_config.h"
#endif

#include "ringk_maprefs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ringk_mapref_t *maprefs_find_key(ringk_maprefs_t *t, const uint8_t *key)
{
    size_t i;

    for (i = 0; i < t->n; i++) {
        if (memcmp(t->e[i].key, key, RINGK_MAPREFS_KEY) == 0) {
            return &t->e[i];
        }
    }
    return NULL;
}

static void maprefs_remove(ringk_maprefs_t *t, ringk_mapref_t *e)
{
    *e = t->e[--t->n];
}

int ringk_maprefs_get(ringk_maprefs_t *t, const uint8_t *key, uint64_t size,
                      ringk_maprefs_open_t open, void **mapped_p, char *why, size_t why_len)
{
    ringk_mapref_t *e, *grown;
    size_t cap;
    int ret = 0;

    pthread_mutex_lock(&t->mu);
    if ((e = maprefs_find_key(t, key)) != NULL) {
        if (e->size != size) {
            snprintf(why, why_len, "the handle is mapped for an allocation of %llu bytes, this "
                     "import says %llu", (unsigned long long)e->size, (unsigned long long)size);
            ret = -EINVAL;
        } else {
            e->refs++;
            t->hits++;
            *mapped_p = e->mapped;
        }
        pthread_mutex_unlock(&t->mu);
        return ret;
    }
    if (t->n == t->cap) {
        cap = 2 * t->cap + 8;
        if ((grown = realloc(t->e, cap * sizeof(*grown))) == NULL) {
            pthread_mutex_unlock(&t->mu);
            snprintf(why, why_len, "out of memory for the table of mappings");
            return -ENOMEM;
        }
        t->e   = grown;
        t->cap = cap;
    }
    if ((ret = open(key, size, mapped_p, why, why_len)) == 0) {
        e = &t->e[t->n++];
        memcpy(e->key, key, RINGK_MAPREFS_KEY);
        e->size   = size;
        e->mapped = *mapped_p;
        e->refs   = 1;
        t->opens++;
    }
    pthread_mutex_unlock(&t->mu);
    return ret;
}

int ringk_maprefs_put(ringk_maprefs_t *t, void *mapped, int may_close,
                      ringk_maprefs_close_t close)
{
    size_t i;

    pthread_mutex_lock(&t->mu);
    for (i = 0; (i < t->n) && ((t->e[i].mapped != mapped) || (t->e[i].refs == 0)); i++) {
    }
    if (i == t->n) {
        pthread_mutex_unlock(&t->mu);
        return -ENOENT;
    }
    if ((--t->e[i].refs == 0) && may_close) {
        close(mapped); /* under the lock: no import opens the handle while it is unmapped */
        maprefs_remove(t, &t->e[i]);
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

size_t ringk_maprefs_flush(ringk_maprefs_t *t, ringk_maprefs_close_t close)
{
    size_t i, n = 0;

    pthread_mutex_lock(&t->mu);
    for (i = t->n; i-- > 0;) {
        if (t->e[i].refs == 0) {
            close(t->e[i].mapped);
            maprefs_remove(t, &t->e[i]);
            n++;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t ringk_maprefs_unused(ringk_maprefs_t *t)
{
    size_t i, n = 0;

    pthread_mutex_lock(&t->mu);
    for (i = 0; i < t->n; i++) {
        n += (t->e[i].refs == 0);
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}
