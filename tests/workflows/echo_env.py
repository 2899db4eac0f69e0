"""``python -m tests.workflows.echo_env N``: prints its argument and ``$ECHO_ID`` to stdout, ``err N``
to stderr, and exits with N % 7."""

import os
import sys

if __name__ == "__main__":
    n = int(sys.argv[1])
    print(f"arg {n} env {os.environ.get('ECHO_ID')}")
    print(f"err {n}", file=sys.stderr)
    sys.exit(n % 7)
