#!/usr/bin/env bash
# Installs oneDNN 3.2 (CPU, GNU OpenMP) into $AETHER_ONEDNN_PREFIX (default /opt/aether/onednn-3.2.0),
# if it is not there yet. Called by scripts/install-deps.sh; safe to run repeatedly.
#
# Why not Debian's libdnnl-dev: Debian 12 ships oneDNN 2.6, whose AVX2 convolutions are the older
# jit:avx2 kernels; oneDNN 3.x adds brgemm convolutions for AVX2 (brgconv:avx2). Measured on a 2-core
# Zen3 (AVX2, no AVX-512), conv3x3 64->64 on (64,64,32,32) NHWC, medians of 6 alternating runs:
# forward 44.3 -> 34.0 ms, backward-data 45 -> 35 ms, backward-weights 76 -> 81 ms (docs/results.md,
# "oneDNN 3.2 instead of Debian's 2.6"). Debian 13's oneDNN 3.7 needs glibc 2.38 and libstdc++ 14,
# which Debian 12 lacks.
# Intel publishes oneDNN 3.2 on PyPI as two wheels (onednn-cpu-gomp: libdnnl.so.3 built against
# libgomp; onednn-devel-cpu-gomp: headers and CMake config). They are fetched with pip (in a
# throw-away venv), checked against the SHA-256 sums below, and unpacked: lib/libdnnl.so.3.2 (with
# its two symlinks), include/ and lib/cmake/dnnl/, where CMake's find_package(dnnl 3.2) finds them.
# Without a network, put the two .whl files in $AETHER_ONEDNN_WHEELS (scripts/gpu-check.sh does).
set -euo pipefail

prefix=${AETHER_ONEDNN_PREFIX:-/opt/aether/onednn-3.2.0}
if [ -f "$prefix/lib/libdnnl.so.3.2" ] && [ -f "$prefix/lib/cmake/dnnl/dnnl-config.cmake" ]; then
  exit 0
fi

version=2023.2.0
declare -A sha256=(
  [onednn_cpu_gomp-$version-py2.py3-none-manylinux1_x86_64.whl]=2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb
  [onednn_devel_cpu_gomp-$version-py2.py3-none-manylinux1_x86_64.whl]=9763c69e8c907e119056bd52ad918ca84ac9ba939d130a99dfa95ccca3e5e284
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
wheels=${AETHER_ONEDNN_WHEELS:-}
if [ -z "$wheels" ]; then
  echo "aether: fetching oneDNN 3.2 (onednn-cpu-gomp $version) from PyPI into $prefix"
  python3 -m venv "$tmp/venv"
  "$tmp/venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$tmp/wheels" \
    "onednn-cpu-gomp==$version" "onednn-devel-cpu-gomp==$version"
  wheels=$tmp/wheels
fi
for w in "${!sha256[@]}"; do
  [ -f "$wheels/$w" ] || { echo "aether: $wheels/$w is missing" >&2; exit 1; }
  echo "${sha256[$w]}  $wheels/$w" | sha256sum -c --quiet - ||
    { echo "aether: $wheels/$w does not have the expected SHA-256" >&2; exit 1; }
done

# Unpack into a staging folder, then move it into place: an interrupted install leaves no half prefix.
stage=$tmp/onednn
python3 - "$wheels" "$stage" "$version" <<'PY'
import os, sys, zipfile
wheels, stage, version = sys.argv[1:]
for name, data in (("onednn_cpu_gomp", "onednn_cpu_gomp-%s.data/data/" % version),
                   ("onednn_devel_cpu_gomp", "onednn_devel_cpu_gomp-%s.data/data/" % version)):
    with zipfile.ZipFile(os.path.join(wheels, "%s-%s-py2.py3-none-manylinux1_x86_64.whl" % (name, version))) as z:
        for m in z.namelist():
            rel = m[len(data):] if m.startswith(data) else None
            # the wheel stores libdnnl.so and libdnnl.so.3 as copies of libdnnl.so.3.2: made links below
            if not rel or rel in ("lib/libdnnl.so", "lib/libdnnl.so.3"):
                continue
            out = os.path.join(stage, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(m) as src, open(out, "wb") as dst:
                dst.write(src.read())
os.symlink("libdnnl.so.3.2", os.path.join(stage, "lib/libdnnl.so.3"))
os.symlink("libdnnl.so.3", os.path.join(stage, "lib/libdnnl.so"))
PY

SUDO=""
if [ ! -w "$(dirname "$prefix")" ] && [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
$SUDO mkdir -p "$(dirname "$prefix")"
$SUDO rm -rf "$prefix.partial"
$SUDO cp -a "$stage" "$prefix.partial"
$SUDO chmod -R a+rX "$prefix.partial"
$SUDO rm -rf "$prefix"
$SUDO mv "$prefix.partial" "$prefix"
echo "aether: oneDNN 3.2 installed in $prefix"
