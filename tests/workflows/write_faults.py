"""``python -m tests.workflows.write_faults``: writes to what the zygote imported (the reference
counts of every preloaded module's objects, as any step's work does) and prints how many page
faults (``ru_minflt``) that cost this process: copies of the zygote's pages not made before."""

import resource
import sys

if __name__ == "__main__":
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    held = []
    for module in list(sys.modules.values()):
        held.extend(list(getattr(module, "__dict__", {}).values()))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    print(after - before)
