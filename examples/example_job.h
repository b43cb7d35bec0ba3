/* SPDX-License-Identifier: BSD-3-Clause */
/* How the examples join a job: built with mpicc and -DRINGK_EXAMPLE_MPI they take rank, size and
 * an allgather from MPI; otherwise the runtime reads RINGK_ROOT/RINGK_RANK/RINGK_SIZE (or runs
 * as one process). */
#ifndef RINGK_EXAMPLE_JOB_H
#define RINGK_EXAMPLE_JOB_H

#include <ringk/api/ringk.h>

#include <errno.h>
#include <stdio.h>
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
static void example_job_begin(ringk_ctx_params_t *params, int *argc, char ***argv)
{
}

static void example_job_end(void)
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

/* Sleeps a millisecond between looks at work that other processes finish: 0, or -EPIPE when
 * the job lost a process (it died or became unreachable), so that work will never come. */
static int example_idle(ringk_ctx_t *ctx)
{
    int lost;

    usleep(1000);
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
    ringk_kernel_stats_t st;
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
