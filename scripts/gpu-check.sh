#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU and a CUDA toolkit: it
# configures a build folder with CUDA required (SLUICE_CUDA=ON), builds
# only the GPU tests, runs them, and says what it found. On a machine
# without a device the tests that need one are skipped (ctest exit code
# 77), never passed; this script then says so and exits 2.
#
#   scripts/gpu-check.sh                 # into build-gpu/
#   BUILD_DIR=out scripts/gpu-check.sh
#   CUDAToolkit_ROOT=/opt/cuda scripts/gpu-check.sh
#
# Exit status: 0 every GPU test ran and passed; 1 a test failed or the
# build did; 2 the device tests were skipped (no usable device).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build-gpu}"
jobs="${JOBS:-$(nproc)}"

echo "== gpu-check: the machine"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader || true
else
  echo "nvidia-smi: not found (no NVIDIA driver installed?)"
fi

echo "== gpu-check: configure ($build_dir, SLUICE_CUDA=ON)"
cuda_root=()
if [ -n "${CUDAToolkit_ROOT:-}" ]; then cuda_root=(-DCUDAToolkit_ROOT="$CUDAToolkit_ROOT"); fi
cmake -S "$root" -B "$build_dir" -G Ninja -DSLUICE_CUDA=ON -DSLUICE_WERROR=ON "${cuda_root[@]}" \
  | grep -E "sluice: GPU|Configuring done|Generating done"

echo "== gpu-check: build the GPU tests"
cmake --build "$build_dir" -j "$jobs" --target sluice_gpu_tests

echo "== gpu-check: what the probe finds"
"$build_dir/tests/sluice_gpu_tests" -tc="gpu cuda: the probe finds devices or says why not" | grep '^gpu:' || true

echo "== gpu-check: run the GPU tests"
log="$build_dir/gpu-check.log"
set +e
ctest --test-dir "$build_dir" -L gpu --output-on-failure --timeout 120 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
  echo "gpu-check: FAILED (see $log)"
  exit 1
fi
skipped=$(grep -c '(Skipped)' "$log" || true)
if [ "$skipped" -gt 0 ]; then
  echo "gpu-check: $skipped device test(s) SKIPPED: no usable CUDA device here (the reason is printed above)"
  exit 2
fi
echo "gpu-check: every GPU test ran and passed"
