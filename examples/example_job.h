/* SPDX-License-Identifier: BSD-3-Clause */
/* How the examples join a job: built with mpicc and -DRINGK_EXAMPLE_MPI they take rank, size and
 * an allgather from MPI; otherwise the runtime reads RINGK_ROOT/RINGK_RANK/RINGK_SIZE (or runs
 * as one process). */
#ifndef RINGK_EXAMPLE_JOB_H
#define RINGK_EXAMPLE_JOB_H

#include <ringk/api/ringk.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#ifdef RINGK_EXAMPLE_MPI
#include <mpi.h>

static int example_mpi_allgather(void *arg, const void *in, void *out, size_t len)
{
    return (MPI_Allgather(in, (int)len, MPI_BYTE, out, (int)len, MPI_BYTE, MPI_COMM_WORLD) ==
            MPI_SUCCESS) ? 0 : -EIO;
}

static void example_job_begin(ringk_ctx_params_t *params, int *argc, char ***argv)
{
    int rank, size;

    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    params->field_mask |= RINGK_CTX_PARAM_FIELD_JOB;
    params->job.rank      = rank;
    params->job.size      = size;
    params->job.allgather = example_mpi_allgather;
    params->job.arg       = NULL;
}

static void example_job_end(void)
{
    MPI_Finalize();
}
#else
static inline void example_job_begin(ringk_ctx_params_t *params, int *argc, char ***argv)
{
}

static inline void example_job_end(void)
{
}
#endif

/* The examples' log hook: warnings and errors to stderr. */
static void example_log(void *arg, int level, const char *message)
{
    if (level <= RINGK_LOG_WARN) {
        fprintf(stderr, "ringk: %s\n", message);
    }
}

static pthread_mutex_t example_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t  example_cv = PTHREAD_COND_INITIALIZER;

/* Wakes the host thread in example_idle(): a handler calls it once it has done what the host
 * waits for. */
static inline void example_notify(void)
{
    pthread_mutex_lock(&example_mu);
    pthread_cond_broadcast(&example_cv);
    pthread_mutex_unlock(&example_mu);
}

/* Waits between looks at work that kernels finish, until example_notify() or for at most 20 ms
 * (a notify just before the wait is missed, the look after it is not): 0, or -EPIPE when the job
 * lost a process (it died or became unreachable), so that the work will never come. The host
 * thread blocks rather than waking every millisecond: on a machine with no core to spare, each
 * wakeup takes a turn from a polling kernel thread (a cross-process ping-pong with 1 ms sleeps
 * here ran 1.39x raw UCP AM, with this wait 1.29x). */
static int example_idle(ringk_ctx_t *ctx)
{
    struct timespec ts;
    int lost;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&example_mu);
    pthread_cond_timedwait(&example_cv, &example_mu, &ts);
    pthread_mutex_unlock(&example_mu);
    lost = ringk_ctx_peers_lost(ctx);
    if (lost > 0) {
        fprintf(stderr, "rank %d: the job lost %d process(es); giving up\n", ringk_ctx_rank(ctx),
                lost);
        return -EPIPE;
    }
    return 0;
}

/* Waits until every kernel of this process has terminated (it was sent a TERMINATE): 0, or
 * -EPIPE when the job lost a process first. */
static int example_wait_terminated(ringk_ctx_t *ctx, ringk_kernel_t **kernels, unsigned n)
{
    ringk_kernel_stats_t st = {.field_mask = RINGK_KERNEL_STATS_FIELD_ALL};
    unsigned i;

    for (i = 0; i < n; i++) {
        for (;;) {
            ringk_kernel_stats_query(kernels[i], &st);
            if (st.state == RINGK_KERNEL_TERMINATED) {
                break;
            }
            if (example_idle(ctx) != 0) {
                return -EPIPE;
            }
        }
    }
    return 0;
}

/* A rank other than 0 serves: its kernels run until rank 0 terminates them, then the context is
 * destroyed. 0, or -EPIPE when the job lost a process first. */
static inline int example_serve(ringk_ctx_t *ctx, ringk_kernel_t **kernels, unsigned n)
{
    int ret = example_wait_terminated(ctx, kernels, n);

    ringk_ctx_destroy(ctx);
    return ret;
}

#endif
