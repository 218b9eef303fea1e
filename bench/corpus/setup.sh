#!/bin/sh
# Creates the corpus venv (PyPI: torch, torchvision, timm, transformers, the peers), exports the corpus and
# gathers the shipped models. Usage: bench/corpus/setup.sh [MODELS_DIR]   (default /tmp/nnc-corpus)
# The venv is $NNC_CORPUS_VENV (default ~/.cache/nnc/venv-corpus); about 5 GB with torch's CUDA libraries.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${NNC_CORPUS_VENV:-$HOME/.cache/nnc/venv-corpus}
models=${1:-/tmp/nnc-corpus}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$here/requirements.txt"
fi
"$venv/bin/python" "$here/export.py" --out "$models"
"$venv/bin/python" "$here/shipped.py" --out "$models"
echo "corpus in $models; run: $venv/bin/python $here/run.py --models $models --time"
