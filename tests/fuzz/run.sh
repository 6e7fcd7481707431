#!/usr/bin/env bash
# Builds the fuzz targets (preset `fuzz`: clang++, libFuzzer, AddressSanitizer + UBSan) and runs
# each for SECONDS_PER_TARGET seconds (default 60), starting from its seed corpus
# tests/fuzz/corpus/<target>/ (read only). New inputs go to BUILD/corpus/<target>/, a crashing
# input to BUILD/artifacts/; the first target that fails stops the script with libFuzzer's report.
# BUILD is $REMAT_FUZZ_BUILD, default build/fuzz; $REMAT_FUZZ_SEED, when set, fixes libFuzzer's seed
# (CI sets it, so that its smoke runs the same inputs every time).
#
#   tests/fuzz/run.sh 600        # ten minutes per target
set -euo pipefail
seconds=${1:-60}
cd "$(dirname "$0")/../.."
build=${REMAT_FUZZ_BUILD:-build/fuzz}
cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" -j 2
for source in tests/fuzz/*.cpp; do
  target=$(basename "$source" .cpp)
  mkdir -p "$build/corpus/$target" "$build/artifacts"
  log="$build/fuzz-$target.log"
  echo "=== fuzz_$target: $seconds s"
  if ! "$build/tests/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
      ${REMAT_FUZZ_SEED:+-seed="$REMAT_FUZZ_SEED"} \
      -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
      "$build/corpus/$target" "tests/fuzz/corpus/$target" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$target failed; the input is in $build/artifacts/" >&2
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$log" || true
done
