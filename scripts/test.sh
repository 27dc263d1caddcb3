#!/usr/bin/env bash
# The README's second command (and what .ci/run runs): install what is missing, then build and
# run the whole test suite:
#   1. g++, RelWithDebInfo, warnings as errors: every test (ctest);
#   2. clang++, warnings as errors: the whole build (library, CLI, tests, benchmarks);
#   3. g++ with AddressSanitizer + UndefinedBehaviorSanitizer: every test again.
# Set AETHER_TEST_QUICK=1 to run step 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
jobs=$(nproc)
export CTEST_OUTPUT_ON_FAILURE=1
# ctest runs test programs side by side; idle OpenMP threads should sleep, not spin, meanwhile.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

echo "==> [1/3] g++ build and tests"
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAETHER_WERROR=ON \
  -DCMAKE_CXX_COMPILER=g++
cmake --build build/test -j "$jobs"
ctest --test-dir build/test -j "$jobs" --timeout 900

if [ "${AETHER_TEST_QUICK:-0}" = "1" ]; then
  exit 0
fi

echo "==> [2/3] clang++ build (warnings are errors)"
cmake -S . -B build/clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DAETHER_WERROR=ON \
  -DCMAKE_CXX_COMPILER=clang++
cmake --build build/clang -j "$jobs"

echo "==> [3/3] AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAETHER_SANITIZE=ON -DAETHER_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER=g++ -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g"
cmake --build build/asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan -j "$jobs" --timeout 1800 -LE no_sanitize
