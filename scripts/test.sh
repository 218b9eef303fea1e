#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, the ONNX conformance suites at -O0 and -O2
# (ratcheted against tests/conformance/passing_O*.txt), the real models, the examples, and then the
# same unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
# Ends with one line: "N passed, N failed, N skipped" (over both builds).
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
status=0

scripts/setup.sh build || exit 1
python3 tests/models/make_models.py build/models || { echo "test: real-model generation failed"; status=1; }

run_ctest() {  # build dir, label regex, junit file
  (cd "$1" && ctest -j"$JOBS" --output-on-failure --timeout 1500 -L "$2" --output-junit "$3") | tail -n 40
}
run_ctest build '.*' junit.xml

if [ "${NNC_SKIP_SANITIZERS:-0}" != "1" ]; then
  BUILD_TYPE=Debug scripts/setup.sh build-asan -DNNC_SANITIZE=ON || exit 1
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan 'unit' junit.xml
fi

python3 - build/junit.xml build-asan/junit.xml <<'PY'
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
