"""The `nnc` console script of the wheel: runs the compiler `pip install .` built into this package
(nnc/bin/nnc), with the same arguments, exit status and output; `nnc serve MODEL.so ...` serves a model
under Triton Inference Server (nnc.serve, with `pip install '.[serve]'`)."""
import os
import sys

from . import Error, executable


def main():
    if sys.argv[1:2] == ["serve"]:
        from .serve import main as serve

        return serve(sys.argv[2:])
    try:
        path = executable()
    except Error as e:
        sys.exit("nnc: error: %s" % e)
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
