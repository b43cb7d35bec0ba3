// SPDX-License-Identifier: BSD-3-Clause
// CAF side of bench/runtime_vs.sh: two event-based actors bounce a counter; prints the time per
// round trip.
#include "caf/all.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace caf;

using ball_atom = atom_constant<atom("ball")>;

static long rounds = 100000;

behavior pong_fn(event_based_actor *self)
{
    return {[=](ball_atom, long v) {
        self->send(actor_cast<actor>(self->current_sender()), ball_atom::value, v);
    }};
}

behavior ping_fn(event_based_actor *self, actor buddy)
{
    self->send(buddy, ball_atom::value, 0L);
    return {[=](ball_atom, long v) {
        if (v + 1 >= rounds) {
            self->send_exit(buddy, exit_reason::user_shutdown);
            self->quit();
            return;
        }
        self->send(buddy, ball_atom::value, v + 1);
    }};
}

int main(int argc, char **argv)
{
    if ((argc > 2) && !strcmp(argv[1], "pingpong")) {
        rounds = strtol(argv[2], nullptr, 10) / 2;
    }
    actor_system_config cfg;
    actor_system sys{cfg};
    auto t0 = std::chrono::steady_clock::now();
    auto p  = sys.spawn(pong_fn);
    sys.spawn(ping_fn, p);
    sys.await_all_actors_done();
    auto dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("RESULT %.4f\n", dt / rounds * 1e6);
    return 0;
}
