#!/usr/bin/env bash
# Installs the build in $1 to a temporary prefix, then builds and runs tests/install/consumer.cpp
# against it twice: with CMake's find_package(aether) and with pkg-config.
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > /dev/null
# The installed package names no file outside the prefix that a user's machine may lack: a
# CUDA-enabled build once hard-coded the toolkit's libcudart_static.a path in aetherTargets.cmake and
# aether.pc. (System libraries are found by name; the CUDA runtime is inside libaether.)
if grep -rnE '/[^ ;"]*(cuda|cudart)[^ ;"]*' "$work/prefix/lib"*/cmake "$work/prefix/lib"*/pkgconfig; then
  echo "install check: the installed CMake package or aether.pc names a CUDA toolkit path (above)" >&2
  exit 1
fi
# The consumer is built with aether's own compiler: a static libaether carries that compiler's
# OpenMP runtime calls (clang's libomp, g++'s libgomp), which the other runtime does not provide.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
echo "== find_package(aether) with $cxx"
cmake -S "$src" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" > /dev/null
cmake --build "$work/cmake" > /dev/null
"$work/cmake/consumer"
echo "== pkg-config aether"
pc_dir=$(dirname "$(find "$work/prefix" -name aether.pc | head -n 1)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs aether)
# shellcheck disable=SC2086
"$cxx" "$src/consumer.cpp" -o "$work/consumer_pc" $flags
# (pkg-config gives no run path: a shared libaether in a private prefix is found through
# LD_LIBRARY_PATH. CMake's consumer above runs without it: CMake sets the run path itself.)
libdir=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --variable=libdir aether)
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/consumer_pc"
