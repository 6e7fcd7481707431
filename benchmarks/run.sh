#!/usr/bin/env bash
# Runs one benchmark program of build/release (or $BUILD) and writes its output to
# benchmarks/results/<name>.txt under a header naming the commit, the machine and the day:
#
#   bash benchmarks/run.sh solver_scaling [--benchmark_filter=...]
#   bash benchmarks/run.sh engines | executor | memory_plan | coarsen_quality | offload_quality |
#                           torch_step
#
# bench_quality writes a folder of its own: python3 benchmarks/readme_tables.py quality.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: bash benchmarks/run.sh NAME [ARGS...]}
shift
exe=${BUILD:-build/release}/benchmarks/bench_$name
[[ -x $exe ]] || { echo "no $exe: build it first (cmake --build --preset release --target bench_$name)" >&2; exit 2; }
out=benchmarks/results/$name.txt
model=$(grep -m1 "model name" /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')
{
  echo "# bench_$name $*"
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- include benchmarks || echo ' (with local changes)'), $(date -u +%Y-%m-%d)"
  echo "# machine: ${model:-unknown}, $(nproc) cores, $(uname -sr)"
  "$exe" "$@"
} 2>&1 | tee "$out"
