"""``python -m tests.workflows.show_warm`` prints JSON: which ``WARM_UP`` results a forked step
finds already computed (each was computed by its zygote before the fork, or not at all)."""

import json
import re
import sys

if __name__ == "__main__":
    modules = sys.modules
    ecr = modules.get("steps.aws.ecr")
    transport = modules.get("steps.aws.transport")
    yaml = modules.get("steps.kustomize.yaml_nodes")
    print(
        json.dumps(
            {
                "ecr_loader": bool(ecr and ecr._LOADER is not None),
                "ecr_session": bool(ecr and ecr._WARM_SESSION is not None),
                "ecr_tls": bool(transport and transport._TLS is not None),
                "yaml_tables": bool(
                    yaml
                    and all(
                        isinstance(rx, re.Pattern) for t in yaml._IMPLICIT for p in t.values() for _, rx in p
                    )
                ),
            }
        )
    )
