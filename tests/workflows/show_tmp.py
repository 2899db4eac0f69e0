"""``python -m tests.workflows.show_tmp`` prints JSON: the directory ``warm_tmp`` got when it was
imported (by a zygote, or now) and the one ``tempfile`` gives this process now."""

import json
import tempfile

import tests.workflows.warm_tmp as warm

if __name__ == "__main__":
    print(json.dumps({"at_import": warm.AT_IMPORT, "now": tempfile.gettempdir()}))
