"""The AWS side of a local world: ``manifests/aws/cloudformation.yaml`` deployed into moto.

:func:`deploy_stack` creates the stack (queue, dead-letter queue, EventBridge rule) in moto's
CloudFormation and returns its Outputs; :func:`quiet_request_logs` silences the request log of
moto's in-process server. Used by :mod:`imagebump.local.world`, the README test and the benchmarks
(``bench/testbed.py``, ``bench/reconcile.py``). Imports :mod:`steps.domain.errors` only (lazily).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CLOUDFORMATION_TEMPLATE = PROJECT_ROOT / "manifests" / "aws" / "cloudformation.yaml"
#: A syntactically valid OIDC issuer for the IRSA roles the stack also creates (moto ignores it).
DEMO_OIDC_PROVIDER = "oidc.eks.us-west-2.amazonaws.com/id/IMAGEBUMPDEMO0000000000000000000"


@contextmanager
def _quiet_moto() -> Iterator[None]:
    """Silence moto's CloudFormation parser warnings (moto runs in this process)."""
    import logging
    import warnings

    logger = logging.getLogger("moto")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@contextmanager
def quiet_request_logs() -> Iterator[None]:
    """Silence the request log of moto's in-process server (werkzeug) while the demo runs."""
    import logging

    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def deploy_stack(moto: Any, name_prefix: str, *, repository_prefix: str = "") -> tuple[str, dict[str, str]]:
    """Deploy ``manifests/aws/cloudformation.yaml`` into moto's CloudFormation; (stack, outputs)."""
    from steps.domain.errors import TransientError

    cfn = moto.client("cloudformation")
    stack = f"{name_prefix}-stack"
    with _quiet_moto():  # it warns that it skips AWS::SQS::QueuePolicy (no policies in moto)
        cfn.create_stack(
            StackName=stack,
            TemplateBody=CLOUDFORMATION_TEMPLATE.read_text(),
            Parameters=[
                {"ParameterKey": "NamePrefix", "ParameterValue": name_prefix},
                {"ParameterKey": "OidcProvider", "ParameterValue": DEMO_OIDC_PROVIDER},
                {"ParameterKey": "RepositoryPrefix", "ParameterValue": repository_prefix},
            ],
            Capabilities=["CAPABILITY_NAMED_IAM"],
        )
    deadline = time.monotonic() + 30
    while True:
        description = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        status = description["StackStatus"]
        if status == "CREATE_COMPLETE":
            break
        if not status.endswith("IN_PROGRESS") or time.monotonic() > deadline:
            raise TransientError(
                f"CloudFormation stack {stack} ended {status}: "
                f"{description.get('StackStatusReason', 'no reason given')}"
            )
        time.sleep(0.2)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}
    return stack, outputs
