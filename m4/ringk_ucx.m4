# SPDX-License-Identifier: BSD-3-Clause
# RINGK_CHECK_UCX: finds the installed UCX (pkg-config), the source tree of exactly that version
# (internal headers a UCT plugin needs) and that build's configuration (ucx_info -b), and probes
# the optional UCT APIs by compiling against them.
# RINGK_UCX_PROBE(DEFINE, WHAT, STATEMENTS): defines DEFINE to 1 when STATEMENTS compile, as
# errors, against UCX's internal headers (an incompatible function pointer is an error here)
AC_DEFUN([RINGK_UCX_PROBE], [
    AC_MSG_CHECKING([whether UCX's $2])
    ringk_probe_CFLAGS="$CFLAGS"
    CFLAGS="$CFLAGS -Werror=incompatible-pointer-types -Werror=implicit-function-declaration"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/memory/memtype_cache.h>]], [[$3;]])],
        [AC_MSG_RESULT([yes])
         AC_DEFINE([$1], [1], [UCX's $2])],
        [AC_MSG_RESULT([no])])
    CFLAGS="$ringk_probe_CFLAGS"
])

AC_DEFUN([RINGK_CHECK_UCX], [
    # --with-ucx=PREFIX: a UCX installed in PREFIX (its pkg-config file, libraries, ucx_info)
    # instead of the one pkg-config finds by default
    AC_ARG_WITH([ucx],
        [AS_HELP_STRING([--with-ucx=PREFIX],
            [the UCX installed in PREFIX (default: the one pkg-config finds)])],
        [], [with_ucx=default])
    AS_CASE([$with_ucx],
        [default|yes], [],
        [no], [AC_MSG_ERROR([ringk is a UCX transport: it cannot be built --without-ucx])],
        [ringk_ucx_pc=
         for d in "$with_ucx/lib/pkgconfig" "$with_ucx/lib64/pkgconfig" \
                  "$with_ucx"/lib/*/pkgconfig; do
             AS_IF([test -f "$d/ucx.pc"], [ringk_ucx_pc=$d; break])
         done
         AS_IF([test -z "$ringk_ucx_pc"],
             [AC_MSG_ERROR([--with-ucx=$with_ucx: no UCX there (no ucx.pc in lib/pkgconfig, lib64/pkgconfig or lib/*/pkgconfig)])])
         PKG_CONFIG_PATH="$ringk_ucx_pc${PKG_CONFIG_PATH:+$PATH_SEPARATOR$PKG_CONFIG_PATH}"
         export PKG_CONFIG_PATH])
    PKG_CHECK_MODULES([UCX], [ucx], [],
        [AC_MSG_ERROR([UCX development files not found (pkg-config ucx); on Debian: apt-get install libucx-dev ucx-utils, or run contrib/setup.sh, or give --with-ucx=PREFIX])])
    # UCX's headers are a dependency's: included as system headers, so that warnings in them
    # (UCX 1.22's ucp.h trips -Wsign-compare) are not taken for ringk's own
    UCX_CFLAGS=`echo " $UCX_CFLAGS" | sed 's/ -I */ -isystem /g'`
    UCX_VERSION=`$PKG_CONFIG --modversion ucx`
    UCX_PREFIX=`$PKG_CONFIG --variable=prefix ucx`
    UCX_LIBDIR=`$PKG_CONFIG --variable=libdir ucx`
    # a UCX outside the system's library path: the programs and libraries built here find it
    # at run time by their run path
    AS_CASE([$with_ucx], [default|yes], [],
        [UCX_LIBS="-Wl,-rpath,$UCX_LIBDIR $UCX_LIBS"])
    AC_SUBST([UCX_VERSION])
    AC_SUBST([UCX_LIBDIR])

    AS_CASE([$UCX_VERSION],
        [[[0-9]*.[0-9]*.[0-9]*]], [],
        [AC_MSG_ERROR([cannot parse the UCX version '$UCX_VERSION' given by pkg-config])])
    UCX_VER_MAJOR=`echo $UCX_VERSION | cut -d. -f1`
    UCX_VER_MINOR=`echo $UCX_VERSION | cut -d. -f2`
    UCX_VER_PATCH=`echo $UCX_VERSION | cut -d. -f3`
    AC_DEFINE_UNQUOTED([RINGK_UCX_BUILD_VERSION], ["$UCX_VERSION"], [UCX version the plugin is built against])
    AC_DEFINE_UNQUOTED([RINGK_UCX_BUILD_MAJOR], [$UCX_VER_MAJOR], [UCX major version built against])
    AC_DEFINE_UNQUOTED([RINGK_UCX_BUILD_MINOR], [$UCX_VER_MINOR], [UCX minor version built against])
    AC_DEFINE_UNQUOTED([RINGK_UCX_BUILD_PATCH], [$UCX_VER_PATCH], [UCX patch version built against])

    # UCX >= 1.22 loads third-party modules from UCX_PLUGIN_PATH; older ones only the modules named
    # when they were built, so there the plugin is preloaded (contrib/ringk-run decides).
    AS_IF([test $UCX_VER_MAJOR -gt 1 || test $UCX_VER_MINOR -ge 22],
          [RINGK_UCX_LOAD=plugin_path], [RINGK_UCX_LOAD=preload])
    AC_SUBST([RINGK_UCX_LOAD])
    AM_CONDITIONAL([RINGK_UCX_PLUGIN_PATH], [test "x$RINGK_UCX_LOAD" = xplugin_path])
    # Such a UCX loads only the modules whose file name ends as its libucs's does (from the
    # first dot: ".so.0" for libucs.so.0), so the plugin is also linked under that name.
    ucx_soname=`objdump -p "$UCX_LIBDIR/libucs.so" 2>/dev/null | sed -n 's/^ *SONAME *//p'`
    AS_CASE([$ucx_soname],
        [libucs.*], [RINGK_UCX_MODULE_EXT=`echo "$ucx_soname" | sed 's/^libucs//'`],
        [RINGK_UCX_MODULE_EXT=.so.0])
    AC_SUBST([RINGK_UCX_MODULE_EXT])

    # --- UCX source of exactly this version ------------------------------------------------------
    AC_ARG_WITH([ucx-src],
        [AS_HELP_STRING([--with-ucx-src=DIR],
            [UCX source tree of the installed UCX version (default: .cache/ucx-VERSION in the
             source tree, fetched by contrib/fetch-ucx-src.sh)])],
        [], [with_ucx_src="$srcdir/.cache/ucx-$UCX_VERSION"])
    AS_IF([test ! -f "$with_ucx_src/src/uct/base/uct_iface.h"],
        [AC_MSG_ERROR([UCX $UCX_VERSION source not found in '$with_ucx_src' (no src/uct/base/uct_iface.h).
  A UCT plugin needs the internal headers of exactly the UCX it loads into.
  Fetch them with: contrib/fetch-ucx-src.sh   (Debian: apt-get source ucx=<installed version>)
  or point --with-ucx-src=DIR at a UCX $UCX_VERSION source tree.])])
    UCX_SRC_DIR=`cd "$with_ucx_src" && pwd`
    ucx_src_ver=
    for part in major minor patch; do
        v=$(sed -n "/ucx_ver_$part@:>@,/s/.*, *\(@<:@0-9@:>@*\)).*/\1/p" "$UCX_SRC_DIR/configure.ac" | head -n1)
        ucx_src_ver="$ucx_src_ver${ucx_src_ver:+.}$v"
    done
    AC_MSG_CHECKING([UCX source version in $UCX_SRC_DIR])
    AC_MSG_RESULT([$ucx_src_ver])
    AS_IF([test "$ucx_src_ver" != "$UCX_VERSION"],
        [AC_MSG_ERROR([UCX source in '$UCX_SRC_DIR' is version $ucx_src_ver but the installed UCX is $UCX_VERSION; the plugin must be built against the headers of the UCX it loads into])])
    AC_SUBST([UCX_SRC_DIR])

    # --- configuration of the installed UCX build ------------------------------------------------
    AC_ARG_WITH([ucx-config],
        [AS_HELP_STRING([--with-ucx-config=FILE],
            [config.h of the installed UCX build (default: generated from 'ucx_info -b')])],
        [], [with_ucx_config=no])
    AC_PATH_PROG([UCX_INFO], [ucx_info], [], [$UCX_PREFIX/bin$PATH_SEPARATOR$PATH])
    mkdir -p ucx-build
    AS_IF([test "x$with_ucx_config" != xno],
        [cp "$with_ucx_config" ucx-build/config.raw.h || AC_MSG_ERROR([cannot read --with-ucx-config=$with_ucx_config])],
        [test -n "$UCX_INFO"],
        [$UCX_INFO -b > ucx-build/config.raw.h 2>/dev/null || AC_MSG_ERROR(['$UCX_INFO -b' failed])],
        [AC_MSG_ERROR([ucx_info not found; install ucx-utils or give --with-ucx-config=FILE])])
    ucx_cfg_ver=`sed -n 's/^# Version \(.*\)/\1/p' ucx-build/config.raw.h`
    AS_IF([test -n "$ucx_cfg_ver" && test "$ucx_cfg_ver" != "$UCX_VERSION"],
        [AC_MSG_ERROR([ucx_info -b reports UCX $ucx_cfg_ver but pkg-config reports $UCX_VERSION: two UCX installations are mixed])])
    # Keep the build-feature macros (ENABLE_STATS, ENABLE_ASSERT, HAVE_* ...) that change UCX's
    # struct layouts and inline code; drop the package identity, which is ours.
    { echo "/* generated by configure from the installed UCX build configuration */"
      grep '^#define' ucx-build/config.raw.h |
        grep -v -E '^#define (PACKAGE|VERSION|LT_OBJDIR|UCX_CONFIG_H|restrict)( |_)' |
        grep -v -E '^#define (PACKAGE|VERSION|restrict)$'
    } > ucx-build/config.h
    ucx_cfg_n=`grep -c '^#define' ucx-build/config.h`
    AS_IF([grep -q '^#define ENABLE_STATS' ucx-build/config.h], [ucx_cfg_stats=yes], [ucx_cfg_stats=no])
    AC_MSG_CHECKING([UCX build configuration])
    AC_MSG_RESULT([$ucx_cfg_n macros, ENABLE_STATS=$ucx_cfg_stats])

    UCX_INTERNAL_CPPFLAGS="-I\$(abs_top_builddir)/ucx-build -I$UCX_SRC_DIR/src -DHAVE_CONFIG_H"
    AC_SUBST([UCX_INTERNAL_CPPFLAGS])

    # --- optional UCT APIs, probed by compiling ----------------------------------------------------
    ringk_save_CPPFLAGS="$CPPFLAGS"
    CPPFLAGS="$CPPFLAGS -I`pwd`/ucx-build -I$UCX_SRC_DIR/src -DHAVE_CONFIG_H $UCX_CFLAGS"
    AC_CHECK_HEADER([uct/base/uct_iface.h], [],
        [AC_MSG_ERROR([UCX internal header uct/base/uct_iface.h does not compile; see config.log])])
    # the alignment macros moved from ucs/sys/math.h into a header of their own after 1.13
    AC_CHECK_HEADERS([ucs/sys/ptr_arith.h])
    AC_CHECK_MEMBERS([uct_iface_ops_t.ep_am_short_iov, uct_iface_ops_t.iface_estimate_perf,
                      uct_iface_internal_ops_t.iface_estimate_perf,
                      uct_iface_internal_ops_t.ep_invalidate,
                      uct_component_t.md_vfs_init, uct_md_ops_t.mem_attach,
                      uct_iface_attr_t.max_num_eps],
                     [], [], [[#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>]])
    AC_CHECK_DECLS([UCT_TL_DEFINE_ENTRY, UCT_SINGLE_TL_INIT, uct_base_iface_internal_ops],
                   [], [], [[#include <uct/base/uct_iface.h>]])
    # What changed in UCX's internal API after 1.13, one probe each (the 1.13 form is the
    # default; base/ringk_compat.h and the points of use read these):
    # the internal iface operations (1.16 has no shared table; 1.18 asks ep_is_connected,
    # 1.20 and 1.22 iface_query_v2), md and component operations that came or went
    AC_CHECK_MEMBERS([uct_iface_internal_ops_t.iface_query_v2,
                      uct_iface_internal_ops_t.iface_vfs_refresh,
                      uct_iface_internal_ops_t.ep_query,
                      uct_iface_internal_ops_t.ep_connect_to_ep_v2,
                      uct_iface_internal_ops_t.iface_is_reachable_v2,
                      uct_iface_internal_ops_t.ep_is_connected,
                      uct_iface_internal_ops_t.ep_get_device_ep,
                      uct_iface_internal_ops_t.ep_put_sgl_zcopy,
                      uct_iface_internal_ops_t.iface_mem_element_pack,
                      uct_md_ops_t.is_sockaddr_accessible, uct_md_ops_t.mem_elem_pack,
                      uct_component_t.rkey_compare],
                     [], [], [[#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>]])
    AC_CHECK_MEMBERS([uct_md_attr_v2_t.cache_mem_types],
                     [], [], [[#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>]])
    AC_CHECK_DECLS([ucs_callbackq_add_oneshot, uct_md_base_md_query, uct_iface_base_query_v2,
                    uct_base_rkey_compare, uct_iface_scope_is_reachable,
                    uct_base_ep_is_connected],
                   [], [], [[#include <uct/base/uct_iface.h>
#include <uct/base/uct_md.h>
#include <ucs/datastruct/callbackq.h>]])
    # signatures: each is the newer form when the probe compiles
    RINGK_UCX_PROBE([HAVE_UCT_MD_QUERY_V2], [md query takes uct_md_attr_v2_t],
        [uct_md_query_func_t f = (ucs_status_t (*)(uct_md_h, uct_md_attr_v2_t*))0])
    RINGK_UCX_PROBE([HAVE_UCT_MD_MEM_REG_PARAMS], [md mem_reg takes parameters],
        [uct_md_mem_reg_func_t f = (ucs_status_t (*)(uct_md_h, void*, size_t,
                                    const uct_md_mem_reg_params_t*, uct_mem_h*))0])
    RINGK_UCX_PROBE([HAVE_UCT_MD_MEM_QUERY_V2], [md mem_query takes uct_md_mem_attr_v2_t],
        [uct_md_mem_query_func_t f = (ucs_status_t (*)(uct_md_h, const void*, size_t,
                                      uct_md_mem_attr_v2_t*))0])
    RINGK_UCX_PROBE([HAVE_UCT_MD_MKEY_PACK_ADDRESS], [md mkey_pack takes address and length],
        [uct_md_mkey_pack_func_t f = (ucs_status_t (*)(uct_md_h, uct_mem_h, void*, size_t,
                                      const uct_md_mkey_pack_params_t*, void*))0])
    RINGK_UCX_PROBE([HAVE_UCT_MD_MEM_ALLOC_SYS_DEV], [md mem_alloc takes a system device],
        [uct_md_mem_alloc_func_t f = (ucs_status_t (*)(uct_md_h, size_t*, void**,
                                      ucs_memory_type_t, ucs_sys_device_t, unsigned,
                                      const char*, uct_mem_h*))0])
    RINGK_UCX_PROBE([HAVE_UCT_RKEY_UNPACK_PARAMS], [component rkey_unpack takes parameters],
        [uct_component_rkey_unpack_func_t f = (ucs_status_t (*)(uct_component_t*, const void*,
                                               const uct_rkey_unpack_params_t*, uct_rkey_t*,
                                               void**))0])
    RINGK_UCX_PROBE([HAVE_UCS_MEMTYPE_CACHE_UPDATE_FLAGS], [memtype cache update takes flags],
        [ucs_memtype_cache_update(0, 0, UCS_MEMORY_TYPE_HOST, UCS_SYS_DEVICE_ID_UNKNOWN, 0)])
    RINGK_UCX_PROBE([HAVE_UCT_EP_KEEPALIVE_CHECK_PARAM_FLAGS_ONLY],
        [UCT_EP_KEEPALIVE_CHECK_PARAM takes the flags only],
        [unsigned flags = 0; UCT_EP_KEEPALIVE_CHECK_PARAM(flags)])
    # UCP's behaviour: from 1.14 to 1.20 the v1 RMA protocol (UCX_PROTO_ENABLE=n) hands a
    # zcopy the memh of the request's ucp memory handle, which UCP registers only for an md
    # that asks for memh; with none it reads through a null pointer
    AC_MSG_CHECKING([whether UCP's v1 RMA zcopy needs an md that asks for memh])
    ringk_probe_CFLAGS="$CFLAGS"
    CFLAGS="$CFLAGS -Werror=incompatible-pointer-types"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <ucp/rma/rma.h>
#include <ucp/dt/dt.h>]], [[ucp_dt_state_t state; ucp_mem_h memh = state.dt.contig.memh;
ucp_rma_proto_t *proto = &ucp_rma_basic_proto; (void)memh; (void)proto;]])],
        [AC_MSG_RESULT([yes])
         AC_DEFINE([HAVE_UCP_RMA_V1_ZCOPY_MEMH], [1],
                   [UCP's v1 RMA zcopy reads the request's ucp memh])],
        [AC_MSG_RESULT([no])])
    CFLAGS="$ringk_probe_CFLAGS"
    AS_IF([test "x$ac_cv_have_decl_UCT_TL_DEFINE_ENTRY" != xyes],
        [AC_MSG_ERROR([UCX $UCX_VERSION lacks UCT_TL_DEFINE_ENTRY; ringk needs UCX >= 1.13])])
    CPPFLAGS="$ringk_save_CPPFLAGS"
])
