#!/usr/bin/env bash
# The GPU check: builds remat's CUDA test, its offloading report and the CUDA example, and runs
# them on the first GPU. Takes a couple of minutes on one H100/H200 (most of it compiling).
#
#   tests/gpu/run.sh [build-dir]          default build-dir: <repo>/build-gpu
#
# What it checks (tests/cuda/executor.cpp, examples/cuda/train_mlp.cpp):
#   * an MLP trained under every solver's schedule at several budgets, eagerly, with poisoned
#     frees and as a replayed CUDA graph, ends with weights, gradients and g_0 bit-identical to
#     store-all's;
#   * the device memory the executor takes is its planned arena (to the driver's 2 MiB pages),
#     and running or replaying allocates nothing, on the device or the host;
#   * CUDA failures inside a callback surface as remat::cuda_error naming the op;
#   * offloading (tests/cuda/executor.cpp, tests/cuda/offload_report.cpp): schedules with
#     transfers run with copies on two copy streams and the plan's waits as events, eagerly,
#     poisoned and as graphs, and end bit-identical to the host executor's and to store-all's;
#     measured runs keep the plan (check_run); the report prints the pinned bandwidth each way
#     and the share of the copies' time hidden behind kernels, from CUDA events;
#   * it prints the time per training step of store-all and of smaller budgets, eager and graph.
#
# Builds with CMake when it can configure the project, else with nvcc directly. Environment:
#   CUDA_ARCH=90          the GPU architecture to compile for (H100/H200: 90)
#   REMAT_GPU_MEMCHECK=1  also run a small example under compute-sanitizer's memcheck
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
arch=${CUDA_ARCH:-90}
jobs=$(nproc 2>/dev/null || echo 4)
export PATH=/usr/local/cuda/bin:$PATH
export CUDA_MODULE_LOADING=EAGER  # modules load at context creation, not inside measured runs

fail() { echo "GPU CHECK FAILED: $*" >&2; exit 1; }
step() { echo; echo "== $* ($(date +%T))"; }

step "device"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
else
  echo "nvidia-smi not found"
fi
command -v nvcc >/dev/null || fail "nvcc not found (looked in PATH and /usr/local/cuda/bin)"
nvcc --version | tail -1

step "build in $build"
mkdir -p "$build"
test_exe="" report_exe="" example_exe=""
if [[ -z "${REMAT_GPU_NO_CMAKE:-}" ]] && command -v cmake >/dev/null &&
   cmake -S "$root" -B "$build/cmake" -DCMAKE_BUILD_TYPE=Release -DREMAT_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" -DREMAT_BUILD_TESTS=ON -DREMAT_BUILD_EXAMPLES=ON \
     -DREMAT_BUILD_TOOLS=OFF -DREMAT_BUILD_BENCHMARKS=OFF >"$build/configure.log" 2>&1; then
  cmake --build "$build/cmake" -j "$jobs" \
    --target test_cuda_executor cuda_offload_report train_mlp_cuda || fail "the CMake build failed"
  test_exe=$build/cmake/tests/cuda/test_cuda_executor
  report_exe=$build/cmake/tests/cuda/cuda_offload_report
  example_exe=$build/cmake/examples/cuda/train_mlp_cuda
else
  [[ -z "${REMAT_GPU_NO_CMAKE:-}" ]] &&
    echo "CMake could not configure the project (see $build/configure.log); building with nvcc"
  flags=(-std=c++20 -O2 "-arch=sm_$arch" -I"$root/include" -I"$root/examples/cuda"
         -I"$root/tests/support" -Xcompiler=-Wall,-Wextra)
  nvcc "${flags[@]}" -o "$build/test_cuda_executor" "$root/tests/cuda/executor.cpp" \
    "$root/examples/cuda/mlp_kernels.cu" "$root/tests/cuda/word_kernels.cu" ||
    fail "nvcc could not build the test"
  nvcc "${flags[@]}" -o "$build/cuda_offload_report" "$root/tests/cuda/offload_report.cpp" \
    "$root/tests/cuda/word_kernels.cu" || fail "nvcc could not build the offloading report"
  nvcc "${flags[@]}" -o "$build/train_mlp_cuda" "$root/examples/cuda/train_mlp.cpp" \
    "$root/examples/cuda/mlp_kernels.cu" || fail "nvcc could not build the example"
  test_exe=$build/test_cuda_executor
  report_exe=$build/cuda_offload_report
  example_exe=$build/train_mlp_cuda
fi

step "CUDA executor tests"
"$test_exe"
rc=$?
[[ $rc -eq 77 ]] && fail "the test found no usable GPU (exit code 77: skipped)"
[[ $rc -ne 0 ]] && fail "the CUDA executor tests failed (exit code $rc)"

step "offloading: pinned bandwidth, copies hidden behind kernels, results against the host executor"
"$report_exe" --mib 32 --stages 8
rc=$?
[[ $rc -eq 77 ]] && fail "the offloading report found no usable GPU (exit code 77)"
[[ $rc -ne 0 ]] && fail "offloading runs differ from the host executor's or store-all's, or broke their plan (exit code $rc)"

step "training example: step times of store-all and smaller budgets"
"$example_exe" --layers 16 --width 1024 --batch 256 --steps 10 ||
  fail "the example failed, or its weights differ from store-all's"
"$example_exe" --layers 8 --width 2048 --batch 256 --steps 5 ||
  fail "the example failed, or its weights differ from store-all's"

if [[ -n "${REMAT_GPU_MEMCHECK:-}" ]]; then
  step "compute-sanitizer memcheck on a small example"
  command -v compute-sanitizer >/dev/null || fail "compute-sanitizer not found"
  compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$example_exe" --layers 6 --width 64 --batch 8 --steps 1 ||
    fail "compute-sanitizer found errors"
fi

step "all GPU checks passed"
