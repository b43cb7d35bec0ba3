/* SPDX-License-Identifier: BSD-3-Clause */
/* Concurrency Kit side of bench/runtime_vs.sh: ck_ring SPSC between two threads, the near-limit
 * reference for local one-way throughput (8-byte values) and ping-pong. */
#define _GNU_SOURCE
#include <ck_ring.h>

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Like ringk's persistent kernels: the two threads on two different cores. */
static void pin(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu % sysconf(_SC_NPROCESSORS_ONLN), &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

#define RING 1024
static ck_ring_t r1, r2;
static ck_ring_buffer_t b1[RING], b2[RING];
static uint64_t n = 2000000;

/* "throughput64": entries of 64 bytes copied by value, the bytes one ringk message moves
 * (its 16-byte cell header, 40-byte message header and 8-byte payload). */
struct msg64 {
    uint64_t v;
    uint8_t  rest[56];
};
typedef struct msg64 msg64_t;
CK_RING_PROTOTYPE(msg64, msg64)
static msg64_t m1[RING];

static void *producer64(void *a)
{
    pin(1);
    msg64_t m = {0};
    uint64_t i;
    for (i = 1; i <= n; i++) {
        m.v = i;
        while (!ck_ring_enqueue_spsc_msg64(&r1, m1, &m)) {
        }
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *producer(void *a)
{
    pin(1);
    uint64_t i;
    for (i = 1; i <= n; i++) {
        while (!ck_ring_enqueue_spsc(&r1, b1, (void*)(uintptr_t)i)) {
        }
    }
    return NULL;
}

static void *bouncer(void *a)
{
    pin(1);
    void *v;
    uint64_t i;
    for (i = 0; i < n / 2; i++) {
        while (!ck_ring_dequeue_spsc(&r1, b1, &v)) {
        }
        while (!ck_ring_enqueue_spsc(&r2, b2, v)) {
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int pingpong = (argc > 1) && !strcmp(argv[1], "pingpong");
    int by_value = (argc > 1) && !strcmp(argv[1], "throughput64");
    uint64_t i, bad = 0;
    msg64_t m;
    pthread_t th;
    double t0;
    void *v;

    if (argc > 2) {
        n = strtoull(argv[2], NULL, 10);
    }
    pin(0);
    ck_ring_init(&r1, RING);
    ck_ring_init(&r2, RING);
    t0 = now();
    if (by_value) {
        pthread_create(&th, NULL, producer64, NULL);
        for (i = 1; i <= n; i++) {
            while (!ck_ring_dequeue_spsc_msg64(&r1, m1, &m)) {
            }
            bad += (m.v != i);
        }
    } else if (!pingpong) {
        pthread_create(&th, NULL, producer, NULL);
        for (i = 1; i <= n; i++) {
            while (!ck_ring_dequeue_spsc(&r1, b1, &v)) {
            }
            bad += ((uintptr_t)v != i);
        }
    } else {
        pthread_create(&th, NULL, bouncer, NULL);
        for (i = 1; i <= n / 2; i++) {
            while (!ck_ring_enqueue_spsc(&r1, b1, (void*)(uintptr_t)i)) {
            }
            while (!ck_ring_dequeue_spsc(&r2, b2, &v)) {
            }
            bad += ((uintptr_t)v != i);
        }
    }
    pthread_join(th, NULL);
    t0 = now() - t0;
    if (bad) {
        return 1;
    }
    printf("RESULT %.4f\n", pingpong ? t0 / (n / 2.0) * 1e6 : n / t0);
    return 0;
}
