"""A local sensor process for the chaos test: ``imagebump run --local`` plus three test knobs.

It builds exactly what :func:`imagebump.commands.run.run` builds — the rendered ``image-update``
WorkflowTemplate run by :class:`workflows.local.executor.LocalExecutor` behind
:class:`sensors.local.LocalSensor`, the rules as the ``imagebump-rules`` ConfigMap, the Git token
from ``IMAGEBUMP_GIT_TOKEN`` as the ``imagebump-git`` / ``imagebump-git-read`` Secrets, and
``AWS_*`` / ``IMAGEBUMP_*`` passed through with :func:`imagebump.commands.run.step_environment` —
and adds what ``imagebump run`` has no flag for:

* ``--backoff-scale``: the template's ``10s`` retry backoffs scaled down, so a run with 10% of
  Git and GitHub requests failing finishes in minutes (``imagebump run`` always uses 1.0);
* ``--work-root``: where the steps' private temporary directories are created, so the test can
  find (and end) step processes orphaned when this process is SIGKILLed;
* ``--results``: one JSON line per finished workflow with the full event id and the outputs
  the chaos test classifies (``imagebump run`` prints an abbreviated progress line instead).

Logs: the sensor's and executor's JSON-line records on stderr. Runs until SIGTERM/SIGINT.

Usage: ``python -m tests.chaos.sensor_proc --queue-url URL --endpoint-url URL --rules FILE
--results FILE --work-root DIR [--concurrency N] [--visibility-timeout S] [--backoff-scale F]``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

#: Output parameters the chaos test reads from each node.
_KEPT_OUTPUTS = ("action", "decision", "reason", "changed", "targets", "branch", "pr-number", "commit-sha")


def result_record(event: dict[str, Any], result: Any) -> dict[str, Any]:
    """One JSON-able record of a finished workflow: the event and every step node's outcome."""
    nodes = []
    for node in result.nodes:
        if node.template not in ("resolve-image", "edit-kustomize", "commit-pr"):
            continue
        nodes.append(
            {
                "name": node.name,
                "template": node.template,
                "phase": node.phase,
                "attempts": node.attempts,
                "message": (node.message or "")[:300],
                "outputs": {k: v for k, v in node.outputs.items() if k in _KEPT_OUTPUTS},
            }
        )
    detail = event.get("detail") if isinstance(event.get("detail"), dict) else {}
    return {
        "event_id": event.get("id"),
        "repository": detail.get("repository-name"),
        "tag": detail.get("image-tag"),
        "workflow": result.name,
        "phase": result.phase,
        "message": (result.message or "")[:300],
        "duration": round(result.duration, 3),
        "nodes": nodes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sensor_proc")
    parser.add_argument("--queue-url", required=True)
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--rules", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--work-root", type=Path, required=True)
    parser.add_argument("--template", type=Path)
    parser.add_argument("--region", default="us-west-2")
    parser.add_argument("--concurrency", type=int, default=3)
    parser.add_argument("--wait-seconds", type=int, default=1)
    parser.add_argument("--visibility-timeout", type=int, default=10)
    parser.add_argument("--backoff-scale", type=float, default=0.05)
    args = parser.parse_args(argv)

    import boto3

    from imagebump.commands.run import DEFAULT_TEMPLATE, PROJECT_ROOT, _stop_on_signals, step_environment
    from sensors.local import LocalSensor
    from workflows.local.executor import LocalExecutor
    from workflows.local.logs import json_logger

    token = os.environ["IMAGEBUMP_GIT_TOKEN"]
    log = json_logger(sys.stderr)
    args.work_root.mkdir(parents=True, exist_ok=True)
    executor = LocalExecutor(
        args.template or DEFAULT_TEMPLATE,
        project_root=PROJECT_ROOT,
        secrets={"imagebump-git": {"token": token}, "imagebump-git-read": {"token": token}},
        configmaps={"imagebump-rules": {"rules.yaml": args.rules.read_text()}},
        env=step_environment(dict(os.environ), args.endpoint_url, args.region),
        log=log,
        work_root=args.work_root,
        backoff_scale=args.backoff_scale,
    )
    executor.warm()
    results_lock = threading.Lock()
    results = args.results.open("a", encoding="utf-8")

    def on_result(event: dict[str, Any], result: Any) -> None:
        line = json.dumps(result_record(event, result), sort_keys=True)
        with results_lock:
            results.write(line + "\n")
            results.flush()

    sqs = boto3.client("sqs", endpoint_url=args.endpoint_url, region_name=args.region)
    sensor = LocalSensor(
        args.queue_url,
        executor,
        sqs_client=sqs,
        concurrency=args.concurrency,
        wait_seconds=args.wait_seconds,
        visibility_timeout=args.visibility_timeout,
        log=log,
        on_result=on_result,
    )
    with _stop_on_signals(sensor):
        sensor.run()
    results.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
