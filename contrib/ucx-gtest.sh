#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ucx-gtest.sh [OPTIONS] [build|list|run|compare|all]: UCX's own gtest conformance suite for the
# ringk transport. Builds UCX's test/gtest sources, unmodified and in place in the UCX source
# tree (.cache/ucx-VERSION, contrib/fetch-ucx-src.sh), with a forced include
# (test/ucx-gtest/ringk_gtest.h) that instantiates every transport-generic UCT and UCP case for
# ringk, and for UCX's posix transport under its own prefix; links them against the
# UCX libraries (they export their internal symbols) and runs them with the plugin preloaded.
#
# Each test suite (ringk/uct_p2p_am_test, ...) runs in its own process; when one crashes or
# hangs, the cases it did not finish rerun one per process. Prints one TAP line per case and
#   ucx-gtest: P passed, F failed, C crashed, S skipped, K known
# and exits 1 when F + C > 0. Cases listed in test/ucx-gtest/known.txt (they fail the same way
# on posix) print 'not ok ... # TODO known: reason' and do not count as failures; cases listed
# in test/ucx-gtest/skip.txt are not run and print 'ok ... # SKIP excluded: reason'.
#
# Commands: build (the binary only), list (the cases that would run), run (build, then run;
# the default), compare (run, then rerun each ringk failure on the posix instance and print
# both results side by side: the evidence for known.txt), all (= compare).
# Options:
#   -b DIR    ringk build tree (default _build): its ucx-build/config.h and plugin
#   -o DIR    where objects, the binary and the logs go (default BUILD/ucx-gtest)
#   -f FILTER gtest filter inside the instance (default $GTEST_FILTER, or *)
#   -p PREFIX instance to run: ringk (default), ringk_self, posix, posix_self
#   -l LABEL  names this run's logs and results (default PREFIX): runs against other UCX
#             libraries keep their own
#   -t SECS   time limit of one case (UCX's gtest watchdog; default 60)
#   -T SECS   time limit of one suite process, plus 2 s per case in it (default 300); a hung
#             case is caught earlier, by the watchdog (-t)
#   -O LEVEL  optimization of the test code (default 1)
#   -j N      parallel compile jobs (default 2)
#   -J N      suites run at once, each in its own process (default 1); their results are
#             printed in the listed order all the same
# Environment: RINGK_PLUGIN (the plugin, default BUILD/src/uct/ringk/.libs/libuct_ringk.so),
#   UCX_GTEST_LIBDIR (prepended to LD_LIBRARY_PATH: run against other UCX libraries, e.g. an
#   in-tree UCX build), UCX_HANDLE_ERRORS (default bt), UCX_LOG_LEVEL (default warn),
#   UCX_SRC_DIR (UCX source tree, default the build's --with-ucx-src),
#   UCX_GTEST_KNOWN / UCX_GTEST_SKIP (the lists, default test/ucx-gtest/{known,skip}.txt),
#   GLIBC_TUNABLES (default glibc.malloc.hugetlb=1: malloc asks for transparent huge pages, so
#   the cases that move messages of gigabytes fault their buffers in 2 MiB at a time; on a VM
#   where a first touch costs 3.5 s a GiB in 4 KiB pages it costs 0.1 s so, docs/testing.md).
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)

usage() {
    sed -n '3,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0"
}

builddir=_build outdir='' filter=${GTEST_FILTER:-*} prefix=ringk label='' case_to=60 suite_to=300
opt=1 jobs=2 par=1 par_arg=1
while getopts "b:o:f:p:l:t:T:O:j:J:h" c; do
    case $c in
        b) builddir=$OPTARG ;;
        o) outdir=$OPTARG ;;
        f) filter=$OPTARG ;;
        p) prefix=$OPTARG ;;
        l) label=$OPTARG ;;
        t) case_to=$OPTARG ;;
        T) suite_to=$OPTARG ;;
        O) opt=$OPTARG ;;
        j) jobs=$OPTARG ;;
        J) par=$OPTARG par_arg=$OPTARG ;;
        h) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
cmd=${1:-run}
case $cmd in build|list|run|compare|all) ;; *) usage >&2; exit 2 ;; esac
[ "$cmd" = all ] && cmd=compare
case $prefix in
    ringk) cmp_prefix=posix ;;
    ringk_self) cmp_prefix=posix_self ;;
    posix|posix_self) cmp_prefix= ;;
    *) echo "ucx-gtest: unknown instance '$prefix' (ringk, ringk_self, posix, posix_self)" >&2
       exit 2 ;;
esac

label=${label:-$prefix}
case $label in *[!A-Za-z0-9_.-]*|'') echo "ucx-gtest: bad label '$label'" >&2; exit 2 ;; esac
case $par in
    *[!0-9]*|'') par=0 ;;
    *) par=$((10#$par)) ;;
esac
[ "$par" -ge 1 ] || { echo "ucx-gtest: bad -J '$par_arg' (suites at once: 1 or more)" >&2; exit 2; }
case $builddir in /*) ;; *) builddir=$top/$builddir ;; esac
outdir=${outdir:-$builddir/ucx-gtest}
case $outdir in /*) ;; *) outdir=$PWD/$outdir ;; esac
known_file=${UCX_GTEST_KNOWN:-$top/test/ucx-gtest/known.txt}
skip_file=${UCX_GTEST_SKIP:-$top/test/ucx-gtest/skip.txt}
bin=$outdir/gtest

die() {
    echo "ucx-gtest: $*" >&2
    echo "ucx-gtest: 0 passed, 1 failed, 0 crashed, 0 skipped, 0 known"
    exit 1
}

# --- build --------------------------------------------------------------------------------------
# The UCX the ringk build was configured for (configure --with-ucx, --with-ucx-src), else the
# one pkg-config finds
build_var() { sed -n "s/^$1 = //p" "$builddir/Makefile" 2>/dev/null; }
ucx_version=$(build_var UCX_VERSION)
if [ -n "$ucx_version" ]; then
    ucx_libdir=$(build_var UCX_LIBDIR)
    ucx_src_default=$(build_var UCX_SRC_DIR)
else
    ucx_version=$(pkg-config --modversion ucx 2>/dev/null) || die "pkg-config ucx failed (libucx-dev)"
    ucx_libdir=$(pkg-config --variable=libdir ucx)
    ucx_src_default=$top/.cache/ucx-$ucx_version
fi
ucx_src=${UCX_SRC_DIR:-$ucx_src_default}
gt=$ucx_src/test/gtest
ucx_cfg=$builddir/ucx-build/config.h
[ -f "$gt/common/main.cc" ] ||
    die "no UCX $ucx_version gtest sources in $ucx_src (run contrib/fetch-ucx-src.sh)"
[ -f "$ucx_cfg" ] || die "no $ucx_cfg (configure ringk first: contrib/build.sh $builddir)"

gtest_srcs="gtest.cc gtest-death-test.cc gtest-filepath.cc gtest-port.cc gtest-printers.cc
    gtest-test-part.cc gtest-typed-test.cc"
# common/test_perf.cc is left out: it needs libucxperf, which UCX does not install. ucp_test.cc
# takes the address of uct_ud_iface_flush, which lives in UCX's IB module:
# test/ucx-gtest/ud_flush_stub.c gives it one instead, so the binary needs no IB module and
# runs against a UCX build without IB (contrib/ucx-build.sh).
common_srcs="main.cc test_gtest_cmn.cc mem_buffer.cc test_helpers.cc test_obj_size.cc
    test_watchdog.cc test.cc"
uct_srcs="test_p2p_am.cc test_p2p_rma.cc test_p2p_err.cc test_p2p_mix.cc test_flush.cc
    test_fence.cc test_pending.cc test_event.cc test_many2one_am.cc test_peer_failure.cc
    test_progress.cc test_zcopy_comp.cc test_md.cc test_mem.cc test_uct_ep.cc uct_p2p_test.cc
    uct_test.cc test_amo.cc test_amo_add_xor.cc test_amo_and_or.cc test_amo_cswap.cc
    test_amo_fadd_fxor.cc test_amo_fand_for.cc test_amo_swap.cc v2/test_uct_query.cc"
ucp_srcs="ucp_test.cc ucp_datatype.cc test_ucp_tag.cc test_ucp_tag_cancel.cc
    test_ucp_tag_match.cc test_ucp_tag_mt.cc test_ucp_tag_probe.cc test_ucp_tag_xfer.cc
    test_ucp_tag_mem_type.cc test_ucp_am.cc test_ucp_rma.cc test_ucp_atomic.cc test_ucp_fence.cc
    test_ucp_mmap.cc test_ucp_memheap.cc test_ucp_stream.cc test_ucp_ep.cc
    test_ucp_peer_failure.cc test_ucp_wakeup.cc test_ucp_wireup.cc test_ucp_request.cc
    test_ucp_context.cc test_ucp_worker.cc"

# Writes FILE from stdin only when the content changed, so make sees no new timestamp.
write_if_changed() {
    local f=$1 tmp
    tmp=$(mktemp "$f.XXXXXX")
    cat >"$tmp"
    if cmp -s "$tmp" "$f"; then rm -f "$tmp"; else mv "$tmp" "$f"; fi
}

gen_makefile() {
    local s objs="" rules=""
    add() { # add DIR SRC FLAGS-VAR
        local o=obj/$1/${2%.cc}.o
        objs="$objs $o"
        rules="$rules$o: \$(GT)/$1/$2 Makefile
	@mkdir -p \$(@D)
	@echo '  CXX   $1/$2'
	@\$(CXX) \$($3) -MMD -MP -c -o \$@ \$<
"
    }
    for s in $gtest_srcs; do add common/googletest "$s" GTEST_FLAGS; done
    for s in $common_srcs; do add common "$s" COMMON_FLAGS; done
    for s in $uct_srcs; do add uct "$s" TEST_FLAGS; done
    for s in $ucp_srcs; do add ucp "$s" TEST_FLAGS; done
    objs="$objs obj/ud_flush_stub.o"
    rules="${rules}obj/ud_flush_stub.o: $top/test/ucx-gtest/ud_flush_stub.c Makefile
	@mkdir -p \$(@D)
	@echo '  CC    ud_flush_stub.c'
	@\$(CC) \$(CPPFLAGS) -O1 -Wall -MMD -MP -c -o \$@ \$<
"
    cat <<EOF
# generated by contrib/ucx-gtest.sh: UCX $ucx_version gtest against the installed UCX
GT        = $gt
CXX       = ${CXX:-g++}
CC        = ${CC:-gcc}
CPPFLAGS  = -DHAVE_CONFIG_H -I$(dirname "$ucx_cfg") -DTOP_SRCDIR=\\"$ucx_src\\" \\
            -I$ucx_src/src -I$ucx_src/test -I$gt \\
            -DGTEST_UCM_HOOK_LIB_DIR=\\"$outdir/ucm-hook-lib-not-built\\"
CXXFLAGS  = -std=c++11 -g -O$opt -fopenmp -fno-tree-vectorize -Wall -Wno-sign-compare \\
            ${CXXFLAGS:-}
GTEST_FLAGS  = \$(CPPFLAGS) \$(CXXFLAGS)
COMMON_FLAGS = \$(CPPFLAGS) \$(CXXFLAGS)
TEST_FLAGS   = \$(CPPFLAGS) \$(CXXFLAGS) -include $top/test/ucx-gtest/ringk_gtest.h
LDFLAGS   = -fopenmp -Wl,--dynamic-list-data -L$ucx_libdir -Wl,-rpath,$ucx_libdir ${LDFLAGS:-}
LIBS      = -lucp -luct -lucs -lucm -lpthread -ldl -lrt
OBJS      =$objs

gtest: \$(OBJS)
	@echo '  LINK  gtest'
	@\$(CXX) \$(LDFLAGS) -o \$@ \$(OBJS) \$(LIBS)

$rules
-include \$(OBJS:.o=.d)
EOF
}

build() {
    local t0=$SECONDS rc
    mkdir -p "$outdir" || die "cannot create $outdir"
    gen_makefile | write_if_changed "$outdir/Makefile"
    nice -n 10 make -s -C "$outdir" -j"$jobs" gtest
    rc=$?
    [ $rc -eq 0 ] || die "build failed (make -C $outdir)"
    echo "# ucx-gtest: binary $bin up to date ($((SECONDS - t0)) s)"
}

build
[ "$cmd" = build ] && exit 0

# --- environment of a run ------------------------------------------------------------------------
plugin=${RINGK_PLUGIN:-$builddir/src/uct/ringk/.libs/libuct_ringk.so}
[ -f "$plugin" ] || die "plugin not found at $plugin (build ringk, or set RINGK_PLUGIN)"
export LD_PRELOAD="$plugin${LD_PRELOAD:+:$LD_PRELOAD}"
export GLIBC_TUNABLES=${GLIBC_TUNABLES-glibc.malloc.hugetlb=1}
if [ -n "${UCX_GTEST_LIBDIR:-}" ]; then
    export LD_LIBRARY_PATH="$UCX_GTEST_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# Which UCX the binary runs on, from the loader itself: with UCX_GTEST_LIBDIR, every one of
# libucs, libuct, libucp and libucm must come from there.
loaded=$(LD_DEBUG=libs "$bin" --gtest_list_tests --gtest_filter=none 2>&1 >/dev/null |
         sed -n 's/.*calling init: \(.*\/lib\(ucs\|uct\|ucp\|ucm\)\.so[^ ]*\).*/\1/p' | sort -u)
echo "# ucx-gtest: UCX libraries loaded: ${loaded//$'\n'/ }"
if [ -n "${UCX_GTEST_LIBDIR:-}" ]; then
    for l in ucs uct ucp ucm; do
        path=$(grep "/lib$l\.so" <<<"$loaded" | head -n1)
        dir=${path%/*}
        case ":$UCX_GTEST_LIBDIR:" in
            *":$dir:"*|*":$dir/:"*) ;;
            *) die "lib$l comes from '${path:-nowhere}', not from UCX_GTEST_LIBDIR ($UCX_GTEST_LIBDIR)" ;;
        esac
    done
fi
export UCX_HANDLE_ERRORS=${UCX_HANDLE_ERRORS:-bt}
export UCX_LOG_LEVEL=${UCX_LOG_LEVEL:-warn}
export UCX_LOG_PRINT_ENABLE=${UCX_LOG_PRINT_ENABLE:-y}
export GTEST_COLOR=no
unset UCX_TLS GTEST_FILTER

# --- the cases ----------------------------------------------------------------------------------
# Prints 'SUITE CASE' (SUITE with its instance prefix) for the cases of the instance PREFIX
# that match the gtest filter FILTER, DISABLED_ ones included (they are reported skipped).
list_cases() { # list_cases PREFIX FILTER
    "$bin" --gtest_list_tests --gtest_filter="$2" 2>"$outdir/list.err" |
        awk -v p="$1/" '
            /^\[/ { next }
            /^[^ ]/ { suite = $1; sub(/\.$/, "", suite); next }
            /^  [^ ]/ { if (index(suite, p) == 1) print suite, $1 }'
}

# The lists: first field a glob of case names (PREFIX/suite.case/N), the rest the reason.
declare -A known_reason skip_reason
read_list() { # read_list FILE ARRAY CASE...
    local file=$1 pat reason c dflt
    local -n arr=$2
    shift 2
    [ -f "$file" ] || return 0
    dflt="listed in ${file##*/}"
    while read -r pat reason; do
        case $pat in ''|'#'*) continue ;; esac
        # 'ucx=VERSION-GLOB CASE REASON': an entry for the UCX releases the glob matches only
        if [[ $pat == ucx=* ]]; then
            # shellcheck disable=SC2053
            [[ $ucx_version == ${pat#ucx=} ]] || continue
            read -r pat reason <<<"$reason"
        fi
        for c in "$@"; do
            # the pattern is a glob on purpose; arr is associative (shellcheck takes a nameref
            # for an indexed array)
            # shellcheck disable=SC2053,SC2034,SC2004
            [[ $c == $pat ]] && arr[$c]=${reason:-$dflt}
        done
    done <"$file"
}

mapfile -t lines < <(list_cases "$prefix" "$filter")
if [ ${#lines[@]} -eq 0 ]; then
    echo "# ucx-gtest: no '$prefix/' case matches '$filter'"
    if [ "$filter" = '*' ]; then
        sed 's/^/# /' "$outdir/list.err" | tail -n 5
        die "no $prefix cases: is the plugin loaded ($plugin)?"
    fi
fi
declare -A suite_cases
suites=() all_cases=()
for l in "${lines[@]}"; do
    s=${l%% *} c=${l#* }
    [ -z "${suite_cases[$s]+x}" ] && suites+=("$s")
    suite_cases[$s]+="$c "
    all_cases+=("$s.$c")
done
read_list "$known_file" known_reason "${all_cases[@]}"
read_list "$skip_file" skip_reason "${all_cases[@]}"

if [ "$cmd" = list ]; then
    for c in "${all_cases[@]}"; do
        if [ -n "${skip_reason[$c]+x}" ]; then echo "$c  # excluded: ${skip_reason[$c]}"
        elif [ -n "${known_reason[$c]+x}" ]; then echo "$c  # known: ${known_reason[$c]}"
        else echo "$c"; fi
    done
    echo "# ${#all_cases[@]} cases in ${#suites[@]} suites"
    exit 0
fi

logdir=$outdir/logs/$label
rm -rf "$logdir"
mkdir -p "$logdir"

# --- parsing gtest output -----------------------------------------------------------------------
# parse_log LOG: prints 'NAME<TAB>STATUS<TAB>MS<TAB>DETAIL' for each case the log finished
# (STATUS ok, skip, fail) and 'NAME<TAB>running<TAB>0<TAB>DETAIL' for one it started and did not
# finish; DETAIL is the skip reason or the first lines of the failure.
parse_log() {
    awk '
        function flush(st, ms) {
            d = (st == "skip") ? skip : msg
            gsub(/\t/, " ", d); gsub(/  +/, " ", d)
            if (length(d) > 240) d = substr(d, 1, 237) "..."
            printf "%s\t%s\t%s\t%s\n", cur, st, ms, d
            cur = ""; msg = ""; skip = ""; nmsg = 0
        }
        /^\[ RUN      \] / { cur = $4; msg = ""; skip = ""; nmsg = 0; grab = 0; next }
        cur == "" { next }
        /: line [0-9]+: +[0-9]+ [A-Z]/ { next }   # the shell telling a child was killed
        /^\[     SKIP \] / { s = $0; sub(/^\[     SKIP \] */, "", s); sub(/^\(/, "", s)
                           sub(/\)$/, "", s); skip = s; next }
        /^\[  SKIPPED \] / { if (skip == "") skip = "skipped"; flush("skip", 0); next }
        /^\[       OK \] / { ms = $0; sub(/.*\(/, "", ms); sub(/ ms\).*/, "", ms)
                           flush(skip != "" ? "skip" : "ok", ms + 0); next }
        /^\[  FAILED  \] / { ms = $0; sub(/.*\(/, "", ms); sub(/ ms\).*/, "", ms)
                           flush("fail", ms + 0); next }
        /: Failure$/ { grab = 3; next }
        /Caught signal|abort testing|Assertion .* failed|\] *[a-z_]+\.c:[0-9]+ .*(Fatal|error|Assertion)/ {
            if (nmsg < 6) { msg = msg (msg == "" ? "" : " | ") $0; nmsg++ } ; next }
        grab > 0 { grab--; if ($0 != "" && nmsg < 6) { msg = msg (msg == "" ? "" : " | ") $0; nmsg++ }; next }
        END { if (cur != "") printf "%s\trunning\t0\t%s\n", cur, msg }
    ' "$1"
}

# Why a process ended: 'timeout' or 'signal NAME' or 'exit N'.
why_ended() { # why_ended RC LOG
    local rc=$1 log=$2
    if grep -q 'abort testing' "$log" || [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        echo "timeout"
    elif [ "$rc" -gt 128 ]; then
        echo "signal $(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))"
    else
        echo "exit $rc"
    fi
}

# --- running ------------------------------------------------------------------------------------
n=0 passed=0 failed=0 crashed=0 skipped=0 known=0
results=$outdir/results-$label.tsv
: >"$results"
tap=$outdir/results-$label.tap
: >"$tap"

emit() { # emit NAME KIND MS DETAIL   (KIND ok skip fail crash excluded)
    local name=$1 kind=$2 ms=$3 detail=${4//#/ } line
    n=$((n + 1))
    printf '%s\t%s\t%s\t%s\n' "$name" "$kind" "$ms" "$detail" >>"$results"
    case $kind in
        ok) line="ok $n - $name"; passed=$((passed + 1)) ;;
        skip) line="ok $n - $name # SKIP ${detail:-skipped}"; skipped=$((skipped + 1)) ;;
        excluded) line="ok $n - $name # SKIP excluded: $detail"; skipped=$((skipped + 1)) ;;
        fail|crash)
            if [ -n "${known_reason[$name]+x}" ]; then
                line="not ok $n - $name: $kind: $detail # TODO known: ${known_reason[$name]}"
                known=$((known + 1))
            else
                line="not ok $n - $name: $kind: $detail"
                if [ "$kind" = fail ]; then failed=$((failed + 1)); else crashed=$((crashed + 1)); fi
            fi ;;
    esac
    echo "$line" | tee -a "$tap"
}

# run_gtest LOG TIMEOUT FILTER: runs the binary; returns its status.
run_gtest() {
    # (in a subshell whose stderr is the log: bash's own 'Aborted' notes go there too)
    (timeout -k 5 "$2" stdbuf -o0 -e0 "$bin" --gtest_filter="$3" -t "$case_to"; exit $?) >"$1" 2>&1
}

# Runs one case in its own process and emits its result; NOTE is added to a crash detail.
run_alone() { # run_alone NAME [NOTE]
    local name=$1 note=${2:-} log rc res st ms detail why
    log=$logdir/case.${name//\//_}.log
    run_gtest "$log" $((case_to + 30)) "$name"
    rc=$?
    res=$(parse_log "$log" | awk -F'\t' -v c="$name" '$1 == c' | tail -n1)
    IFS=$'\t' read -r _ st ms detail <<<"$res"
    case ${st:-} in
        ok|skip) if [ -n "$note" ]; then emit "$name" crash 0 "$note; alone: $st"
                 else emit "$name" "$st" "$ms" "$detail"; fi ;;
        fail) emit "$name" fail "$ms" "$detail${note:+; $note}" ;;
        *) why=$(why_ended "$rc" "$log")
           [ -z "$detail" ] && detail=$(grep -m1 -E 'Caught signal|Assertion|Fatal' "$log")
           emit "$name" crash 0 "$why${detail:+: $detail}${note:+; $note}" ;;
    esac
}

# The cases of suite S that run (exclusions and DISABLED_ cases left out), in ${torun[@]}; with
# EMIT=1 the left-out ones are emitted.
suite_torun() { # suite_torun S EMIT
    local s=$1 c name
    torun=()
    for c in ${suite_cases[$s]}; do
        name=$s.$c
        if [ -n "${skip_reason[$name]+x}" ]; then
            [ "$2" = 1 ] && emit "$name" excluded 0 "${skip_reason[$name]}"
        elif [[ $c == DISABLED_* || $c == */DISABLED_* ]]; then
            [ "$2" = 1 ] && emit "$name" skip 0 "DISABLED_ in UCX"
        else
            torun+=("$name")
        fi
    done
}

# Runs suite S in its own process; its log is LOGDIR/suite.S.log and, once it ended, LOG.rc
# holds 'RC SECONDS' (LOG.rc is written last: its presence says the suite ended).
run_suite() { # run_suite S
    local s=$1 log ts rc
    suite_torun "$s" 0
    log=$logdir/suite.${s//\//_}.log
    ts=$SECONDS
    # The cases by name: the filter and the exclusions are already applied (names hold no
    # '*', '?', ':' or '-' that gtest's filter would read as a pattern).
    run_gtest "$log" $((suite_to + 2 * ${#torun[@]})) "$(IFS=:; echo "${torun[*]}")"
    rc=$?
    echo "$rc $((SECONDS - ts))" >"$log.rc.tmp" && mv "$log.rc.tmp" "$log.rc"
}

t_run=$SECONDS
echo "# ucx-gtest: UCX $ucx_version gtest, instance $prefix, filter '$filter', plugin $plugin"
echo "# ucx-gtest: ${#all_cases[@]} cases in ${#suites[@]} suites, $par at once; logs in $logdir"
# The suites with cases to run go to a pool of $par processes, those with the most cases first
# (the longest ones then do not start last); results are read and emitted in the listed order.
torun_suites=()
for s in "${suites[@]}"; do
    suite_torun "$s" 0
    [ ${#torun[@]} -gt 0 ] && torun_suites+=("${#torun[@]} $s")
done
# The pool starts no suite once this script is gone (a suite that runs ends by its limit).
(
    while read -r _ s; do
        [ -n "$s" ] || continue # no suite to run: printf's one empty line
        while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do
            wait -n
        done
        kill -0 $$ 2>/dev/null || break
        run_suite "$s" &
    done < <(printf '%s\n' "${torun_suites[@]}" | sort -k1,1rn -k2)
    wait
) &
pool=$!
trap 'kill "$pool" 2>/dev/null' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
suite_times=()
for s in "${suites[@]}"; do
    suite_torun "$s" 1
    [ ${#torun[@]} -eq 0 ] && continue
    log=$logdir/suite.${s//\//_}.log
    until [ -f "$log.rc" ]; do
        kill -0 "$pool" 2>/dev/null || [ -f "$log.rc" ] || { echo "125 0" >"$log.rc"; break; }
        sleep 0.2
    done
    read -r rc secs <"$log.rc"
    declare -A done_st=()
    crashed_case='' crash_detail=''
    while IFS=$'\t' read -r name st ms detail; do
        if [ "$st" = running ]; then
            crashed_case=$name crash_detail=$detail
            continue
        fi
        done_st[$name]=1
        emit "$name" "$st" "$ms" "$detail"
    done < <(parse_log "$log")
    ts=$SECONDS
    if [ $rc -ne 0 ] && [ $rc -ne 1 ] || [ -n "$crashed_case" ]; then
        # The process died (or hung): the case it was in reruns alone, as does every case it
        # did not reach.
        why=$(why_ended "$rc" "$log")
        echo "# ucx-gtest: $s ended by $why${crashed_case:+ in $crashed_case}; rerunning its unfinished cases one per process"
        for name in "${torun[@]}"; do
            [ -n "${done_st[$name]+x}" ] && continue
            if [ "$name" = "$crashed_case" ]; then
                run_alone "$name" "in the suite run: $why${crash_detail:+ ($crash_detail)}"
            else
                run_alone "$name"
            fi
        done
    fi
    unset done_st
    suite_times+=("$((secs + SECONDS - ts)) $s")
done
wait "$pool"
t_run=$((SECONDS - t_run))

echo "1..$n" | tee -a "$tap"
echo "# ucx-gtest: run took $t_run s; slowest suites (s):"
printf '%s\n' "${suite_times[@]}" | sort -rn | head -n 8 | sed 's/^/#   /'
echo "# ucx-gtest: slowest cases (ms):"
sort -t$'\t' -k3,3rn "$results" | head -n 8 | awk -F'\t' '{printf "#   %s %s\n", $3, $1}'

# --- compare: each ringk failure rerun on posix ---------------------------------------------------
# The posix suite of a failing case runs once, with the cases that ran on ringk in the same
# order (a case that failed only after the cases before it ran gets the same history on
# posix); a case that suite did not finish reruns alone.
cmp_result() { # cmp_result CASE: prints STATUS<TAB>DETAIL of CASE on the comparison instance
    local other=$1 suite=${1%.*} log rc res st ms detail ncases cases
    log=$logdir/compare.suite.${suite//\//_}.log
    if [ ! -f "$log" ]; then
        # the cases of the suite that ran on ringk, in the same order
        cases=$(awk -F'\t' -v s="$prefix/${suite#*/}." -v p="$cmp_prefix/" \
                    'index($1, s) == 1 && $2 != "excluded" { sub(/^[^\/]*\//, p, $1); print $1 }' \
                    "$results" | paste -sd:)
        ncases=$(awk -F: '{ print NF }' <<<"$cases")
        run_gtest "$log" $((suite_to + 2 * ncases)) "$cases"
    fi
    res=$(parse_log "$log" | awk -F'\t' -v c="$other" '$1 == c && $2 != "running"' | tail -n1)
    if [ -z "$res" ]; then
        log=$logdir/compare.case.${other//\//_}.log
        run_gtest "$log" $((case_to + 30)) "$other"
        rc=$?
        res=$(parse_log "$log" | awk -F'\t' -v c="$other" '$1 == c' | tail -n1)
        if [ -z "$res" ] && ! grep -q "^\[ RUN      \] $other\( \|\$\)" "$log"; then
            printf 'absent\tno such case for %s\n' "$cmp_prefix"
            return
        fi
        IFS=$'\t' read -r _ st ms detail <<<"$res"
        if [ -z "$st" ] || [ "$st" = running ]; then
            printf 'crash\t%s%s\n' "$(why_ended "$rc" "$log")" "${detail:+: $detail}"
            return
        fi
        printf '%s\t%s (alone)\n' "$st" "$detail"
        return
    fi
    IFS=$'\t' read -r _ st ms detail <<<"$res"
    printf '%s\t%s\n' "$st" "$detail"
}

if [ "$cmd" = compare ] && [ -n "$cmp_prefix" ]; then
    echo "# ucx-gtest: comparison with the $cmp_prefix instance"
    cmp_log=$outdir/compare-$label.txt
    : >"$cmp_log"
    while IFS=$'\t' read -r name kind ms detail; do
        case $kind in fail|crash) ;; *) continue ;; esac
        other=$cmp_prefix/${name#*/}
        IFS=$'\t' read -r st odetail < <(cmp_result "$other")
        {
            echo "$name: $kind: $detail"
            echo "    $other: $st${odetail:+: $odetail}"
            case $st in
                fail|crash) echo "    => fails on $cmp_prefix too: candidate for known.txt" ;;
                absent) echo "    => no $cmp_prefix counterpart" ;;
                *) echo "    => passes on $cmp_prefix: a ringk bug" ;;
            esac
        } | tee -a "$cmp_log" | sed 's/^/# /'
    done <"$results"
    echo "# ucx-gtest: comparison saved in $cmp_log"
fi

echo "ucx-gtest: $passed passed, $failed failed, $crashed crashed, $skipped skipped, $known known"
[ $((failed + crashed)) -eq 0 ]
