/* SPDX-License-Identifier: BSD-3-Clause */
/* ZeroMQ side of bench/runtime_vs.sh: inproc PAIR sockets between two threads, one-way 8-byte
 * throughput or ping-pong. */
#define _GNU_SOURCE
#include <zmq.h>

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

static void *zctx;
static uint64_t n = 2000000;
static int pingpong;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *peer(void *a)
{
    pin(1);
    void *s = zmq_socket(zctx, ZMQ_PAIR);
    uint64_t i, v;

    zmq_connect(s, "inproc://bench");
    for (i = 0; i < (pingpong ? n / 2 : n); i++) {
        if (pingpong) {
            zmq_recv(s, &v, 8, 0);
            zmq_send(s, &v, 8, 0);
        } else {
            zmq_send(s, &i, 8, 0);
        }
    }
    zmq_close(s);
    return NULL;
}

int main(int argc, char **argv)
{
    uint64_t i, v, bad = 0;
    pthread_t th;
    double t0;
    void *s;

    pingpong = (argc > 1) && !strcmp(argv[1], "pingpong");
    if (argc > 2) {
        n = strtoull(argv[2], NULL, 10);
    }
    pin(0);
    zctx = zmq_ctx_new();
    s    = zmq_socket(zctx, ZMQ_PAIR);
    zmq_bind(s, "inproc://bench");
    pthread_create(&th, NULL, peer, NULL);
    t0 = now();
    for (i = 0; i < (pingpong ? n / 2 : n); i++) {
        if (pingpong) {
            zmq_send(s, &i, 8, 0);
        }
        zmq_recv(s, &v, 8, 0);
        bad += (v != i);
    }
    t0 = now() - t0;
    pthread_join(th, NULL);
    zmq_close(s);
    zmq_ctx_term(zctx);
    if (bad) {
        return 1;
    }
    printf("RESULT %.4f\n", pingpong ? t0 / (n / 2.0) * 1e6 : n / t0);
    return 0;
}
