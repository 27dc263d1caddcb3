#!/usr/bin/env bash
# Data-parallel scaling on one machine (issue 17): the cifarnet step at batch 64 per rank, 2 ranks x
# 1 thread (`aether launch --nproc-per-node 2 --threads-per-proc 1`, each rank bound to its own core)
# against 1 rank x 1 thread (bound to core 0 with taskset), alternating per round. Prints each run's
# images/s of the training steps (aether train's --metrics-json) and each round's ratio, then the
# median ratio. Pass --sync-batch-norm (or other `aether train` options) after the rounds.
#
#   bench/dist_scaling.sh [build/test/aether] [CIFAR-10 dir] [steps] [rounds] [train options...]
set -euo pipefail
aether=$(realpath "${1:-build/test/aether}")
data=${2:-$(dirname "$0")/../../shared/data/cifar-10}
steps=${3:-60}
rounds=${4:-4}
shift $(( $# > 4 ? 4 : $# )) || true
extra=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
  "$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || echo 'AVX2, no AVX-512')"
train=(train --dataset cifar10 --data-dir "$data" --model cifarnet --batch-size 64 --epochs 1
  --max-steps-per-epoch "$steps" --quiet "${extra[@]}")
ips() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_second'])" "$1"; }
ratios=()
for r in $(seq 1 "$rounds"); do
  OMP_NUM_THREADS=1 AETHER_NUM_THREADS=1 taskset -c 0 "$aether" "${train[@]}" \
    --metrics-json "$out/one.json" > "$out/one.log" 2>&1 || { cat "$out/one.log"; exit 1; }
  "$aether" launch --nproc-per-node 2 --threads-per-proc 1 --master-port $((29600 + r)) -- \
    "$aether" "${train[@]}" --metrics-json "$out/two.json" > "$out/two.log" 2>&1 || { cat "$out/two.log"; exit 1; }
  one=$(ips "$out/one.json") two=$(ips "$out/two.json")
  ratio=$(python3 -c "print(f'{$two / $one:.3f}')")
  ratios+=("$ratio")
  echo "round $r: 1 rank $one images/s, 2 ranks $two images/s, ratio $ratio ($(grep -o 'waited[^)]*' "$out/two.log" | head -1))"
done
python3 -c "import statistics,sys; print('median ratio', statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
