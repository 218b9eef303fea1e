#!/usr/bin/env bash
# Does the wheel install and work on another machine? A fresh Debian 12 root (debootstrap, minbase:
# no LLVM, no protobuf, no build tree, no compiler), the wheel copied in, then inside it (chroot):
#   1. python3 -m venv, pip install the wheel (numpy from PyPI), `nnc --version`, ldd of the installed nnc;
#   2. without a C++ compiler: compiling a model.so fails with nnc's diagnostic naming what to install;
#   3. with Debian's g++ installed (what a machine of the development kind has): nnc.compile(model)(x)
#      matches the ONNX test data, and so does a model.so the `nnc` command links.
# Needs root, network (Debian's mirror, PyPI) and ~600 MB in WORK. Not part of scripts/test.sh (CI's
# machine may not allow chroot); the ctest `wheel` checks the same wheel on the building machine.
# Usage: scripts/wheel_fresh_root.sh WHEEL MODEL_CASE_DIR [WORK]   (a case dir: model.onnx and
# test_data_set_0/, e.g. build/models/model_mlp). Uses the python3 on PATH (with onnx) to turn the test
# data into .npy files.
set -euo pipefail
WHEEL=$(readlink -f "$1") CASE=$(readlink -f "$2") WORK=${3:-/tmp/nnc-fresh-root}
ROOT=$WORK/root
[ "$(id -u)" = 0 ] || { echo "wheel_fresh_root: needs root (debootstrap, chroot)"; exit 1; }
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
if [ ! -x "$ROOT/usr/bin/python3" ]; then
  rm -rf "$ROOT" && mkdir -p "$ROOT"
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$ROOT" \
    http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 ||
    { echo "wheel_fresh_root: debootstrap failed:"; tail -20 "$WORK/debootstrap.log"; exit 1; }
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
rm -rf "$ROOT/check" && mkdir -p "$ROOT/check"
# A host whose HTTPS goes through an intercepting proxy trusts that proxy's CA (PIP_CERT): so must
# pip in the root. The network's plumbing, not what is checked.
pip_env=""
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
  cp "$PIP_CERT" "$ROOT/check/host-ca.crt" && pip_env="PIP_CERT=/check/host-ca.crt"
fi
cp "$WHEEL" "$ROOT/check/" && cp "$CASE/model.onnx" "$ROOT/check/"
python3 - "$CASE" "$ROOT/check" <<'PY'
import sys, numpy as np, onnx
from onnx import numpy_helper
case, out = sys.argv[1:]
for name in ("input_0", "output_0"):
    t = onnx.TensorProto()
    t.ParseFromString(open(f"{case}/test_data_set_0/{name}.pb", "rb").read())
    np.save(f"{out}/{name}.npy", numpy_helper.to_array(t))
PY
mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
trap 'umount "$ROOT/proc" 2>/dev/null || true' EXIT
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/check /bin/sh -c "cd /check && $1"; }

echo "wheel_fresh_root: $(in_root '. /etc/os-release; echo $PRETTY_NAME'); no compiler:" \
  "$(in_root 'command -v c++ g++ clang++ cc || echo none')"
in_root "dpkg -l | grep -cE '^ii +(llvm|libllvm|libprotobuf|g\+\+)' || true" | sed 's/^/wheel_fresh_root: LLVM, protobuf or g++ packages: /'
in_root "rm -rf /v && python3 -m venv /v && $pip_env /v/bin/pip install -q --disable-pip-version-check /check/$(basename "$WHEEL")"
in_root "/v/bin/nnc --version"
in_root "ldd /v/lib/python3*/site-packages/nnc/bin/nnc" | sed 's/^/wheel_fresh_root: ldd: /'

# 2. No C++ compiler on this machine: a clear diagnostic, not a shell's "not found".
set +e
out=$(in_root "/v/bin/nnc model.onnx -o m.so" 2>&1)
rc=$?
set -e
echo "wheel_fresh_root: without a compiler: exit $rc: $out"
[ $rc -ne 0 ] && grep -q "needs a C++ compiler driver" <<<"$out" || { echo "wheel_fresh_root: FAIL (2)"; exit 1; }
[ ! -e "$ROOT/check/m.so" ] || { echo "wheel_fresh_root: FAIL: a partial m.so was left"; exit 1; }

# 3. With Debian's g++ (as on a machine of the development kind).
in_root "apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null"
in_root "/v/bin/python -c \"
import numpy as np, nnc
x, want = np.load('input_0.npy'), np.load('output_0.npy')
np.testing.assert_allclose(nnc.compile('model.onnx')(x), want, rtol=1e-4, atol=1e-5)
print('wheel_fresh_root: nnc.compile(model.onnx)(x) matches the test data')
\""
in_root "/v/bin/nnc model.onnx -o m.so && /v/bin/python -c \"
import numpy as np, nnc
np.testing.assert_allclose(nnc.load('m.so')(np.load('input_0.npy')), np.load('output_0.npy'), rtol=1e-4, atol=1e-5)
print('wheel_fresh_root: the model.so linked by nnc in the fresh root matches the test data')
\""
echo "wheel_fresh_root: PASS"
