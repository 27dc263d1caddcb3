#!/usr/bin/env bash
# Data-parallel training between two "machines" on one box (issue 17): two network namespaces joined
# by a veth pair, each rank of `aether train` in its own namespace on its own core (1 thread), the
# link limited by `tc` (a token bucket on both ends) to each rate given. Reports images/s and the
# share of training time rank 0 waited for gradient all-reduces (cifarnet, batch 64 per rank), and
# the same job over loopback without a limit. Needs root (ip netns, tc) and the CIFAR-10 batches.
#
#   sudo bench/dist_netns.sh [build/test/aether] [CIFAR-10 dir] [steps] [rates...]
set -euo pipefail
aether=$(realpath "${1:-build/test/aether}")
data=${2:-$(dirname "$0")/../../shared/data/cifar-10}
steps=${3:-40}
shift $(( $# > 3 ? 3 : $# )) || true
rates=("$@")
[ ${#rates[@]} -gt 0 ] || rates=(10gbit 1gbit)
out=$(mktemp -d)

cleanup() { ip netns del aeth0 2>/dev/null || true; ip netns del aeth1 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add aeth0
ip netns add aeth1
ip link add veth0 type veth peer name veth1
ip link set veth0 netns aeth0
ip link set veth1 netns aeth1
ip -n aeth0 addr add 10.77.0.1/24 dev veth0
ip -n aeth1 addr add 10.77.0.2/24 dev veth1
for ns in aeth0 aeth1; do ip -n $ns link set lo up; done
ip -n aeth0 link set veth0 up
ip -n aeth1 link set veth1 up

train_args=(train --dataset cifar10 --data-dir "$data" --model cifarnet --batch-size 64 --epochs 1
  --max-steps-per-epoch "$steps" --quiet)

# run NAME PORT: both ranks, rank r in namespace aeth<r> on core r.
run() {
  local name=$1 port=$2
  for r in 0 1; do
    ip netns exec aeth$r env RANK=$r WORLD_SIZE=2 MASTER_ADDR=10.77.0.1 MASTER_PORT=$port \
      GLOO_SOCKET_IFNAME=veth$r OMP_NUM_THREADS=1 AETHER_NUM_THREADS=1 AETHER_DIST_TIMEOUT=600 \
      taskset -c $r "$aether" "${train_args[@]}" --metrics-json "$out/$name.$r.json" > "$out/$name.$r.log" 2>&1 &
  done
  wait
  python3 - "$out/$name.0.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
secs = sum(e["seconds"] for e in d["history"])
print(f"{sys.argv[2]:>10}: {d['images_per_second']:7.1f} images/s, rank 0 waited {d['comm_wait_seconds']:.2f} s "
      f"of {secs:.2f} s for all-reduces ({100 * d['comm_wait_seconds'] / secs:.1f}%)")
PY
}

port=29800
for rate in "${rates[@]}"; do
  for ns in aeth0 aeth1; do
    dev=veth${ns#aeth}
    ip netns exec $ns tc qdisc replace dev $dev root tbf rate "$rate" burst 1mbit latency 50ms
  done
  run "$rate" $((port++))
done
for ns in aeth0 aeth1; do ip netns exec $ns tc qdisc del dev veth${ns#aeth} root 2>/dev/null || true; done
run "veth" $((port++))
rm -rf "$out"
