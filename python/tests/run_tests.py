#!/usr/bin/env python3
"""ctest `python_package`: installs the package the way users do (`pip install .`, into a scratch
directory) and runs its pytest suite against that installation.

    python3 python/tests/run_tests.py --nnc build/tools/nnc [--models build/models] [--work DIR]

Uses the python3 that runs it (the one with onnx, numpy, pytest and scikit-build-core: scripts/setup.sh
installs them). Exits 77 (ctest: skipped) when one is missing. The package is installed without its
CMake build (`-C wheel.cmake=false`: the Python package alone), pointed at the build tree's nnc
(NNC_EXECUTABLE); tests/install/test_wheel.sh checks the whole wheel.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnc", required=True)
    ap.add_argument("--models", default="")
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    for module in ("pytest", "onnx", "numpy", "scikit_build_core"):
        try:
            __import__(module)
        except ImportError:
            print("python_package: skipped: %s is not installed for %s" % (module, sys.executable))
            return 77
    work = args.work or tempfile.mkdtemp(prefix="nnc-python-")
    site = os.path.join(work, "site")
    shutil.rmtree(site, ignore_errors=True)
    # From a copy of what the package needs: the build writes scratch files next to its sources.
    src = os.path.join(work, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO, name), src)
    shutil.copytree(os.path.join(REPO, "python", "nnc"), os.path.join(src, "python", "nnc"))
    install = [sys.executable, "-m", "pip", "install", "-q", "--root-user-action=ignore", "--no-build-isolation",
               "--no-deps", "-C", "wheel.cmake=false", "--target", site, src]
    if subprocess.call(install) != 0:
        print("python_package: pip install . failed")
        return 1
    env = dict(os.environ, PYTHONPATH=site, NNC_EXPECT_SITE=site, NNC_EXECUTABLE=os.path.abspath(args.nnc),
               NNC_MODELS=os.path.abspath(args.models) if args.models else "")
    # From the work directory, so that `import nnc` can only find the installed package.
    tests = os.path.join(REPO, "python", "tests")
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", tests], cwd=work, env=env)


if __name__ == "__main__":
    sys.exit(main())
