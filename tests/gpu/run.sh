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
# Then remat::torch and remat.torch against this machine's own PyTorch (its python3's torch, a
# CUDA build): the C++ tests that need a GPU (tests/torch: the CUDA meter in the allocator's
# 512-byte blocks, the CUDA generator put back for recomputation, gradients bitwise equal to
# plain autograd with dropout) and the Python tests (tests/python, the GPU case of
# remat.torch.Checkpointed among them). Every part runs even when an earlier one failed; the
# script fails at the end, listing what failed or could not run.
#
# This machine has no Debian packages: the header-only libraries the configure needs (doctest,
# nlohmann-json, pybind11) come from <repo>/third_party, made by `bash .ci/third-party` on a
# development machine and carried beside the work tree (the device tool's `carry`).
#
# Builds with CMake when it can configure the project (printing the configure log's tail when it
# cannot), else the CUDA part with nvcc directly. Environment:
#   CUDA_ARCH=90          the GPU architecture to compile for (H100/H200: 90)
#   REMAT_GPU_MEMCHECK=1  also run a small example under compute-sanitizer's memcheck
#   REMAT_GPU_PYTHON      the Python whose torch is used (default: python3)
#   REMAT_GPU_ALL_TORCH=1 run every remat::torch test, not only those that use the GPU
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
arch=${CUDA_ARCH:-90}
jobs=$(nproc 2>/dev/null || echo 4)
export PATH=/usr/local/cuda/bin:$PATH
export CUDA_MODULE_LOADING=EAGER  # modules load at context creation, not inside measured runs

fail() { echo "GPU CHECK FAILED: $*" >&2; exit 1; }
step() { echo; echo "== $* ($(date +%T))"; }
problems=()
problem() { echo "GPU CHECK PROBLEM: $*" >&2; problems+=("$*"); }
show_log() { echo "--- the last 40 lines of $1:"; tail -n 40 "$1"; echo "---"; }
prefix=()
if [[ -d $root/third_party ]]; then
  prefix=(-DCMAKE_PREFIX_PATH="$root/third_party")
else
  echo "no $root/third_party (bash .ci/third-party, carried): CMake needs doctest and nlohmann-json installed"
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)

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
   cmake -S "$root" -B "$build/cmake" "${generator[@]}" "${prefix[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DREMAT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DREMAT_BUILD_TESTS=ON \
     -DREMAT_BUILD_EXAMPLES=ON -DREMAT_BUILD_TOOLS=OFF -DREMAT_BUILD_BENCHMARKS=OFF \
     -DREMAT_TORCH=OFF -DREMAT_PYTHON=OFF >"$build/configure.log" 2>&1; then
  cmake --build "$build/cmake" -j "$jobs" \
    --target test_cuda_executor cuda_offload_report train_mlp_cuda || fail "the CMake build failed"
  test_exe=$build/cmake/tests/cuda/test_cuda_executor
  report_exe=$build/cmake/tests/cuda/cuda_offload_report
  example_exe=$build/cmake/examples/cuda/train_mlp_cuda
else
  if [[ -z "${REMAT_GPU_NO_CMAKE:-}" ]]; then
    if command -v cmake >/dev/null; then show_log "$build/configure.log"; fi
    problem "CMake could not configure the CUDA build (no cmake, or see above); built with nvcc"
  fi
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
[[ $rc -ne 0 ]] && problem "the CUDA executor tests failed (exit code $rc)"

step "offloading: pinned bandwidth, copies hidden behind kernels, results against the host executor"
"$report_exe" --mib 32 --stages 8
rc=$?
[[ $rc -eq 77 ]] && fail "the offloading report found no usable GPU (exit code 77)"
[[ $rc -ne 0 ]] && problem "offloading runs differ from the host executor's or store-all's, or broke their plan (exit code $rc)"

step "training example: step times of store-all and smaller budgets"
"$example_exe" --layers 16 --width 1024 --batch 256 --steps 10 ||
  problem "the example failed, or its weights differ from store-all's"
"$example_exe" --layers 8 --width 2048 --batch 256 --steps 5 ||
  problem "the example failed, or its weights differ from store-all's"

if [[ -n "${REMAT_GPU_MEMCHECK:-}" ]]; then
  step "compute-sanitizer memcheck on a small example"
  command -v compute-sanitizer >/dev/null || fail "compute-sanitizer not found"
  compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$example_exe" --layers 6 --width 64 --batch 8 --steps 1 ||
    problem "compute-sanitizer found errors"
fi

torch_part() {
  local py=${REMAT_GPU_PYTHON:-python3} tb=$build/torch
  command -v cmake >/dev/null || { problem "no cmake: remat::torch needs CMake (TorchConfig)"; return; }
  py=$(command -v "$py") || { problem "no ${REMAT_GPU_PYTHON:-python3}"; return; }
  "$py" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPUs', torch.cuda.device_count())" ||
    { problem "$py cannot import torch"; return; }
  local pybind=()
  if "$py" -c "import pybind11" 2>/dev/null; then
    pybind=(-Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)")
  fi
  cmake -S "$root" -B "$tb" "${generator[@]}" "${prefix[@]}" "${pybind[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DREMAT_TORCH_PYTHON="$py" -DREMAT_PYTHON=AUTO -DREMAT_CUDA=OFF -DREMAT_BUILD_TESTS=ON \
    -DREMAT_BUILD_TOOLS=OFF -DREMAT_BUILD_EXAMPLES=OFF -DREMAT_BUILD_BENCHMARKS=OFF \
    >"$build/torch-configure.log" 2>&1
  local rc=$?
  grep -E "^-- remat::torch|^-- remat Python" "$build/torch-configure.log"
  if [[ $rc -ne 0 ]]; then
    show_log "$build/torch-configure.log"; problem "the remat::torch configure failed"; return
  fi
  if ! grep -q "^-- remat::torch: libtorch .* with CUDA" "$build/torch-configure.log"; then
    show_log "$build/torch-configure.log"
    problem "remat::torch was not configured against a CUDA libtorch (see above)"; return
  fi
  local python_ok=1
  if ! grep -q "^-- remat Python package: remat.torch on" "$build/torch-configure.log"; then
    problem "remat.torch is not built (the configure's 'remat Python package' lines above say why)"
    python_ok=0
  fi
  cmake --build "$tb" -j "$jobs" --target test_torch ||
    { problem "the remat::torch tests' build failed"; return; }
  if ((python_ok)); then
    cmake --build "$tb" -j "$jobs" --target remat_python_core remat_python_torch ||
      { problem "the remat.torch build failed"; python_ok=0; }
  fi

  step "remat::torch tests on the GPU"
  local filter=(--test-case="cuda: *,rng: *,allocated_size*,default_memory*")
  [[ -n "${REMAT_GPU_ALL_TORCH:-}" ]] && filter=()
  local out=$build/torch-tests.log
  CUBLAS_WORKSPACE_CONFIG=:4096:8 "$tb/tests/torch/test_torch" "${filter[@]}" 2>&1 | tee "$out"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || problem "remat::torch's tests failed on the GPU"
  grep -q "skipped: no GPU\|skipped: this libtorch has no CUDA" "$out" &&
    problem "remat::torch's GPU tests were skipped: libtorch saw no GPU"

  ((python_ok)) || return
  step "remat.torch (Python) tests"
  "$py" -c "import torch; assert torch.cuda.is_available()" ||
    problem "Python's torch sees no GPU: its GPU test is skipped"
  CUBLAS_WORKSPACE_CONFIG=:4096:8 ctest --test-dir "$tb" -R "^python/(core|torch)$" \
    --output-on-failure --no-tests=error -j 2 || problem "the Python tests failed"
  CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONPATH="$tb/python" OMP_NUM_THREADS=1 \
    "$py" "$root/tests/python/test_torch.py" -v -k gpu 2>&1 | tee "$build/python-gpu.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || problem "remat.torch's GPU test failed"
  grep -q "skipped" "$build/python-gpu.log" && problem "remat.torch's GPU test was skipped"
}
step "remat::torch and remat.torch against this machine's PyTorch"
torch_part

if ((${#problems[@]})); then
  echo
  echo "GPU CHECK FAILED: ${#problems[@]} problem(s):" >&2
  printf '  * %s\n' "${problems[@]}" >&2
  exit 1
fi
step "all GPU checks passed"
