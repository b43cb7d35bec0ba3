/* SPDX-License-Identifier: BSD-3-Clause */
/* libringk's network layer as the runtime sees it: the job's other processes, connected with
 * UCP (the files of this directory). The runtime calls down through this header only;
 * the network layer calls up only through the delivery, barrier, topic and directory calls of
 * ringk_internal.h, no such call leads back down into it, and it never takes the context's
 * lock itself (contrib/layout.py checks the calls). */
#ifndef RINGK_NET_H
#define RINGK_NET_H

#include "ringk/ringk_internal.h"


/** Connects to the job's other processes (collective): UCP worker, endpoints, directory. */
int ringk_remote_start(ringk_ctx_t *ctx);
void ringk_remote_stop(ringk_ctx_t *ctx);
/** Progresses the job's network from an idle kernel thread; returns the events handled. */
unsigned ringk_remote_poll(ringk_ctx_t *ctx);
/** A kernel thread that polled stops polling (it sleeps or ends): the progress thread takes
 *  over at once rather than after its nap. */
void ringk_remote_unpoll(ringk_ctx_t *ctx);
/* How many peers' endpoints have failed. */
int ringk_remote_lost(const ringk_ctx_t *ctx);
/** Publishes to the topic's subscribers in other processes: one AM per such process, each taking
 *  one of RINGK_TOPIC_WINDOW credits for that process (waiting as @a timeout_ms says).
 *  *reached_p: subscribers reached. @return 0, -EAGAIN / -ETIMEDOUT (a process's publishes are
 *  not consumed), or -EPIPE (some process unreachable). */
int ringk_remote_publish(ringk_ctx_t *ctx, ringk_kernel_t *from, const char *topic,
                         const void *payload, size_t length, int timeout_ms, unsigned *reached_p);
/** Whether a kernel of another process declares topic @a name (topics_pub or topics_sub, as
 *  exchanged at start): 1 or 0. */
int ringk_remote_topic_declared(ringk_ctx_t *ctx, const char *name);
/** How many processes of the job have participants in barrier @a name (from the directory
 *  exchanged at start). */
unsigned ringk_remote_barrier_processes(ringk_ctx_t *ctx, const char *name);
/** A process that takes part in barrier @a name and is gone (left the job or lost): its rank,
 *  or -1 while all are there. */
int ringk_remote_barrier_gone(ringk_ctx_t *ctx, const char *name);
/** Sends an arrival of this process at generation @a gen of barrier @a name to process
 *  @a rank (@a release 0, waiting until it is sent), called without ctx->lock. 0 or -EPIPE. */
int ringk_remote_barrier_send(ringk_ctx_t *ctx, int rank, const char *name, uint64_t gen,
                              int release);
/** Sends the release of generation @a gen to every other process that takes part, without
 *  waiting (it may run in a receive callback); called without ctx->lock. */
void ringk_remote_barrier_release(ringk_ctx_t *ctx, const char *name, uint64_t gen);
/** Finds a kernel of another process by name: rank and its local id. */
int ringk_remote_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p, uint32_t *id_p);
/** ringk_remote_lookup(), and what the process's directory entry said of the kernel's device
 *  inbox in *@a e_p (kind RINGK_DEV_EXPORT_NONE when nothing; checked only for its kind and
 *  receiver: the rest is the caller's to check). 0 or -ENOENT. */
int ringk_remote_dev_lookup(ringk_ctx_t *ctx, const char *name, int *rank_p,
                            ringk_dev_export_t *e_p);
/** The pid process @a rank said it has in its directory (0: none, it has no kernels). */
uint32_t ringk_remote_rank_pid(const ringk_ctx_t *ctx, int rank);
/** Whether process @a rank left the job or was lost (its endpoint failed). */
int ringk_remote_gone(const ringk_ctx_t *ctx, int rank);
/** Whether process @a rank, of this node, was lost (gone without saying goodbye). */
int ringk_remote_lost_here(const ringk_ctx_t *ctx, int rank);
/** Fills the remote fields of @a rt, a route of @a from (NULL: the host) resolved to kernel
 *  rt->remote_id of process rt->rank, for ringk_remote_send_try(). */
void ringk_remote_route_init(ringk_ctx_t *ctx, const ringk_kernel_t *from, route_t *rt);
/* What ringk_remote_send_try() returns besides 0 and a negative errno (positive: no errno). */
#define RINGK_REMOTE_NO_CREDIT 1 /* no credit for the target: nothing sent, nothing changed */
#define RINGK_REMOTE_BUSY      2 /* UCP could not send it at once: nothing sent or changed */
#define RINGK_REMOTE_PENDING   3 /* on its way: UCP reads the payload until the request the
                                  * call gave completes (ringk_remote_request_test) */
/** Sends one message as kernel @a from (NULL: the host) on @a rt, a route resolved to a kernel
 *  of another process, as one eager active message, when a credit for that kernel is left:
 *  0 (it left), RINGK_REMOTE_PENDING (it is leaving: *@a req_p, which the caller tests until it
 *  completes, the payload and the route kept until then: the header is in rt->remote_wire), RINGK_REMOTE_NO_CREDIT, RINGK_REMOTE_BUSY (with
 *  @a now only: UCP could not send it at once), or -EPIPE (the process is gone, or UCP failed
 *  the send: logged). It never waits and calls nothing of the runtime but what
 *  ringk_internal.h declares; what a send that could not go does is the caller's choice. */
int ringk_remote_send_try(ringk_ctx_t *ctx, ringk_kernel_t *from, route_t *rt,
                          ringk_msg_type_t type, const void *payload, size_t length, int now,
                          void **req_p);
/** Whether a send that ringk_remote_send_try() left on its way to process @a rank (@a req) has
 *  completed: 0 (then the request is freed), RINGK_REMOTE_PENDING, or -EPIPE (failed: logged,
 *  freed). It never waits. While it is pending it warns once it has been for wait_warn_ms, and
 *  again each time as long again has passed; @a warn (zeros at the first call of a wait) keeps
 *  when. */
int ringk_remote_request_test(ringk_ctx_t *ctx, int rank, void *req, uint64_t warn[2]);
/** What a send waiting for a credit of kernel @a id of process @a rank waits for, in words. */
void ringk_remote_wait_what(const ringk_ctx_t *ctx, int rank, uint32_t id, char *buf,
                            size_t size);

/* ---- job bootstrap (ringk_job.c) ---- */

/**
 * Fills @a job from RINGK_ROOT/RINGK_RANK/RINGK_SIZE and RINGK_JOIN_TIMEOUT_MS (rank 0 starts
 * listening here).
 * @return 0 when the environment describes a job, 1 when it describes none (one process), or
 *         -EINVAL with the bad or missing variable, its value and the limit in @a err.
 */
int ringk_job_from_env(ringk_job_t *job, char *err, size_t err_len);

/** What the last exchange of a job from the environment that failed met (the address, the
 *  limit, the error), or NULL (no such job, or no failure). */
const char *ringk_job_env_why(const ringk_job_t *job);

/** Closes what ringk_job_from_env() opened. */
void ringk_job_env_release(ringk_job_t *job);

#endif
