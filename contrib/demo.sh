#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job on a fresh Debian 12 machine: installs what is needed, builds ringk, and shows the
# transport and the runtime at work.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash contrib/setup.sh
bash contrib/build.sh _build
run=_build/contrib/ringk-run

echo
echo "=== 1. UCX sees the ringk transport through the loader wrapper: $run ucx_info -d"
# (awk reads to the end: an early exit would kill ucx_info with SIGPIPE, failing the pipeline)
$run ucx_info -d | awk '/Component: ringk/{p=1} p&&/^#$/{n++} p&&n<3{print}'
echo
echo "=== 2. ...and a program run without the wrapper does not"
if [ "$(ucx_info -d | grep -c ringk)" != 0 ]; then
    echo "unexpected: ringk visible without the wrapper" >&2
    exit 1
fi
echo "ucx_info -d without the wrapper: no ringk (as expected)"
echo
echo "=== 3. configuration variables: $run ucx_info -c | grep RINGK"
$run ucx_info -c | grep '^UCX_RINGK_'
echo
echo "=== 4. topology and paths: ringk_info (this machine), then a PCIe-only 4-GPU fixture"
_build/src/tools/ringk_info
echo
_build/src/tools/ringk_info --topo test/check/topo/pcie-4gpu.xml

perf() { # perf "ENV" ARGS...: ucx_perftest server and client on this host, prints the result
    local env=$1 port=$((40000 + RANDOM % 10000))
    shift
    env $env timeout 120 $run ucx_perftest -p $port "$@" >/dev/null 2>&1 &
    sleep 0.5
    env $env timeout 120 $run ucx_perftest localhost -p $port "$@" 2>&1 |
        grep -E "ep_cfg\[[0-9]\]|Stage|Final" | sed -e 's/^.*ep_cfg/  ep_cfg/'
    wait
}
echo
echo "=== 5. UCT level, two processes: ucx_perftest -t am_lat -x ringk -d ring (8 B)"
perf "" -t am_lat -x ringk -d ring -n 100000
echo
echo "=== 6. UCP level over ringk alone (UCX_TLS=ringk,self): tag_lat 8 B, tag_bw 1 MiB (rendezvous)"
perf "UCX_TLS=ringk,self UCX_LOG_LEVEL=info" -t tag_lat -n 100000
perf "UCX_TLS=ringk,self" -t tag_bw -s 1048576 -n 2000
if [ -x _build/examples/mpi/mpi_pingpong ]; then
    echo
    echo "=== 7. Open MPI through pml ucx over ringk: ping-pong 1 B..16 MiB, allreduce/alltoall on 4 ranks"
    mpi=($run mpirun --allow-run-as-root --oversubscribe --mca pml ucx --mca opal_common_ucx_tls any
         --mca opal_common_ucx_devices any -x UCX_TLS=ringk,self -x LD_PRELOAD)
    "${mpi[@]}" -np 2 _build/examples/mpi/mpi_pingpong
    "${mpi[@]}" -np 4 _build/examples/mpi/mpi_collectives
    "${mpi[@]}" -np 4 --mca osc ucx _build/examples/mpi/mpi_osc
fi
echo
echo "=== 8. the actor runtime: ping-pong, a producer/workers/aggregator pipeline, a heat stencil with halo exchange and PageRank, each checked against a sequential computation"
_build/examples/pingpong 100000
_build/examples/pipeline 200000 4
_build/examples/heat 256 256 100 4
_build/examples/pagerank 20000 20 4
echo
echo "=== 9. the same runtime as a job of 3 processes (RINGK_ROOT/RINGK_RANK/RINGK_SIZE), over ringk"
port=$((40000 + RANDOM % 10000))
for r in 2 1; do
    RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=3 RINGK_RANK=$r UCX_TLS=ringk,self \
        $run _build/examples/pagerank 30000 15 6 &
done
RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=3 RINGK_RANK=0 UCX_TLS=ringk,self \
    $run _build/examples/pagerank 30000 15 6
wait
echo
echo "demo: done (benchmark against posix: bash bench/ringk_vs_posix.sh)"
