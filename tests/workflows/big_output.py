"""``python -m tests.workflows.big_output N``: writes N KiB to stdout and to stderr, interleaved in
4 KiB writes (more than a pipe holds on either), then exits 3."""

import os
import sys

if __name__ == "__main__":
    n = int(sys.argv[1])
    for i in range(n // 4):
        os.write(1, bytes([ord("a") + i % 26]) * 4096)
        os.write(2, bytes([ord("A") + i % 26]) * 4096)
    sys.exit(3)
