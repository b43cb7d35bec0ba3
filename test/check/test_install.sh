#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed tree as a user gets it, as TAP: 'make install DESTDIR=...' puts the headers,
# libringk, the plugin, the tools, ringk.pc and the man pages in place, and examples/hello.c
# builds with nothing but 'pkg-config --cflags --libs ringk' on the installed tree and runs.
set -u
top=${RINGK_TOP_BUILDDIR:?}
src=${RINGK_TOP_SRCDIR:?}
dest=$(mktemp -d "${TMPDIR:-/tmp}/ringk-install.XXXXXX")
trap 'rm -rf "$dest"' EXIT
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); echo "not ok $n - $1"; sed 's/^/# /' <<<"$2" | tail -n 20; fails=$((fails + 1)); }
var() { sed -n "s|^$1=||p" "$top/ringk.pc"; }
echo "1..8"
if out=$(make -s -C "$top" install DESTDIR="$dest" 2>&1); then
    ok "make install DESTDIR"
else
    nok "make install DESTDIR" "$out"
fi
# the .pc file's variables name each other: expand them as pkg-config does
eval "prefix=$(var prefix); exec_prefix=$(var exec_prefix); libdir=$(var libdir)"
eval "includedir=$(var includedir)"
: "$prefix" "$exec_prefix"
missing=""
for f in "$includedir/ringk/api/ringk.h" "$includedir/ringk/api/ringk_hlc.h" \
         "$includedir/ringk/api/ringk_p2pq.h" "$libdir/libringk.so" "$libdir/pkgconfig/ringk.pc"; do
    [ -e "$dest$f" ] || missing="$missing $f"
done
for f in bin/ringk_info bin/ringk-run man/man7/ringk.7 man/man1/ringk_info.1 \
         man/man1/ringk-run.1 man/man3/ringk_ctx.3 man/man3/ringk_kernel.3 \
         man/man3/ringk_send.3 man/man3/ringk_publish.3 man/man3/ringk_barrier_wait.3 \
         man/man3/ringk_hlc.3 man/man3/ringk_p2pq.3 man/man3/ringk_send_route.3; do
    [ -n "$(find "$dest" -path "*/$f")" ] || missing="$missing */$f"
done
if [ -z "$missing" ]; then ok "installed files"; else nok "installed files" "missing:$missing"; fi
# every public function has a page (its family's, under its own name) that 'man -l' renders
# from anywhere: no .so request, which man resolves from the current directory
# (man runs without the plugin this suite preloads: with it, UCX's memory-hook self-test, which
# the plugin's libucm runs in every process, left 8 SysV segments behind a page, in the
# processes man-db runs in its seccomp sandbox: a full CI run hit the system's 4096)
no_plugin=$(tr ':' '\n' <<<"${LD_PRELOAD:-}" | grep -v 'libuct_ringk' | paste -sd: -)
man3=$(dirname "$(find "$dest" -path '*/man/man3/ringk_kernel.3' | head -n 1)")
api=$(cat "$src"/src/ringk/api/ringk*.h | sed -n 's/^[a-z].*\b\(ringk_[a-z0-9_]*\)(.*/\1/p' | sort -u)
# 'man' may be a stub that only says so (minimized Ubuntu images): then the pages are checked
# without rendering them
man_works=no
if command -v man >/dev/null && man --version 2>/dev/null | grep -q '^man '; then
    man_works=yes
fi
bad=""
for f in $api; do
    page=$man3/$f.3
    if [ ! -f "$page" ]; then
        bad="$bad $f(no page)"
    elif ! grep -q "\b$f\b" "$page"; then
        bad="$bad $f(the page does not name it)"
    elif grep -q '^\.so ' "$page"; then
        bad="$bad $f(a .so request)"
    elif [ "$man_works" = yes ] &&
         out=$(cd / && LD_PRELOAD=$no_plugin MANPAGER=cat MANWIDTH=100 man -l "$page" 2>&1) &&
         { grep -q "can't open\|failed .so" <<<"$out" || [ "$(wc -l <<<"$out")" -lt 10 ]; }; then
        bad="$bad $f(man -l: $(head -n 1 <<<"$out"))"
    fi
done
if [ -z "$bad" ]; then
    [ "$man_works" = yes ] || echo "# 'man' does not work here: the pages were not rendered"
    ok "a man page for each of the $(wc -w <<<"$api") public functions"
else
    nok "a man page for each public function" "$bad"
fi
# the installed libringk first, then whatever the suite runs with (where UCX may come from a
# private prefix, as in the offline bundle, and the system's own libuct be another release)
run_path="$dest$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
flags=$(PKG_CONFIG_PATH="$dest$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest" \
        pkg-config --cflags --libs ringk 2>&1)
# shellcheck disable=SC2086 # the flags are words
if out=$(${CC:-cc} -o "$dest/hello" "$src/examples/hello.c" $flags 2>&1); then
    ok "examples/hello.c builds with pkg-config ringk ($flags)"
else
    nok "examples/hello.c builds with pkg-config ringk ($flags)" "$out"
fi
out=$(LD_LIBRARY_PATH="$run_path" timeout 60 "$dest/hello" 2>&1)
if [ $? -eq 0 ] && [ "$(grep -c '^greeter got "' <<<"$out")" = 3 ] &&
   LD_LIBRARY_PATH="$run_path" ldd "$dest/hello" | grep -q "$dest$libdir/libringk.so"; then
    ok "hello runs on the installed libringk"
else
    nok "hello runs on the installed libringk" "$out"
fi
# device code (ringk_device(3), and a P2P queue's device calls) from the installed headers,
# compiled as C for the emulated device as a user's file would be: it builds in GNU C and in
# ISO C with _POSIX_C_SOURCE; in ISO C without it, the header stops with a message that names
# the fix
cat >"$dest/dev.cu" <<'EOF_CU'
#include <ringk/api/ringk_device.h>
RINGK_DEVICE static int add(ringk_dev_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    uint64_t v;

    (void)arg;
    memcpy(&v, ringk_dev_msg_payload(msg), sizeof(v));
    return ringk_dev_send_route(k, 0, RINGK_MSG_DATA, &v, sizeof(v), RINGK_WAIT_FOREVER);
}
RINGK_DEVICE_ENTRY(add_entry, add);
#include <ringk/api/ringk_p2pq_dev.h>
RINGK_DEVICE int relay(ringk_p2pq_dev_t *in, ringk_p2pq_dev_t *out)
{
    uint64_t v;

    return (ringk_p2pq_dev_receive(in, &v) == 0) ? ringk_p2pq_dev_send(out, &v) : RINGK_P2PQ_AGAIN;
}
EOF_CU
cflags=$(PKG_CONFIG_PATH="$dest$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest" \
         pkg-config --cflags ringk 2>&1)
devcc() { # shellcheck disable=SC2086 # the flags are words
    ${CC:-cc} "$@" -Wall -Werror -x c -c -o "$dest/dev.o" "$dest/dev.cu" $cflags 2>&1
}
if out=$(devcc -std=gnu11) && out=$(devcc -std=c11 -D_POSIX_C_SOURCE=200809L) &&
   ! strict=$(devcc -std=c11) && grep -q 'needs POSIX: use -std=gnu11' <<<"$strict"; then
    ok "device code builds as C from the installed headers (gnu11; c11 + _POSIX_C_SOURCE)"
else
    nok "device code builds as C from the installed headers" "$out${strict:-}"
fi
# the same file built by nvcc and linked as ringk_device(3) says, with nothing but pkg-config's
# flags and its cuda_libs variable (the toolkit's directory is not in the linker's path); the
# program runs its CPU | CUDA kernel on the GPU, or on the CPU without one
nvcc=$(sed -n 's/^NVCC = //p' "$top/Makefile")
if [ -z "$nvcc" ]; then
    n=$((n + 1)); echo "ok $n # SKIP built without CUDA: no nvcc build of device code"
else
    cat >"$dest/main.c" <<'EOF_C'
#include <ringk/api/ringk.h>
#include <stdio.h>
extern const struct ringk_device_entry add_entry;
static int add_cpu(ringk_kernel_t *k, const ringk_msg_t *msg, void *arg)
{
    (void)k; (void)msg; (void)arg;
    return 0;
}
int main(void)
{
    ringk_kernel_params_t p = {
        .field_mask = RINGK_KERNEL_PARAM_FIELD_NAME | RINGK_KERNEL_PARAM_FIELD_HANDLER |
                      RINGK_KERNEL_PARAM_FIELD_BACKENDS | RINGK_KERNEL_PARAM_FIELD_DEVICE_ENTRY,
        .name = "add", .handler = add_cpu, .backends = RINGK_BACKEND_CPU | RINGK_BACKEND_CUDA,
        .device_entry = &add_entry
    };
    ringk_ctx_t *ctx;
    ringk_kernel_t *k;
    if ((ringk_ctx_create(NULL, &ctx) != 0) || (ringk_kernel_create(ctx, &p, &k) != 0)) {
        return 1;
    }
    printf("kernel created\n");
    return ringk_ctx_destroy(ctx);
}
EOF_C
    pc() { PKG_CONFIG_PATH="$dest$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$dest" pkg-config "$@"; }
    # shellcheck disable=SC2046 # the flags are words
    if out=$("$nvcc" -c $(pc --cflags ringk) -o "$dest/dev_gpu.o" "$dest/dev.cu" 2>&1) &&
       out=$(${CC:-cc} -o "$dest/devprog" "$dest/main.c" "$dest/dev_gpu.o" \
             $(pc --cflags --libs ringk) $(pc --variable=cuda_libs ringk) 2>&1) &&
       out=$(LD_LIBRARY_PATH="$run_path" timeout 60 "$dest/devprog" 2>&1) &&
       grep -q "kernel created" <<<"$out"; then
        ok "device code built by nvcc links with pkg-config's flags and cuda_libs, and runs"
    else
        nok "device code built by nvcc links with pkg-config's flags and cuda_libs, and runs" \
            "$out"
    fi
fi
# the installed wrapper finds the plugin installed with it, though not at the configured path
# (a DESTDIR install here; a relocated one alike): it preloads that file (UCX 1.13) or names
# its directory in UCX_PLUGIN_PATH (UCX >= 1.22)
runner=$(find "$dest" -path "*/bin/ringk-run" | head -n 1)
out=$(env -u RINGK_PLUGIN -u LD_PRELOAD -u UCX_PLUGIN_PATH "$runner" \
      sh -c 'echo "$LD_PRELOAD$UCX_PLUGIN_PATH"' 2>&1)
found=${out%%:*}
case $found in
    "$dest"/*/libuct_ringk.so | "$dest"/*/ucx) ok "the installed ringk-run finds the plugin installed with it ($found)" ;;
    *) nok "the installed ringk-run finds the plugin installed with it" "$out" ;;
esac
[ $fails -eq 0 ]
