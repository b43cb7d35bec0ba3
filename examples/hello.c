/* SPDX-License-Identifier: BSD-3-Clause */
/* The smallest ringk program: one ring kernel, three messages from the host, a clean exit.
 *   cc hello.c $(pkg-config --cflags --libs ringk) && ./a.out */
#include <ringk/api/ringk.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int greet(ringk_kernel_t *kernel, const ringk_msg_t *msg, void *arg)
{
    printf("%s got \"%s\"\n", ringk_kernel_name(kernel), (const char*)ringk_msg_payload(msg));
    ++*(int*)arg;
    return 0;
}

int main(void)
{
    static int count;
    ringk_kernel_params_t kp = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER,
        .name = "greeter", .handler = greet, .arg = &count
    };
    ringk_ctx_params_t cp = {.field_mask = 0};
    const char *words[] = {"hello", "ring", "kernels"};
    ringk_kernel_t *k;
    ringk_ctx_t *ctx;
    int i;

    if ((ringk_ctx_create(&cp, &ctx) != 0) || (ringk_kernel_create(ctx, &kp, &k) != 0) ||
        (ringk_ctx_start(ctx) != 0)) {
        return 1;
    }
    for (i = 0; i < 3; i++) {
        ringk_send(ctx, NULL, "greeter", RINGK_MSG_DATA, words[i], strlen(words[i]) + 1,
                   RINGK_WAIT_FOREVER);
    }
    while (__atomic_load_n(&count, __ATOMIC_ACQUIRE) < 3) {
        usleep(1000);
    }
    return ringk_ctx_destroy(ctx) == 0 ? 0 : 1;
}
