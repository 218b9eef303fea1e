#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan+UBSan, build-fuzz/) and runs each for a bounded time
# (FUZZ_SECONDS, default 60) on a copy of its seed corpus. Prints executions per target and in
# total; a crash is copied into fuzz/regressions/<target>/ (the replay tests then run it in every
# build) and makes the script exit non-zero.
#   scripts/fuzz.sh [target...]     targets: onnx_import shape_inference compile_run (default: all)
# Environment: FUZZ_SECONDS, FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build jobs, default 2),
# FUZZ_WORK (scratch corpora and logs, default $FUZZ_BUILD_DIR/fuzz-work), FUZZ_SEED (libFuzzer's
# -seed; random when unset; CI fixes it so that a run explores the same inputs), FUZZ_JUNIT (also write one
# JUnit test case per target there: scripts/test.sh counts them). Warnings are not errors here:
# clang warns about things gcc (the -Werror compiler of the normal builds) does not.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${FUZZ_JOBS:-2}
WORK=${FUZZ_WORK:-$BUILD/fuzz-work}
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(onnx_import shape_inference compile_run)

write_junit() {  # the <testcase> elements
  [ -n "${FUZZ_JUNIT:-}" ] || return 0
  mkdir -p "$(dirname "$FUZZ_JUNIT")"
  echo "<?xml version=\"1.0\"?><testsuite name=\"fuzz\">$1</testsuite>" >"$FUZZ_JUNIT"
}
build_failed() {
  echo "fuzz: $1"
  write_junit "<testcase name=\"fuzz_build\" classname=\"fuzz\"><failure message=\"$1\"/></testcase>"
  exit 1
}

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DNNC_FUZZ=ON -DNNC_SANITIZE=ON -DNNC_WERROR=OFF >/dev/null || build_failed "configure failed"
fi
build_targets=()
for t in "${TARGETS[@]}"; do build_targets+=("fuzz_$t"); done
cmake --build "$BUILD" --target "${build_targets[@]}" -j"$JOBS" >"$BUILD/fuzz-build.log" 2>&1 ||
  { tail -n 30 "$BUILD/fuzz-build.log"; build_failed "build failed (see $BUILD/fuzz-build.log)"; }

# Leaks are reported by the replay tests' sanitizer build; here they would stop a run at the first
# cached allocation of LLVM's JIT, so only memory errors and UB count.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
total=0
crashed=0
junit_cases=""
for t in "${TARGETS[@]}"; do
  corpus="$WORK/corpus/$t"
  artifacts="$WORK/artifacts/$t"
  rm -rf "$artifacts"  # only this run's crashes count
  mkdir -p "$corpus" "$artifacts"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
  log="$WORK/$t.log"
  extra=()
  # Importer inputs are whole models; the graph decoders need only a few hundred bytes.
  [ "$t" = onnx_import ] && extra+=(-max_len=65536) || extra+=(-max_len=512)
  [ -n "${FUZZ_SEED:-}" ] && extra+=(-seed="$FUZZ_SEED")
  "$BUILD/fuzz/fuzz_$t" "$corpus" -max_total_time="$SECONDS_PER_TARGET" -timeout=30 -rss_limit_mb=4096 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -n 1)
  execs=${execs:-0}
  total=$((total + execs))
  found=$(ls "$artifacts" 2>/dev/null | wc -l)
  printf '%-16s %10s executions in %ss  exit %d  %d crash file(s)\n' "$t" "$execs" "$SECONDS_PER_TARGET" "$rc" "$found"
  verdict="<properties><property name=\"executions\" value=\"$execs\"/></properties>"
  [ "$execs" -eq 0 ] && verdict="$verdict<failure message=\"no executions (see $log)\"/>"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    verdict="$verdict<failure message=\"exit $rc, $found crash file(s); see $log\"/>"
    crashed=1
    mkdir -p fuzz/regressions/"$t"
    for f in "$artifacts"/*; do
      [ -f "$f" ] && cp "$f" fuzz/regressions/"$t"/ && echo "  new regression input: fuzz/regressions/$t/$(basename "$f")"
    done
    grep -m 5 -E 'ERROR|runtime error|nnc internal error|fails verification|output [0-9]+: element' "$log" | sed 's/^/  /'
  fi
  [ "$execs" -eq 0 ] && crashed=1
  junit_cases="$junit_cases<testcase name=\"fuzz_$t\" classname=\"fuzz\" time=\"$SECONDS_PER_TARGET\">$verdict</testcase>"
done
write_junit "$junit_cases"
echo "fuzz: $total executions in total over ${#TARGETS[@]} target(s)"
exit $crashed
