# SPDX-License-Identifier: BSD-3-Clause
# RINGK_CHECK_CUDA: auto-detects the CUDA Toolkit (/usr/local/cuda or --with-cuda=DIR). With it,
# test/kernels/ builds with nvcc and the CUDA parts of the core load the toolkit's libcudart at run
# time (its soname and directory are defined here), so the libraries load without it;
# --without-cuda builds the host-only product.
AC_DEFUN([RINGK_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda=DIR], [CUDA Toolkit (default: auto-detect /usr/local/cuda)])],
        [], [with_cuda=check])
    AC_ARG_VAR([NVCC_ARCH], [nvcc -gencode flags (default: sm_80, sm_90 and compute_90 PTX)])
    have_cuda=no
    CUDA_VERSION=
    AS_IF([test "x$with_cuda" != xno], [
        AS_IF([test "x$with_cuda" = xcheck || test "x$with_cuda" = xyes],
              [cuda_dir=/usr/local/cuda], [cuda_dir=$with_cuda])
        AS_IF([test -x "$cuda_dir/bin/nvcc" && test -f "$cuda_dir/include/cuda_runtime.h"], [
            NVCC="$cuda_dir/bin/nvcc"
            CUDA_CPPFLAGS="-I$cuda_dir/include"
            for d in lib64 lib targets/x86_64-linux/lib; do
                AS_IF([test -e "$cuda_dir/$d/libcudart.so"], [CUDA_LIBDIR="$cuda_dir/$d"; break])
            done
            AS_IF([test -n "$CUDA_LIBDIR"], [
                CUDA_LDFLAGS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR"
                CUDA_LIBS="-lcudart"
                ringk_save_CPPFLAGS="$CPPFLAGS"
                CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
                AC_CHECK_HEADER([cuda_runtime_api.h], [have_cuda=yes])
                CPPFLAGS="$ringk_save_CPPFLAGS"
                CUDA_VERSION=`$NVCC --version | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
            ])
        ])
        AS_IF([test "x$have_cuda" = xno && test "x$with_cuda" != xcheck],
              [AC_MSG_ERROR([CUDA requested but nvcc, cuda_runtime.h or libcudart.so not found under $cuda_dir])])
    ])
    AS_IF([test -z "$NVCC_ARCH"],
          [NVCC_ARCH="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
    RINGK_PC_CUDA_LIBS=
    AS_IF([test "x$have_cuda" = xyes], [
        RINGK_PC_CUDA_LIBS="-L$CUDA_LIBDIR -Wl,-rpath,$CUDA_LIBDIR -lcudart -lstdc++"
        AC_DEFINE([HAVE_CUDA], [1], [CUDA Toolkit available])
        AC_DEFINE_UNQUOTED([RINGK_CUDART_SONAME], ["libcudart.so.${CUDA_VERSION%%.*}"],
                           [the CUDA runtime the core loads at run time])
        AC_DEFINE_UNQUOTED([RINGK_CUDART_DIR], ["$CUDA_LIBDIR"],
                           [where it is looked for when the loader's path lacks it])])
    AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
    AC_SUBST([NVCC])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LDFLAGS])
    AC_SUBST([CUDA_LIBS])
    AC_SUBST([CUDA_VERSION])
    AC_SUBST([RINGK_PC_CUDA_LIBS])
])
