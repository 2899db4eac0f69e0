"""manifests/aws/cloudformation.yaml: cfn-lint clean, deployable, and routes ECR pushes to SQS.

Deployed into moto's CloudFormation (the session ``moto`` server); events are injected with
``events.put_events`` because moto's ECR does not emit push events.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from imagebump.local import builders

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "manifests" / "aws" / "cloudformation.yaml"
EVENTS = ROOT / "tests" / "testdata" / "events"
OIDC = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"


def test_cfn_lint_passes():
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), str(TEMPLATE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def stack(moto):
    """The template deployed with a unique name prefix; returns its outputs."""
    cfn = moto.client("cloudformation")
    prefix = f"ib-{uuid.uuid4().hex[:8]}"
    name = f"{prefix}-stack"
    cfn.create_stack(
        StackName=name,
        TemplateBody=TEMPLATE.read_text(),
        Parameters=[
            {"ParameterKey": "NamePrefix", "ParameterValue": prefix},
            {"ParameterKey": "OidcProvider", "ParameterValue": OIDC},
            {"ParameterKey": "RepositoryPrefix", "ParameterValue": "team/"},
            {"ParameterKey": "BackupBucketName", "ParameterValue": f"{prefix}-backups"},
            {"ParameterKey": "BackupKmsKeyArn", "ParameterValue": "arn:aws:kms:us-west-2:123456789012:key/x"},
        ],
        Capabilities=["CAPABILITY_NAMED_IAM"],
    )
    description = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert description["StackStatus"] == "CREATE_COMPLETE", description
    outputs = {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}
    outputs["prefix"] = prefix
    yield outputs
    cfn.delete_stack(StackName=name)


def _event(name: str, **detail) -> dict:
    event = json.loads((EVENTS / name).read_text())
    event["detail"].update(detail)
    return event


def _put(moto, event: dict) -> None:
    response = moto.client("events").put_events(Entries=[builders.event_bridge_entry(event)])
    assert response["FailedEntryCount"] == 0, response


def _drain(moto, queue_url: str) -> list[dict]:
    sqs = moto.client("sqs")
    bodies = []
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        if not messages.get("Messages"):
            return bodies
        for message in messages["Messages"]:
            bodies.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])


def test_stack_outputs_name_queue_and_roles(stack):
    prefix = stack["prefix"]
    assert stack["QueueName"] == f"{prefix}-ecr-events"
    assert stack["EcrReaderRoleArn"].endswith(f":role/{prefix}-ecr-reader")
    assert stack["EventSourceRoleArn"].endswith(f":role/{prefix}-eventsource")
    assert stack["BackupRoleArn"].endswith(f":role/{prefix}-backup")


def test_queue_has_redrive_to_dlq_and_sse(moto, stack):
    attributes = moto.client("sqs").get_queue_attributes(QueueUrl=stack["QueueUrl"], AttributeNames=["All"])[
        "Attributes"
    ]
    redrive = json.loads(attributes["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"].endswith(f"{stack['prefix']}-ecr-events-dlq")
    assert int(redrive["maxReceiveCount"]) == 5


def test_queue_policy_admits_only_the_rule():
    # moto's CloudFormation skips AWS::SQS::QueuePolicy, so read the template itself.
    from cfnlint.decode import cfn_yaml

    template = cfn_yaml.load(str(TEMPLATE))
    resources = template["Resources"]
    (statement,) = resources["QueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["PushRule", "Arn"]}}}
    for queue in ("Queue", "DeadLetterQueue"):
        assert resources[queue]["Properties"]["SqsManagedSseEnabled"] is True


def test_irsa_trust_names_the_service_account(moto, stack):
    role = moto.client("iam").get_role(RoleName=f"{stack['prefix']}-ecr-reader")["Role"]
    document = role["AssumeRolePolicyDocument"]
    if isinstance(document, str):
        document = json.loads(document)
    condition = document["Statement"][0]["Condition"]["StringEquals"]
    assert condition[f"{OIDC}:sub"] == f"system:serviceaccount:imagebump:{stack['prefix']}-ecr-reader"


def test_push_event_arrives_on_the_queue_and_others_do_not(moto, stack):
    push = _event("push.json")
    _put(moto, _event("delete.json"))
    _put(moto, _event("push-failed.json"))
    _put(moto, _event("push.json", **{"repository-name": "other/api"}))  # outside RepositoryPrefix
    _put(moto, push)

    bodies = _drain(moto, stack["QueueUrl"])

    assert len(bodies) == 1, bodies
    (body,) = bodies
    assert body["source"] == "aws.ecr"
    assert body["detail-type"] == "ECR Image Action"
    assert body["detail"] == push["detail"]


def _reader_policy(moto, stack) -> dict:
    import ast

    document = moto.client("iam").get_role_policy(
        RoleName=f"{stack['prefix']}-ecr-reader", PolicyName="read-image-metadata"
    )["PolicyDocument"]
    if isinstance(document, str):  # moto hands back the dict's repr
        document = ast.literal_eval(document) if document.startswith("{'") else json.loads(document)
    return document


def _allows(document: dict, action: str, resource: str) -> bool:
    """IAM's Allow matching for identity policies without conditions (wildcards * and ?)."""
    from fnmatch import fnmatchcase

    def listed(value) -> list[str]:
        return [value] if isinstance(value, str) else list(value)

    return any(
        statement["Effect"] == "Allow"
        and any(fnmatchcase(action, a) for a in listed(statement["Action"]))
        and any(fnmatchcase(resource, r) for r in listed(statement["Resource"]))
        for statement in document["Statement"]
    )


def test_the_ecr_reader_may_list_repositories_for_the_sweep_and_read_images_only_under_the_prefix(
    moto, stack
):
    """The reconcile sweep lists the registry (DescribeRepositories without names: resource "*")
    and reads images (DescribeImages) only of repositories under RepositoryPrefix."""
    policy = _reader_policy(moto, stack)
    arn = "arn:aws:ecr:us-west-2:123456789012:repository/"
    assert _allows(policy, "ecr:DescribeRepositories", "*")
    assert _allows(policy, "ecr:DescribeImages", arn + "team/api")
    assert _allows(policy, "ecr:ListImages", arn + "team/api")
    assert not _allows(policy, "ecr:DescribeImages", arn + "other/api")
    assert not _allows(policy, "ecr:ListImages", "*")
    actions = {
        a
        for s in policy["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {"ecr:DescribeImages", "ecr:DescribeRepositories", "ecr:ListImages"}  # read-only
