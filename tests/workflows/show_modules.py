"""``python -m tests.workflows.show_modules NAME...`` prints JSON: which NAMEs were already imported
when it started (in a forked step: what its zygote imported ahead)."""

import json
import sys

if __name__ == "__main__":
    print(json.dumps({name: name in sys.modules for name in sys.argv[1:]}))
