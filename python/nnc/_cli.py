"""The `nnc` console script of the wheel: runs the compiler `pip install .` built into this package
(nnc/bin/nnc), with the same arguments, exit status and output."""
import os
import sys

from . import Error, executable


def main():
    try:
        path = executable()
    except Error as e:
        sys.exit("nnc: error: %s" % e)
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
