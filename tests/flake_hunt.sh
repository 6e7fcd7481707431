#!/usr/bin/env bash
# Runs the torch and Python tests (ctest labels `torch` and `python`) many times, under load and
# under each CPU code path PyTorch and oneDNN can be told to take, and keeps the log of every
# failing run. A memory prediction that holds only for some timings, or a budget that only some
# CPUs meet, shows here rather than on a new machine.
#
#   bash tests/flake_hunt.sh [-n ROUNDS] [-s SETTING]... [-R REGEX] [-o LOGDIR] [--no-load] BUILD...
#
# BUILD: build trees with the torch and Python tests built (default: build/plain, and
#   build/torch2 where it exists: the Debian libtorch 1.13 tier and the PyTorch 2.x tier that
#   .ci/test makes).
# -n: rounds per tree and setting (default 20).
# -s: a setting, as environment assignments separated by commas, or `unset` for the machine's
#   own paths; repeatable (default: unset, ATEN_CPU_CAPABILITY=default, ONEDNN_MAX_CPU_ISA=AVX2,
#   and both of those together).
# -R: only the tests whose names match (ctest -R), e.g. 'torch/tests|python/torch'.
# -o: where the logs of failing runs go (default build/flake-hunt); each is named
#   TREE.SETTING.ROUND.log. A summary line per tree and setting is printed and kept in
#   LOGDIR/summary.txt.
# --no-load: no build beside the tests. By default a scratch build of remat's unit tests
#   (LOGDIR/load) is cleaned and rebuilt over and over on every core while the tests run, as a
#   busy CI machine or a developer's build would load it.
#
# Exits 0 when every run passed, 1 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=20
settings=()
regex=""
logs=$root/build/flake-hunt
load=1
trees=()
while (($#)); do
  case $1 in
    -n) rounds=$2; shift 2 ;;
    -s) settings+=("$2"); shift 2 ;;
    -R) regex=$2; shift 2 ;;
    -o) logs=$2; shift 2 ;;
    --no-load) load=0; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "flake_hunt: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) trees+=("$1"); shift ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "flake_hunt: -n takes a positive number, not '$rounds'" >&2; exit 2; }
((${#settings[@]})) || settings=(unset ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=AVX2
                                  ATEN_CPU_CAPABILITY=default,ONEDNN_MAX_CPU_ISA=AVX2)
if ((${#trees[@]} == 0)); then
  trees=("$root/build/plain")
  [[ -d $root/build/torch2 ]] && trees+=("$root/build/torch2")
fi
for t in "${trees[@]}"; do
  [[ -f $t/CTestTestfile.cmake ]] ||
    { echo "flake_hunt: $t is no build tree (bash .ci/test makes build/plain and build/torch2)" >&2; exit 2; }
done
mkdir -p "$logs"
summary=$logs/summary.txt
: >"$summary"

load_pid=""
stop_load() { [[ -z $load_pid ]] || kill -- -"$load_pid" 2>/dev/null || true; }
trap stop_load EXIT
if ((load)); then
  cmake -S "$root" -B "$logs/load" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREMAT_TORCH=OFF \
    -DREMAT_PYTHON=OFF -DREMAT_CUDA=OFF -DREMAT_BUILD_BENCHMARKS=OFF -DREMAT_BUILD_EXAMPLES=OFF \
    >"$logs/load-configure.log" 2>&1 ||
    { echo "flake_hunt: the load's build does not configure ($logs/load-configure.log)" >&2; exit 2; }
  set -m
  (while :; do
     ninja -C "$logs/load" -t clean >/dev/null 2>&1
     ninja -C "$logs/load" -j"$(nproc)" >/dev/null 2>&1 || sleep 1
   done) &
  load_pid=$!
  set +m
  echo "flake_hunt: load: remat's build rebuilt over and over beside the tests (pid $load_pid)"
fi

failed_total=0
for t in "${trees[@]}"; do
  tree=$(basename "$t")
  for setting in "${settings[@]}"; do
    env_args=()
    [[ $setting == unset ]] || IFS=, read -r -a env_args <<<"$setting"
    name=${setting//[^A-Za-z0-9_=]/_}
    passed=0 failed=0 start=$SECONDS
    for ((round = 1; round <= rounds; ++round)); do
      log=$logs/$tree.$name.$round.log
      args=(--test-dir "$t" -L "torch|python" --output-on-failure --no-tests=error -j2)
      [[ -z $regex ]] || args+=(-R "$regex")
      if env -u ATEN_CPU_CAPABILITY -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA "${env_args[@]}" ctest "${args[@]}" >"$log" 2>&1; then
        passed=$((passed + 1))
        rm -f "$log"
      else
        failed=$((failed + 1))
        echo "flake_hunt: $tree, $setting, round $round FAILED: $log" >&2
        grep -E "^[0-9]+/[0-9]+ Test +#[0-9]+: .*(Failed|Timeout|Exception)" "$log" >&2 || true
      fi
    done
    line="$tree, $setting: $passed passed, $failed failed of $rounds rounds in $((SECONDS - start)) s"
    echo "$line" | tee -a "$summary"
    failed_total=$((failed_total + failed))
  done
done
echo "flake_hunt: $failed_total failing rounds (summary: $summary)"
((failed_total == 0))
