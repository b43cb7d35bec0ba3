# SPDX-License-Identifier: BSD-3-Clause
# Reads the line each process of the examples and job programs ends with, for test_examples.sh,
# test_job.sh and test_job_gpu.sh (sourced), and runs jobs of them (job):
#   RESULT <program> rank=<r> size=<n> ok=<0|1> key=value ...
# with integer values; ok=1 means the program's own checks passed, and then it exits 0.

# result LOG PROGRAM RANK: prints PROGRAM's RESULT line of rank RANK in file LOG; fails, printing
# nothing, unless there is exactly one
result() {
    local lines

    lines=$(grep -- "^RESULT $2 rank=$3 " "$1") || return 1
    [ "$(wc -l <<<"$lines")" -eq 1 ] || return 1
    echo "$lines"
}

# field LINE KEY: prints the value of KEY in RESULT line LINE; fails when LINE has no KEY
field() {
    local kv

    for kv in $1; do
        case $kv in "$2="*) echo "${kv#*=}"; return 0 ;; esac
    done
    return 1
}

# compare A OP B: whether integer A OP B holds, OP one of = >= <= < >
compare() {
    case $2 in
        =) [ "$1" -eq "$3" ] ;;
        '>=') [ "$1" -ge "$3" ] ;;
        '<=') [ "$1" -le "$3" ] ;;
        '<') [ "$1" -lt "$3" ] ;;
        '>') [ "$1" -gt "$3" ] ;;
        *) false ;;
    esac
}

# fields LINE COND...: checks each COND on RESULT line LINE: KEY=V, KEY>=V, KEY<=V, KEY<V or
# KEY>V, where V is an integer or another KEY of LINE. Prints each COND that does not hold, with
# the values it compared, and fails then.
fields() {
    local line=$1 cond key op want have bad=0

    shift
    for cond in "$@"; do
        key=${cond%%[<>=]*}
        op=${cond#"$key"}
        want=${op#[<>=]}
        want=${want#=}
        op=${op%"$want"}
        case $want in
            '' | *[!0-9-]*) want=$(field "$line" "$want") || want= ;;
        esac
        have=$(field "$line" "$key") || have=
        if ! compare "$have" "$op" "$want" 2>/dev/null; then
            echo "$cond does not hold: $key is '$have', compared with '$want'"
            bad=1
        fi
    done
    return $bad
}

# results LOG NPROCS SPEC... -- CMD...: checks the RESULT lines in file LOG of a job of NPROCS
# processes that ran CMD (the program is CMD's first word with a '/', less any _mpi or _emu
# suffix):
# each rank has exactly one, saying ok=1 and size=NPROCS; a SPEC "RANKS: COND..." checks the
# CONDs (as fields does) in rank RANKS: a number, "rest" (every rank but 0) or "all". Prints
# what fails, and fails then.
results() {
    local log=$1 np=$2 prog="" spec conds line out r w bad=0
    local specs=()

    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        specs+=("$1")
        shift
    done
    for w in "$@"; do
        case $w in */*) prog=${w##*/}; prog=${prog%_mpi}; prog=${prog%_emu}; prog=${prog%_gpu}; break ;; esac
    done
    for r in $(seq 0 $((np - 1))); do
        if ! line=$(result "$log" "$prog" "$r"); then
            echo "rank $r: not exactly one 'RESULT $prog rank=$r' line"
            bad=1
            continue
        fi
        conds="ok=1 size=$np"
        for spec in "${specs[@]}"; do
            case ${spec%%:*} in
                all) ;;
                rest) [ "$r" -gt 0 ] || continue ;;
                *) [ "${spec%%:*}" = "$r" ] || continue ;;
            esac
            conds+=" ${spec#*:}"
        done
        # shellcheck disable=SC2086 # one COND a word
        if ! out=$(fields "$line" $conds); then
            sed "s/^/rank $r: /" <<<"$out"
            bad=1
        fi
    done
    return $bad
}

# job NAME NPROCS SPEC... -- CMD...: runs CMD as NPROCS processes joined by RINGK_*; each must
# exit 0 and its RESULT line say ok=1, size=NPROCS and what the SPECs (results) ask. Uses the
# caller's ok, nok and port (the job's port is the next one).
job() {
    local name=$1 np=$2 r rc=0 why all logs=() pids=() specs=()
    shift 2
    while [ "$1" != -- ]; do
        specs+=("$1")
        shift
    done
    shift
    port=$((port + 1))
    for r in $(seq 1 $((np - 1))); do
        logs[$r]=$(mktemp)
        env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=$np RINGK_RANK=$r UCX_TLS=ringk,self \
            timeout 120 "$@" >"${logs[$r]}" 2>&1 &
        pids[$r]=$!
    done
    logs[0]=$(mktemp)
    env RINGK_ROOT=127.0.0.1:$port RINGK_SIZE=$np RINGK_RANK=0 UCX_TLS=ringk,self \
        timeout 120 "$@" >"${logs[0]}" 2>&1 || rc=$?
    for r in $(seq 1 $((np - 1))); do
        wait ${pids[$r]} || rc=$?
    done
    all=$(mktemp)
    cat "${logs[@]}" >"$all"
    if why=$(results "$all" "$np" "${specs[@]}" -- "$@") && [ $rc -eq 0 ]; then
        ok "$name"
        grep -v -e "^\[" -e "^RESULT " "$all" | sed 's/^/# /'
    else
        nok "$name (exit $rc)" "$(cat "$all"; echo "$why")"
    fi
    rm -f "${logs[@]}" "$all"
}
