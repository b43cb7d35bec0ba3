#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI programs over ringk (pml ucx, UCX_TLS=ringk,self), as TAP: ping-pong 1 B..16 MiB,
# allreduce/alltoall with 4 ranks (oversubscribed), one-sided put/get/accumulate through osc
# ucx (fence epochs, 4 ranks; passive target with lock/Rget/Rput/atomics/unlock, 2 and 4
# ranks). Each test also asserts from UCX's own log that the lanes used are ringk's. Then the
# one-sided test once more as a user runs it: started through ringk-run with no --mca osc and
# none in the environment, where Debian's openmpi-mca-params.conf (osc = ^ucx,pt2pt) would put
# MPI_Put / MPI_Get on osc rdma, off ringk: the wrapper selects osc ucx.
set -u
top=${RINGK_TOP_BUILDDIR:?}
ex=$top/examples/mpi
if [ ! -x "$ex/mpi_pingpong" ]; then
    echo "1..0 # SKIP built without MPI (configure found no mpicc)"
    exit 0
fi
run=(timeout 120 mpirun --allow-run-as-root --oversubscribe --mca pml ucx
     --mca opal_common_ucx_tls any --mca opal_common_ucx_devices any
     -x UCX_TLS=ringk,self -x UCX_LOG_LEVEL=info -x LD_PRELOAD)
n=0
fails=0
check() { # check NAME EXPECTED-OUTPUT LANE-PATTERN CMD...
    local name=$1 expect=$2 lanes=$3 out rc
    shift 3
    n=$((n + 1))
    out=$("$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q "$expect" <<<"$out" && grep -q "$lanes" <<<"$out" &&
       ! grep -v "UCX_\* env variables" <<<"$out" | grep -q "posix\|sysv\|cma/"; then
        echo "ok $n - $name"
        grep -E "^mpi_" <<<"$out" | sed 's/^/# /'
    else
        echo "not ok $n - $name (exit $rc)"
        tail -n 30 <<<"$out" | sed 's/^/# /'
        fails=$((fails + 1))
    fi
}
echo "1..6"
check "mpi ping-pong 1 B .. 16 MiB over ringk" "0 errors" "tag(ringk/ring)" \
    "${run[@]}" -np 2 "$ex/mpi_pingpong" 2000
check "mpi allreduce + alltoall, 4 ranks over ringk" "0 errors" "tag(ringk/ring)" \
    "${run[@]}" -np 4 "$ex/mpi_collectives"
check "mpi osc ucx put/get/accumulate, 4 ranks over ringk" "0 errors" "rma(ringk/ring ringk/mapped)" \
    "${run[@]}" -np 4 --mca osc ucx "$ex/mpi_osc"
for np in 2 4; do
    check "mpi osc ucx passive target (lock/Rget/Rput/atomics/unlock), $np ranks over ringk" \
        "0 errors" "rma(ringk/ring ringk/mapped) amo(ringk/mapped)" "${run[@]}" -np $np --mca osc ucx "$ex/mpi_osc_passive"
done
wrapper=(env -u OMPI_MCA_osc -u OMPI_MCA_opal_common_ucx_tls -u OMPI_MCA_opal_common_ucx_devices
         "$top/contrib/ringk-run" timeout 120 mpirun --allow-run-as-root --oversubscribe
         --mca pml ucx -x UCX_TLS=ringk,self -x UCX_LOG_LEVEL=info -x LD_PRELOAD)
check "mpi one-sided through ringk-run without --mca osc: osc ucx over ringk" "0 errors" \
    "rma(ringk/ring ringk/mapped)" "${wrapper[@]}" -np 2 "$ex/mpi_osc"
[ $fails -eq 0 ]
