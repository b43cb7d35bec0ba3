# SPDX-License-Identifier: BSD-3-Clause
# Reads the line each process of the examples and job programs ends with, for test_examples.sh
# and test_job.sh (sourced):
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
        case $w in */*) prog=${w##*/}; prog=${prog%_mpi}; prog=${prog%_emu}; break ;; esac
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
