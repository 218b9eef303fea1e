#!/usr/bin/env bash
# Writes what the compiler makes of a set of models, for a golden diff across a refactor (the
# tinygrad "process replay" idea): for every model.onnx under the given directories, the kernel IR
# and the plan at -O0 and -O2, for each target this nnc can compile for, one file each (a compile
# error is written in place of the output, so a changed diagnostic shows too).
#
#   scripts/kernel_golden.sh NNC OUT_DIR MODEL_DIR...
#
# Run it with the nnc of the commit before the change and of the change itself, then
# `diff -r OUT_BEFORE OUT_AFTER`: a pure restructuring shows nothing. Nothing is run, so no GPU is
# needed for cuda; `--emit=kernel-ir` stops after lowering, `--emit=plan` generates code (the
# target's code generation fills in its part of the plan: cuda's thread mappings; NVRTC's output is
# cached in $NNC_CACHE_DIR). The real models and the ONNX node tests took 3.7 minutes on 2 cores. Environment: TARGETS (default "cpu cuda"),
# LEVELS (default "0 2"), EMITS (default "kernel-ir plan"; add llvm for a cpu code-generator change,
# cuda for the CUDA emitter's: those generate code), NNC_FLAGS (more options for every compile, e.g.
# --disable-pass=NAME to hold a new pass out of the comparison), JOBS (default: the cores).
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 NNC OUT_DIR MODEL_DIR..." >&2
  exit 2
fi
NNC=$(realpath "$1")
OUT=$2
shift 2
TARGETS=${TARGETS:-cpu cuda}
LEVELS=${LEVELS:-0 2}
EMITS=${EMITS:-kernel-ir plan}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT"

emit_one() {  # model.onnx, its name within OUT
  local model=$1 name=$2 dir="$OUT/$2"
  mkdir -p "$dir"
  for target in $TARGETS; do
    for level in $LEVELS; do
      for what in $EMITS; do
        [ "$what" = llvm ] && [ "$target" != cpu ] && continue
        [ "$what" = cuda ] && [ "$target" != cuda ] && continue
        # shellcheck disable=SC2086
        "$NNC" "$model" --target="$target" -O"$level" --emit="$what" ${NNC_FLAGS:-} >"$dir/$target-O$level.$what" 2>&1 ||
          echo "(exit $?)" >>"$dir/$target-O$level.$what"
      done
    done
  done
}
export -f emit_one
export NNC OUT TARGETS LEVELS EMITS NNC_FLAGS

for root in "$@"; do
  base=$(basename "$root")
  find "$root" -name model.onnx | sort | while read -r model; do
    rel=${model#"$root"/}
    printf '%s\0%s\0' "$model" "$base/$(dirname "$rel")"
  done
done | xargs -0 -n 2 -P "$JOBS" bash -c 'emit_one "$0" "$1"'
echo "kernel_golden: $(find "$OUT" -type f | wc -l) files in $OUT"
