/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk job bootstrap from the environment (RINGK_ROOT, RINGK_RANK, RINGK_SIZE). */
#ifndef RINGK_JOB_H
#define RINGK_JOB_H

#include <ringk/api/ringk.h>

/**
 * Fills @a job from RINGK_ROOT/RINGK_RANK/RINGK_SIZE (rank 0 starts listening here).
 * @return 0 when the environment describes a job, 1 when it describes none (one process), or
 *         -EINVAL with the bad variable, its value and the limit in @a err.
 */
int ringk_job_from_env(ringk_job_t *job, char *err, size_t err_len);

/** Closes what ringk_job_from_env() opened. */
void ringk_job_env_release(ringk_job_t *job);

#endif
