#!/usr/bin/env bash
# The CUDA backend's check on a machine with a GPU and the CUDA toolkit (issue 6), in one go, in
# under 8 minutes on one H200:
#   1. build (Release, AETHER_CUDA=ON, no micro-benchmarks): the CLI and the tests/cuda_*_test programs;
#   2. `ctest -R cuda`: every CUDA test must PASS; with a GPU visible (nvidia-smi), a skipped test fails;
#      then the op and layer test programs again with AETHER_DEVICE=cuda (every tensor on the GPU);
#      a failure fails the check;
#   3. benchmarks: the device's copy bandwidth (bench/gpu/copy_bw.cu, nvcc), aether's BN+ReLU
#      forward+backward at (N,H,W,C) = (256,32,32,32) and (256,32,32,64) [= (256,64,32,32) in NCHW
#      terms] and ReLU backward, each in GB/s and as a fraction of the copy bandwidth, the cifarnet
#      training step at batch 256 and 512 (and at 256 in bfloat16 and float16, and through an NCCL
#      world of one), and the same step in PyTorch (bench/gpu/torch_step.py:
#      eager float32, eager with TF32, torch.compile) for the ratio;
#   4. a summary table. Results go to ${OUT:-gpu-results}/: results.json (every measurement),
#      summary.txt, ctest.log, suite-on-cuda.log, build.log, benches.log (each benchmark as it ends).
#
# Packages: what scripts/install-deps.sh lists must be installed. Without a network, put the .deb
# files and oneDNN's two wheels in $AETHER_GPU_DEBS (default .gpu-debs/; fetch them on a Debian
# machine with `scripts/gpu-check.sh --fetch-debs`): they are unpacked into /opt/aether-deps (not
# over /) and used from there. cuDNN is taken from the CUDA toolkit, else from PyTorch's nvidia-cudnn wheel.
# Environment: AETHER_GPU_BUILD (build dir, default build/gpu), AETHER_GPU_SKIP_TORCH=1,
# AETHER_GPU_SKIP_COMPILE=1 (no torch.compile), AETHER_GPU_RUNS (timed runs, default 20),
# AETHER_GPU_TEST_TIMEOUT (seconds per test program, default 300), AETHER_GPU_SUITE_JOBS (suite
# programs run at once, default 4), AETHER_GPU_BENCH_TIMEOUT (seconds per benchmark, default 240),
# AETHER_GPU_QUICK=1 (six suite programs, the two batch-256 float32 steps, no PyTorch: a short lease).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Build and test dependencies (Debian names; see scripts/install-deps.sh).
deb_packages=(
  libcli11-dev nlohmann-json3-dev zlib1g-dev liblzma-dev libzip-dev libzip4
  libcurl4-openssl-dev libcurl4 libssl-dev libgtest-dev libgmock-dev libomp-dev
  libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200  # Gloo and what libgloo.so.0 loads
  liblapacke-dev liblapacke libtmglib-dev libtmglib3 liblapack-dev liblapack3 libblas-dev libblas3  # LAPACKE
  libgfortran5 libquadmath0  # what liblapack3 loads
  libstb-dev libstb0 libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo  # image-folder data sets
  pkgconf pkgconf-bin libpkgconf3  # pkg-config, which CMake finds libzip and LAPACKE with
)

if [ "${1:-}" = "--fetch-debs" ]; then  # run on a Debian 12 machine with a network
  dir=${AETHER_GPU_DEBS:-.gpu-debs}
  mkdir -p "$dir"
  (cd "$dir" && apt-get download "${deb_packages[@]}")
  # oneDNN 3.2's two wheels (scripts/install-onednn.sh unpacks them there)
  python3 -m venv "$dir/.venv" && "$dir/.venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$dir" \
    onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 && rm -rf "$dir/.venv"
  grep -qx '/.gpu-debs/' .git/info/exclude 2>/dev/null || echo '/.gpu-debs/' >>.git/info/exclude
  du -sh "$dir"
  echo "carry $dir to the GPU machine (device tool: carry [\".gpu-debs\"])"
  exit 0
fi

out=${OUT:-gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${AETHER_GPU_BUILD:-build/gpu}
runs=${AETHER_GPU_RUNS:-20}
test_timeout=${AETHER_GPU_TEST_TIMEOUT:-300}
suite_jobs=${AETHER_GPU_SUITE_JOBS:-4}
bench_timeout=${AETHER_GPU_BENCH_TIMEOUT:-240}
jobs=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t_start=$(date +%s)
phase() { echo "==> [$(($(date +%s) - t_start)) s] $*"; }
die() {
  echo "gpu-check: $*" >&2
  exit 1
}

# ---- 0. tools and packages ------------------------------------------------------------------------
phase "tools and packages"
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || die "nvcc not found (CUDA toolkit in /usr/local/cuda expected)"
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then die "cmake and ninja are needed"; fi
echo "$(cmake --version | head -1), ninja $(ninja --version), $(c++ --version | head -1), $(nvcc --version | tail -1)"
gpu_name=""
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu_name=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
fi
echo "GPU: ${gpu_name:-none visible to nvidia-smi}"
missing=()
for p in "${deb_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
cmake_extra=()
debs=${AETHER_GPU_DEBS:-.gpu-debs}
if [ ${#missing[@]} -gt 0 ]; then
  if compgen -G "$debs/*.deb" >/dev/null; then
    echo "unpacking ${debs}/*.deb into /opt/aether-deps (missing here: ${missing[*]})"
    for f in "$debs"/*.deb; do dpkg -x "$f" /opt/aether-deps; done
    dp=/opt/aether-deps/usr
    # Debian picks its BLAS and LAPACK through update-alternatives, whose links dpkg -x does not make.
    for lib in blas lapack; do
      [ -d "$dp/lib/x86_64-linux-gnu/$lib" ] || continue
      for f in "$dp/lib/x86_64-linux-gnu/$lib/lib$lib".so*; do ln -sf "$lib/${f##*/}" "$dp/lib/x86_64-linux-gnu/"; done
      ln -sf "$lib-netlib.pc" "$dp/lib/x86_64-linux-gnu/pkgconfig/$lib.pc"
    done
    # A shared library this machine already has (the same soname; e.g. Ubuntu's libcurl4t64) is used
    # from the system: Debian's copy may need libraries that are not here (libcurl: libssh2, LDAP).
    # Every file of such a library (libcurl.so.4 and libcurl.so.4.8.0, which libcurl.so points to)
    # becomes a link to the system's soname.
    for f in "$dp"/lib/x86_64-linux-gnu/lib*.so.[0-9]* /opt/aether-deps/lib/x86_64-linux-gnu/lib*.so.[0-9]*; do
      name=${f##*/}
      [[ $name =~ ^(.*\.so\.[0-9]+) ]] || continue
      soname=${BASH_REMATCH[1]}
      for sys in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do
        if [ -e "$sys/$soname" ]; then
          ln -sf "$sys/$soname" "$f"
          break
        fi
      done
    done
    export CMAKE_PREFIX_PATH=$dp${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
    export PKG_CONFIG_PATH=$dp/lib/x86_64-linux-gnu/pkgconfig:$dp/share/pkgconfig
    export PKG_CONFIG_SYSROOT_DIR=/opt/aether-deps
    # (some Debian 12 packages, libnl-3-200 among them, put their libraries in /lib, not /usr/lib)
    export LD_LIBRARY_PATH=$dp/lib/x86_64-linux-gnu:/opt/aether-deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$PATH:$dp/bin  # pkg-config, where the machine has none
    export CPATH=$dp/include:$dp/include/x86_64-linux-gnu${CPATH:+:$CPATH}  # and the multiarch headers (openssl)
    export LIBRARY_PATH=$dp/lib/x86_64-linux-gnu:/opt/aether-deps/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
  else
    echo "missing packages: ${missing[*]}; trying scripts/install-deps.sh"
    scripts/install-deps.sh || die "could not install ${missing[*]} (no network? see --fetch-debs above)"
  fi
fi
# oneDNN 3.2: installed by scripts/install-deps.sh, else unpacked from the carried wheels.
onednn_prefix=/opt/aether/onednn-3.2.0
if [ ! -f "$onednn_prefix/lib/cmake/dnnl/dnnl-config.cmake" ]; then
  onednn_prefix=/opt/aether-deps/onednn-3.2.0
  if compgen -G "$debs/onednn_cpu_gomp-*.whl" >/dev/null; then
    AETHER_ONEDNN_WHEELS=$debs AETHER_ONEDNN_PREFIX=$onednn_prefix scripts/install-onednn.sh
  else
    AETHER_ONEDNN_PREFIX=$onednn_prefix scripts/install-onednn.sh || die "oneDNN 3.2 missing (see --fetch-debs)"
  fi
fi
cmake_extra+=("-DAETHER_ONEDNN_PREFIX=$onednn_prefix")
# cuDNN: the toolkit's, else PyTorch's wheel (nvidia-cudnn-cu13).
if [ ! -e /usr/local/cuda/include/cudnn.h ] && [ ! -e /usr/include/cudnn.h ] && [ ! -e /usr/include/x86_64-linux-gnu/cudnn.h ]; then
  cudnn_dir=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [ -z "$cudnn_dir" ] || [ ! -e "$cudnn_dir/include/cudnn.h" ]; then
    die "cuDNN not found (neither in the CUDA toolkit nor as PyTorch's nvidia-cudnn wheel)"
  fi
  cudnn_lib=$(find "$cudnn_dir/lib" -maxdepth 1 -name 'libcudnn.so*' | sort | head -1)
  echo "cuDNN from $cudnn_dir"
  cmake_extra+=("-DAETHER_CUDNN_INCLUDE=$cudnn_dir/include" "-DAETHER_CUDNN_LIB=$cudnn_lib")
  export LD_LIBRARY_PATH=$cudnn_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# NCCL: the toolkit's, else PyTorch's wheel (nvidia-nccl-cu13), for dist::create_nccl.
if [ ! -e /usr/local/cuda/include/nccl.h ] && [ ! -e /usr/include/nccl.h ]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/include/nccl.h" ]; then
    nccl_lib=$(find "$nccl_dir/lib" -maxdepth 1 -name 'libnccl.so*' | sort | head -1)
    echo "NCCL from $nccl_dir"
    cmake_extra+=("-DAETHER_NCCL_INCLUDE=$nccl_dir/include" "-DAETHER_NCCL_LIB=$nccl_lib")
    export LD_LIBRARY_PATH=$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  else
    echo "gpu-check: no NCCL (neither in the CUDA toolkit nor as PyTorch's nvidia-nccl wheel)" >&2
  fi
fi

# ---- 1. build ---------------------------------------------------------------------------------------
phase "configure and build ($build, $jobs jobs)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DAETHER_CUDA=ON -DAETHER_BUILD_BENCH=OFF \
  -DAETHER_BUILD_TESTS=ON "${cmake_extra[@]}" >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log"
  die "configure failed (build.log)"
}
cuda_tests=()
for f in tests/cuda_*_test.cpp; do cuda_tests+=("$(basename "$f" .cpp)"); done
# The op and layer suite, run a second time with every tensor created on the GPU (AETHER_DEVICE=cuda).
suite_tests=(ops_test view_test nn_ops_test nn_activation_test loss_test grad_test matmul_test conv_test
  pool_test layers_test optim_test)
ninja -C "$build" -j "$jobs" aether_cli "${cuda_tests[@]}" "${suite_tests[@]}" >>"$out/build.log" 2>&1 || {
  tail -60 "$out/build.log"
  die "build failed (build.log)"
}
aether=$root/$build/aether

# ---- 2. tests ---------------------------------------------------------------------------------------
phase "ctest -R cuda (${cuda_tests[*]})"
export AETHER_CACHE_DIR=$root/$build/kernel-cache
export CTEST_OUTPUT_ON_FAILURE=1
test_rc=0
ctest --test-dir "$build" -R cuda -j 4 --timeout "$test_timeout" >"$out/ctest.log" 2>&1 || test_rc=$?
tail -15 "$out/ctest.log"
# Tests that skip by design on a machine with a GPU: the checks of the errors without one, and the
# child process that cuda_ptx_cache's tests start themselves.
by_design='cuda_nccl\.WithoutAGpuOrNcclCreateSaysWhatIsMissing|cuda_runtime\.NoGpuMeansCleanErrorsNotCrashes|cuda_ptx_cache_child\.Run'
skipped=$(grep -E '\*\*\*Skipped|Not Run' "$out/ctest.log" | grep -c -v -E "$by_design" || true)
passed=$(grep -c -E 'Test +#[0-9]+: .* Passed' "$out/ctest.log" || true)
echo "ctest: $passed passed, $skipped skipped or not run, exit $test_rc"
if [ "$test_rc" -ne 0 ]; then
  echo "gpu-check: CUDA tests failed (ctest.log); benchmarks run anyway" >&2
fi
if [ -n "$gpu_name" ] && [ "$skipped" -gt 0 ]; then
  grep -E '\*\*\*Skipped|Not Run' "$out/ctest.log" | grep -v -E "$by_design" | head -20 >&2
  echo "gpu-check: a GPU is present but CUDA tests were skipped" >&2
  test_rc=1
fi

phase "the op and layer suite on the GPU (AETHER_DEVICE=cuda)"
[ "${AETHER_GPU_QUICK:-0}" = "1" ] && suite_tests=(ops_test nn_ops_test conv_test pool_test layers_test optim_test)
suite_failed=0
: >"$out/suite-on-cuda.log"
suite_one() {  # test program -> $tmp/suite.<name>.log, its last line "<name>: exit <rc>"
  local rc=0
  AETHER_DEVICE=cuda timeout "$test_timeout" "$build/tests/$1" --gtest_brief=1 >"$tmp/suite.$1.log" 2>&1 || rc=$?
  echo "$1: exit $rc" >>"$tmp/suite.$1.log"
}
export -f suite_one
export build tmp test_timeout
printf '%s\n' "${suite_tests[@]}" | xargs -P "$suite_jobs" -I{} bash -c 'suite_one {}'
for t in "${suite_tests[@]}"; do
  cat "$tmp/suite.$t.log" >>"$out/suite-on-cuda.log"
  tail -1 "$tmp/suite.$t.log"
  tail -1 "$tmp/suite.$t.log" | grep -q ': exit 0$' || suite_failed=$((suite_failed + 1))
done
if [ "$suite_failed" -gt 0 ]; then
  echo "gpu-check: $suite_failed of ${#suite_tests[@]} op/layer test programs failed on the GPU (suite-on-cuda.log)" >&2
  test_rc=1
fi

# ---- 3. benchmarks ------------------------------------------------------------------------------------
phase "copy bandwidth"
nvcc -O3 -gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90 \
  bench/gpu/copy_bw.cu -o "$tmp/copy_bw"
"$tmp/copy_bw" 2048 >"$tmp/copy.json"
cat "$tmp/copy.json"

bench() {  # name, output file, args...
  local name=$1 file=$2
  shift 2
  phase "aether bench $name $*"
  if ! timeout "$bench_timeout" "$aether" bench "$name" --device cuda --json --runs "$runs" --warmup 3 "$@" >"$tmp/$file" \
    2>"$tmp/$file.err"; then
    tail -5 "$tmp/$file.err" >&2
    printf '{"benchmark": "%s", "args": "%s", "error": %s}\n' "$name" "$*" \
      "$(python3 -c 'import json,sys; print(json.dumps(open(sys.argv[1]).read()[-2000:]))' "$tmp/$file.err")" \
      >"$tmp/$file"
  fi
  cat "$tmp/$file" >>"$out/benches.log"  # every result as it comes (kept if the check is cut off)
}
quick=${AETHER_GPU_QUICK:-0}  # 1: the float32 and NCCL steps at batch 256 only (a short lease)
bench step step_256.json --model cifarnet --batch 256
# Data-parallel (issue 17): the same step through an NCCL world of one (every gradient bucket packed
# on the GPU, all-reduced by NCCL in place, the gradients slices of it: Model::train_step).
bench step step_256_nccl.json --model cifarnet --batch 256 --communicator nccl
if [ "$quick" != "1" ]; then
bench bn-relu bn_relu_32.json --shape 256,32,32,32
bench bn-relu bn_relu_64.json --shape 256,32,32,64
bench relu-backward relu_bwd_32.json --shape 256,32,32,32
bench relu-backward relu_bwd_64.json --shape 256,32,32,64
bench step step_512.json --model cifarnet --batch 512
# Mixed precision (issue 15): the same step in bfloat16 and float16 (cuDNN / cuBLASLt on 16-bit
# operands, generated kernels on __nv_bfloat16 / __half, float16 with its loss scale).
bench step step_256_bf16.json --model cifarnet --batch 256 --precision bf16
bench step step_256_fp16.json --model cifarnet --batch 256 --precision fp16
fi

if [ "${AETHER_GPU_SKIP_TORCH:-0}" != "1" ] && [ "$quick" != "1" ]; then
  phase "PyTorch cifarnet step"
  modes=(eager eager_tf32 compile)
  [ "${AETHER_GPU_SKIP_COMPILE:-0}" = "1" ] && modes=(eager eager_tf32)
  timeout 300 python3 bench/gpu/torch_step.py --batch 256 512 --runs "$runs" --modes "${modes[@]}" \
    --out "$tmp/torch.json" >/dev/null 2>"$tmp/torch.err" || {
    tail -20 "$tmp/torch.err" >&2
    echo "gpu-check: torch_step.py failed or timed out" >&2
  }
fi

# ---- 4. summary ---------------------------------------------------------------------------------------
phase "summary"
python3 - "$tmp" "$out" "$gpu_name" "$test_rc" "$passed" "$skipped" <<'PY'
import json, os, sys
tmp, out, gpu, test_rc, passed, skipped = sys.argv[1:7]
def load(name):
    p = os.path.join(tmp, name)
    try:
        with open(p) as f:
            return json.load(f)
    except Exception as e:
        return {"error": f"{name}: {e}"}
res = {"gpu": gpu, "tests": {"exit": int(test_rc), "passed": int(passed), "skipped_or_not_run": int(skipped)},
       "copy": load("copy.json")}
copy = res["copy"].get("copy_gb_per_s") or 0
rows = [("benchmark", "median ms", "GB/s", "% of copy", "images/s")]
for key in ("bn_relu_32", "bn_relu_64", "relu_bwd_32", "relu_bwd_64"):
    j = load(key + ".json")
    res[key] = j
    gbs = j.get("gb_per_s")
    frac = j["copy_fraction"] = (gbs / copy) if gbs and copy else None
    rows.append((f"{key} {j.get('shape', '')}", f"{j.get('median_ms', float('nan')):.3f}",
                 f"{gbs:.0f}" if gbs else "error", f"{100 * frac:.0f}%" if frac else "-", ""))
torch = load("torch.json")
res["torch"] = torch
tr = {(r["mode"], r["batch"]): r for r in torch.get("results", [])}
for b in (256, 512):
    j = load(f"step_{b}.json")
    res[f"step_{b}"] = j
    ms = j.get("median_ms")
    rows.append((f"aether cifarnet step B={b}", f"{ms:.2f}" if ms else "error", "", "",
                 f"{j['images_per_s']:.0f}" if ms else ""))
    for mode in ("eager", "eager_tf32", "compile"):
        r = tr.get((mode, b))
        if r:
            ratio = (r["median_ms"] / ms) if ms else None
            res.setdefault("ratios", {})[f"torch_{mode}_over_aether_B{b}"] = ratio
            rows.append((f"  torch {mode} B={b}", f"{r['median_ms']:.2f}", "", "",
                         f"{r['images_per_s']:.0f}" + (f"  (aether {ratio:.2f}x)" if ratio else "")))
for p, what in (("bf16", "bf16"), ("fp16", "fp16"), ("nccl", "all-reduced on NCCL (world of 1)")):
    j = load(f"step_256_{p}.json")
    res[f"step_256_{p}"] = j
    ms = j.get("median_ms")
    rows.append((f"aether cifarnet step B=256 {what}", f"{ms:.2f}" if ms else "error", "", "",
                 f"{j['images_per_s']:.0f}" if ms else ""))
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(res, f, indent=1)
w = [max(len(r[i]) for r in rows) for i in range(5)]
lines = [f"GPU: {gpu or 'none'}; copy bandwidth {copy:.0f} GB/s (read + write); CUDA tests: {passed} passed, "
         f"{skipped} skipped/not run, ctest exit {test_rc}"]
lines += ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
lines.append("(aether Nx: PyTorch's median step time / aether's; > 1 means aether is faster)")
text = "\n".join(lines)
print(text)
with open(os.path.join(out, "summary.txt"), "w") as f:
    f.write(text + "\n")
PY
phase "done: results in $out"
exit "$test_rc"
