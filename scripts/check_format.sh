#!/usr/bin/env bash
# Checks that nnc's own C/C++ sources are formatted by clang-format-14 with the repository's
# .clang-format (other clang-format versions format slightly differently). Run by CTest (label unit);
# exits 77 (skipped) without clang-format-14 or outside a git checkout. Fix with:
#   git ls-files '*.cpp' '*.h' '*.cuh' '*.c' | grep -v '^third_party/' | xargs clang-format-14 -i
set -u
cd "$(dirname "$0")/.."
command -v clang-format-14 >/dev/null || { echo "SKIP: clang-format-14 not installed (scripts/setup.sh installs it)"; exit 77; }
files=$(git ls-files '*.cpp' '*.h' '*.cuh' '*.c' 2>/dev/null | grep -v '^third_party/') ||
  { echo "SKIP: not a git checkout"; exit 77; }
[ -n "$files" ] || { echo "SKIP: no sources listed by git"; exit 77; }
bad=$(for f in $files; do [ -f "$f" ] && ! clang-format-14 --dry-run --Werror "$f" >/dev/null 2>&1 && echo "$f"; done)
if [ -n "$bad" ]; then
  echo "not formatted with clang-format-14 (.clang-format):"
  echo "$bad" | sed 's/^/  /'
  exit 1
fi
echo "$(echo "$files" | wc -w) files formatted"
