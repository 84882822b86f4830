#!/bin/sh
# Checks that each plugin shared object given as an argument needs nothing
# but the C and C++ runtimes (its DT_NEEDED entries): no Abseil, no protobuf,
# no GPU runtime, so a host built against any version of those (or none, as
# PyTorch is) can load it. GPU runtimes are dlopen'ed lazily instead.
#
# Allowed: glibc's libc, libm, libdl, libpthread and its dynamic loader
# (ld-linux-*.so, which a shared object needs for thread-local storage), the
# C++ runtime libstdc++ and libgcc_s. Under --config=asan (which sets
# DSA_SANITIZER_BUILD=1 in the test environment) the sanitizer runtimes too.
# Under --config=rocm (DSA_GPU_BUILD=rocm) the HIP runtime too: the ROCm
# plugin then carries hipcc-built kernels, whose registration needs
# libamdhip64, and Debian ships no static HIP runtime (the CUDA plugin links
# cudart statically and stays within the list).
status=0
sanitizers=""
[ "${DSA_SANITIZER_BUILD:-0}" = 1 ] && sanitizers=1
hip=""
[ "${DSA_GPU_BUILD:-}" = rocm ] && hip=1
for so in "$@"; do
  needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  if [ -z "$(readelf -d "$so" | grep -c 'Dynamic section')" ]; then
    echo "FAIL: $so has no dynamic section"
    status=1
    continue
  fi
  bad=""
  for lib in $needed; do
    case "$lib" in
      libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|libstdc++.so.6|libgcc_s.so.1|ld-linux-*.so.*) ;;
      libasan.so.*|libubsan.so.*) [ -n "$sanitizers" ] || bad="$bad $lib" ;;
      libamdhip64.so.*) [ -n "$hip" ] || bad="$bad $lib" ;;
      *) bad="$bad $lib" ;;
    esac
  done
  if [ -n "$bad" ]; then
    echo "FAIL: $so needs libraries outside the allow-list:$bad"
    status=1
  else
    echo "ok: $so needs only:" $needed
  fi
done
exit $status
