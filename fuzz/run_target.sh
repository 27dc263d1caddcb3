#!/bin/sh
# fuzz/run_target.sh - runs one libFuzzer target for ctest (fuzz/CMakeLists.txt):
#   run_target.sh <fuzzer> <work corpus dir> <seed corpus dir> <findings dir> [libFuzzer flags...]
# The work dir is emptied first, so every run starts from the seed corpus alone and is repeatable;
# libFuzzer adds the inputs it finds to the first corpus dir (the work dir, never the source tree)
# and writes a crashing input to <findings dir>crash-<sha1> (timeout-..., leak-..., oom-...).
set -eu
fuzzer=$1 work=$2 seeds=$3 findings=$4
shift 4
rm -rf "$work"
mkdir -p "$work" "$findings"
exec "$fuzzer" "$@" -artifact_prefix="$findings" "$work" "$seeds"
