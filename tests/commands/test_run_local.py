"""``imagebump run --local`` at start: which region it uses, and a queue it cannot read.

Each test runs the command as a user does — a new process whose environment holds PATH, HOME,
the AWS endpoint (moto's server on 127.0.0.1) and fake credentials, ``IMAGEBUMP_GIT_TOKEN`` — and
no ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` unless the test says so: the README never tells a user
to set one. The queue URL is moto's own (``http://127.0.0.1:PORT/123456789012/NAME``), which names
no region.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest

from imagebump.commands.run_queue import EMULATOR_DEFAULT_REGION, queue_url_region, resolve_region
from steps.domain.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "rules.yaml"


def _env(tmp_path: Path, endpoint: str, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),  # no ~/.aws/config: no profile region either
        "LANG": "C.UTF-8",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "IMAGEBUMP_GIT_TOKEN": "ibtest_" + uuid.uuid4().hex,
        **extra,
    }


def _run(tmp_path: Path, env: dict[str, str], queue_url: str, *more: str, timeout: int = 120):
    return subprocess.run(
        [sys.executable, "-m", "imagebump", "run", "--local", "--queue-url", queue_url, "--rules", str(RULES)]
        + ["--wait-seconds", "1", "--reconcile-every", "0", *more],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _sqs(endpoint: str, region: str):
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_an_emulator_queue_url_without_a_region_runs_in_the_emulators_default_region(moto, tmp_path) -> None:
    """Before: ``unexpected error: NoRegionError`` (exit 3). Now moto's default region, us-east-1."""
    sqs = _sqs(moto.endpoint_url, "us-east-1")
    url = sqs.create_queue(QueueName=f"run-region-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    assert queue_url_region(url) is None  # moto's URL names no region
    try:
        # an event the Sensor's filters drop: handled (deleted, "skipped") without a workflow
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"id": "e1", "source": "aws.s3", "detail": {}}))
        proc = _run(tmp_path, _env(tmp_path, moto.endpoint_url), url, "--max-events", "1")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "stopped: 1 received, 0 succeeded, 0 failed, 1 skipped" in proc.stdout, proc.stdout
        depth = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        assert depth["Attributes"]["ApproximateNumberOfMessages"] == "0"
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_a_queue_that_does_not_exist_exits_2_naming_the_queue_and_the_region(moto, tmp_path) -> None:
    """Before: ``receive-failed`` every 5 s for ever. Now one look at start, exit 2."""
    url = f"{moto.endpoint_url}/123456789012/no-such-queue-{uuid.uuid4().hex[:8]}"
    proc = _run(tmp_path, _env(tmp_path, moto.endpoint_url), url, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert url in proc.stderr and "no such queue" in proc.stderr
    assert f"region {EMULATOR_DEFAULT_REGION}" in proc.stderr and "--region" in proc.stderr
    assert "receive-failed" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_queue_in_another_region_than_the_one_used_says_which_region_was_asked(moto, tmp_path) -> None:
    sqs = _sqs(moto.endpoint_url, "eu-central-1")
    url = sqs.create_queue(QueueName=f"run-elsewhere-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    try:
        proc = _run(tmp_path, _env(tmp_path, moto.endpoint_url, AWS_REGION="ap-south-1"), url, timeout=60)
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
        assert url in proc.stderr and "region ap-south-1 (from AWS_REGION)" in proc.stderr
        # and with the queue's own region, it starts (a filtered-out event ends it)
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"id": "e2", "source": "aws.s3", "detail": {}}))
        proc = _run(
            tmp_path, _env(tmp_path, moto.endpoint_url), url, "--region", "eu-central-1", "--max-events", "1"
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "1 skipped" in proc.stdout
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_an_unreachable_endpoint_at_start_is_transient_75(tmp_path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    url = f"{endpoint}/123456789012/imagebump-ecr-events"
    proc = _run(tmp_path, _env(tmp_path, endpoint, AWS_MAX_ATTEMPTS="1"), url, timeout=60)
    assert proc.returncode == 75, (proc.returncode, proc.stderr[-2000:])
    assert url in proc.stderr and "cannot reach SQS" in proc.stderr


@pytest.mark.parametrize(
    ("flag", "environ", "queue_url", "endpoint", "expected"),
    [
        (
            "eu-west-1",
            {"AWS_REGION": "us-west-2"},
            "https://sqs.us-east-2.amazonaws.com/1/q",
            None,
            "eu-west-1",
        ),
        (None, {"AWS_REGION": "us-west-2"}, "https://sqs.us-east-2.amazonaws.com/1/q", None, "us-west-2"),
        (
            None,
            {"AWS_DEFAULT_REGION": "ca-central-1"},
            "https://sqs.us-east-2.amazonaws.com/1/q",
            None,
            "ca-central-1",
        ),
        (None, {}, "https://sqs.us-east-2.amazonaws.com/1/q", None, "us-east-2"),
        (None, {}, "https://sqs.us-east-2.amazonaws.com/1/q", "http://127.0.0.1:5000", "us-east-2"),
        (None, {}, "https://sqs-fips.us-gov-west-1.amazonaws.com/1/q", None, "us-gov-west-1"),
        (None, {}, "https://sqs.cn-north-1.amazonaws.com.cn/1/q", None, "cn-north-1"),
        (None, {}, "https://eu-west-3.queue.amazonaws.com/1/q", None, "eu-west-3"),
        (None, {}, "https://queue.amazonaws.com/1/q", None, "us-east-1"),
        (None, {}, "http://127.0.0.1:5000/123456789012/q", None, EMULATOR_DEFAULT_REGION),
        (None, {}, "http://localhost:4566/000000000000/q", "http://localhost:4566", EMULATOR_DEFAULT_REGION),
    ],
)
def test_the_region_is_the_flags_the_environments_or_the_queue_urls(
    flag, environ, queue_url, endpoint, expected, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))  # no profile region
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert resolve_region(flag, queue_url, endpoint, environ)[0] == expected


def test_an_aws_queue_url_without_a_region_and_no_region_anywhere_is_refused(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    with pytest.raises(ConfigError, match=r"--region .*AWS_REGION"):
        resolve_region(None, "https://vpce-1.sqs.amazonaws.com/1/q", None, {})


def test_the_profiles_region_is_used_when_the_url_names_none(monkeypatch, tmp_path) -> None:
    config = tmp_path / "config"
    config.write_text("[profile work]\nregion = sa-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_PROFILE", "work")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert resolve_region(None, "https://vpce-1.sqs.amazonaws.com/1/q", None, {}) == (
        "sa-east-1",
        "the AWS profile",
    )


@pytest.fixture()
def moto_with_auth(tmp_path: Path):
    """A second moto server, in its own process, that checks credentials (moto's
    ``INITIAL_NO_AUTH_ACTION_COUNT=0``): the fake ones every test uses are refused, as AWS refuses
    an invalid key (403 InvalidClientTokenId)."""
    script = (
        "import time\nfrom moto.server import ThreadedMotoServer\n"
        "s = ThreadedMotoServer(ip_address='127.0.0.1', port=0, verbose=False)\ns.start()\n"
        "print(s.get_host_and_port()[1], flush=True)\ntime.sleep(300)\n"
    )
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def test_access_denied_to_the_queue_exits_2_naming_it(moto_with_auth, tmp_path) -> None:
    url = f"{moto_with_auth}/123456789012/imagebump-ecr-events"
    proc = _run(tmp_path, _env(tmp_path, moto_with_auth), url, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert url in proc.stderr and "access denied in region us-east-1" in proc.stderr
    assert "InvalidClientTokenId" in proc.stderr and "<" not in proc.stderr
