#!/usr/bin/env bash
# Sets up, builds and runs every test, four ways:
#   1. build/       Release: unit tests, the ONNX conformance suites at -O0 and -O2 (ratcheted against
#                   tests/conformance/passing_O*.txt), the real models, the examples, the random-graph
#                   differential test against ONNX Runtime;
#   2. build-asan/  Debug (asserts on; -O1, CMakeLists.txt) with ASan + UBSan (LeakSanitizer on): the
#                   same whole suite again;
#   3. build-tsan/  ThreadSanitizer: only nnc_cuda_tests is built; the CUDA emulator runs every kind of
#                   generated kernel and the real models' kernels with a block's threads as OS threads
#                   and the kernels compiled with -fsanitize=thread (a missing __syncthreads is a
#                   reported race), and a kernel with a missing barrier must be reported (ctest -L tsan);
#   4. build-fuzz/  clang-14 libFuzzer targets (ASan+UBSan), each run for NNC_FUZZ_SECONDS (default 60)
#                   from its seed corpus; a crash fails the run and is saved in fuzz/regressions/.
# GPU tests skip with the reason where there is no CUDA driver/GPU.
# Ends with one line: "N passed, N failed, N skipped" (over all four).
# Environment: NNC_SKIP_SANITIZERS=1 skips 2 and 3, NNC_FUZZ_SECONDS=0 skips 4.
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
status=0
# One kernel cache for every tier (NVRTC's output is keyed by source, options, architecture and NVRTC
# version; an emulated module also by its compiler flags, so the sanitizer tiers compile their own):
# the sanitizer tiers reuse what the Release tier compiled instead of running NVRTC again. Under
# build/, so a fresh clone starts empty and every kernel is really compiled once.
export NNC_CACHE_DIR=${NNC_CACHE_DIR:-$PWD/build/kernel-cache}

# Each phase's wall time, printed as it ends and summed up at the end: the budget (60 minutes on the
# 2-core CI machine) is spent by builds as much as by tests, and this log is where to see which.
phase_start=$SECONDS
phases=""
phase_done() {
  local took=$((SECONDS - phase_start))
  echo "test: phase '$1' took ${took} s"
  phases="$phases $1=${took}s"
  phase_start=$SECONDS
}

scripts/setup.sh build || exit 1
phase_done "setup and Release build"
python3 tests/models/make_models.py build/models || { echo "test: real-model generation failed"; status=1; }
phase_done "real-model generation"

run_ctest() {  # build dir, label regex, junit file
  (cd "$1" && ctest -j"$JOBS" --output-on-failure --timeout 1500 -L "$2" --output-junit "$3" >ctest.log 2>&1)
  tail -n 40 "$1/ctest.log"
  # A failure's own output sits far above the tail: print it again, from a rerun of the failed tests
  # (their result in the junit file, hence in the count, stays the first run's).
  if grep -q "tests failed out of" "$1/ctest.log" && ! grep -q ", 0 tests failed out of" "$1/ctest.log"; then
    echo "test: rerunning the failed tests of $1 once, for their output (the first run's result stands):"
    (cd "$1" && ctest --rerun-failed --output-on-failure --timeout 1500 2>&1) | tail -n 120
  fi
}
rm -f build/junit.xml build-asan/junit.xml build-tsan/junit.xml build-fuzz/junit.xml
run_ctest build '.*' junit.xml
phase_done "Release tests"

if [ "${NNC_SKIP_SANITIZERS:-0}" != "1" ]; then
  BUILD_TYPE=Debug scripts/setup.sh build-asan -DNNC_SANITIZE=ON || exit 1
  phase_done "ASan+UBSan build"
  ln -sfn ../build/models build-asan/models  # the real models, generated once above
  # intercept_tls_get_addr=0: GCC 12's sanitizer runtime takes a dynamic TLS block that happens to
  # start 16 bytes into a page for a glibc-2.19 header and reads garbage as its bounds; LeakSanitizer's
  # exit-time scan then dies ("Tracer caught signal 11") after a passing test. The CUDA emulator's
  # dlopen'ed modules (thread_local threadIdx) and model.so's runtime have dynamic TLS; which test
  # hits the bad offset depends on the allocation history (google/sanitizers#1322, fixed in GCC 14).
  ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
    run_ctest build-asan '.*' junit.xml
  phase_done "ASan+UBSan tests"

  # Without the CUDA toolkit there is no cuda target, hence nothing for the emulator to run.
  # NNC_WERROR=OFF: GCC 12 reports false stringop-overflows under -fsanitize=thread (the Release
  # build holds the code to -Werror).
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNNC_TSAN=ON -DNNC_WERROR=OFF \
    -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null || exit 1
  if cmake --build build-tsan --target help | grep nnc_cuda_tests >/dev/null; then  # (not -q: pipefail)
    cmake --build build-tsan -j"$JOBS" --target nnc_cuda_tests || exit 1
    phase_done "TSan build"
    ln -sfn ../build/models build-tsan/models
    run_ctest build-tsan tsan junit.xml
    phase_done "TSan tests"
  else
    echo "test: no CUDA toolkit: the ThreadSanitizer tier (the CUDA emulator's kernels) is skipped"
  fi
fi

if [ "${NNC_FUZZ_SECONDS:-60}" != "0" ]; then
  # A fixed seed: every CI run explores the same inputs (as far as the time allows), so a red CI
  # means a change, not luck. Longer, randomly seeded campaigns: scripts/fuzz.sh (docs/RELIABILITY.md).
  FUZZ_SECONDS=${NNC_FUZZ_SECONDS:-60} FUZZ_SEED=${NNC_FUZZ_SEED:-1} FUZZ_JUNIT=build-fuzz/junit.xml scripts/fuzz.sh
  phase_done "fuzz build and runs"
fi
echo "test: wall time ${SECONDS} s:$phases"

python3 - build/junit.xml build-asan/junit.xml build-tsan/junit.xml build-fuzz/junit.xml <<'PY'
import sys, os, xml.etree.ElementTree as ET
p = f = s = 0
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    for case in ET.parse(path).getroot().iter("testcase"):
        st = case.get("status", "")
        if case.find("skipped") is not None or st in ("notrun", "disabled"):
            s += 1
        elif case.find("failure") is not None or case.find("error") is not None or st == "fail":
            f += 1
        else:
            p += 1
print(f"{p} passed, {f} failed, {s} skipped")
sys.exit(1 if f else 0)
PY
rc=$?
[ $status -ne 0 ] && exit $status
exit $rc
