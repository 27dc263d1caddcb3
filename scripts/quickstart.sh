#!/usr/bin/env bash
# The README's first command: install what is missing, build Release, run the main job: train the
# default model on Fashion-MNIST (Debian's dataset-fashion-mnist) with a progress bar, then report
# test accuracy. Extra arguments go to `aether train` (e.g. --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DAETHER_BUILD_TESTS=OFF -DAETHER_BUILD_BENCH=OFF
cmake --build build/release --target aether_cli -j "$(nproc)"
exec build/release/aether train --dataset fashion-mnist --metrics-json build/release/fashion-mnist.json "$@"
