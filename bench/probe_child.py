"""``python -m bench.probe_child [--import M1,M2] [--ecr REPOSITORY]``: timings taken inside a step-like
process, printed as one JSON object (``import_s``, ``ecr_s`` = ``ecr_client_s`` + ``ecr_call_s``).

The benchmark forks it from the executor's warm interpreter (:mod:`workflows.local.forkserver_server`),
as every step is started, to measure what a forked step still pays: imports not already there, and
the ECR lookup (building the client, then its first ``DescribeImages``).
"""

import argparse
import importlib
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--import", dest="modules", default="")
    parser.add_argument("--ecr", default="")
    parser.add_argument("--region", default="us-west-2")
    args = parser.parse_args()
    t0 = time.perf_counter()
    for name in filter(None, (m.strip() for m in args.modules.split(","))):
        importlib.import_module(name)
    t1 = time.perf_counter()
    if args.ecr:
        from steps.aws import ecr

        client = ecr.make_client(args.region)
        t_client = time.perf_counter()
        ecr.describe_image(args.ecr, region=args.region, tag="0.0.0", client=client)
    else:
        t_client = t1
    t2 = time.perf_counter()
    print(
        json.dumps(
            {
                "import_s": t1 - t0,
                "ecr_s": t2 - t1,
                "ecr_client_s": t_client - t1,
                "ecr_call_s": t2 - t_client,
            }
        )
    )


if __name__ == "__main__":
    main()
