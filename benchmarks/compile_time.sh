#!/usr/bin/env bash
# What the README's first example costs to compile, with <remat/solve.hpp> (every solver
# instantiated in the file) and with <remat/compiled.hpp> (declarations only; the solvers compiled
# once, in the program's one implementation file, timed apart). CPU time (user + system: on a
# shared machine less noisy than wall time) and peak memory of the compiler, the best of RUNS
# (default 3), at -O2 and -O0, with $CXX (default g++):
#
#   bash benchmarks/compile_time.sh                  # writes benchmarks/results/compile_time.txt
#   CXX=clang++ RUNS=5 bash benchmarks/compile_time.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${CXX:-g++}
runs=${RUNS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The README's first ```cpp block, as tests/CMakeLists.txt extracts it.
python3 - "$work" <<'PY'
import re, sys
text = open("README.md").read()
example = re.search(r"```cpp\n(.*?)```", text, re.S).group(1)
open(f"{sys.argv[1]}/template.cpp", "w").write(example)
compiled = example.replace("#include <remat/solve.hpp>", "#include <remat/compiled.hpp>")
compiled = compiled.replace("remat::solve(", "remat::compiled::solve(")
assert compiled != example
open(f"{sys.argv[1]}/compiled.cpp", "w").write(compiled)
open(f"{sys.argv[1]}/implementation.cpp", "w").write(
    "#define REMAT_COMPILED_IMPLEMENTATION\n#include <remat/compiled.hpp>\n")
PY
# The best CPU time (s) and peak memory (MB) of `runs` compilations of $1 with flags $2.
measure() {
  local best_s="" best_mb=""
  for ((k = 0; k < runs; ++k)); do
    /usr/bin/time -f "%U %S %M" -o "$work/time" "$cxx" -std=c++20 $2 -Iinclude -c "$work/$1" \
      -o "$work/out.o"
    read -r user sys kb < "$work/time"
    s=$(awk "BEGIN { print $user + $sys }")
    mb=$((kb / 1024))
    if [[ -z $best_s ]] || awk "BEGIN { exit !($s < $best_s) }"; then best_s=$s; fi
    if [[ -z $best_mb ]] || ((mb < best_mb)); then best_mb=$mb; fi
  done
  printf "%-45s %6.2f s %6d MB\n" "$1 $2" "$best_s" "$best_mb"
}
model=$(grep -m1 "model name" /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')
# (Before the results file is rewritten, which would count as a change.)
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- include benchmarks || echo ' (with local changes)')"
{
  echo "# compile_time.sh: the README's first example, best of $runs, $($cxx --version | head -1)"
  echo "# commit $commit, $(date -u +%Y-%m-%d)"
  echo "# machine: ${model:-unknown}, $(nproc) cores, $(uname -sr)"
  echo "# file and flags                                  CPU     peak"
  for flags in -O2 -O0; do
    measure template.cpp "$flags"        # <remat/solve.hpp>, remat::solve
    measure compiled.cpp "$flags"        # <remat/compiled.hpp>, remat::compiled::solve
    measure implementation.cpp "$flags"  # the one file that compiles the solvers
  done
} | tee benchmarks/results/compile_time.txt
# Both programs print the same.
"$cxx" -std=c++20 -O2 -Iinclude "$work/template.cpp" -o "$work/template" -pthread
"$cxx" -std=c++20 -O2 -Iinclude "$work/compiled.cpp" "$work/implementation.cpp" -o "$work/compiled" \
  -pthread
cmp <("$work/template") <("$work/compiled") && echo "both print the same"
