"""steps.aws.ecr_http, the event path's standard-library ECR client, answers as botocore's client does.

botocore is the oracle here (tests only): the endpoint it resolves for every region of the ``aws``
partition in the installed botocore's data, the credentials its environment provider reads, the
shapes of its answers (from the installed service model), what its client returns from and raises
against moto's ECR server (real, on 127.0.0.1) for every operation the event path uses, and how
many requests its ``standard`` retries make against a scripted HTTP server (a real one on
127.0.0.1 that answers what each case says: 429s, 5xx, throttling bodies). Nothing really sleeps:
the lean client's sleep is injected, botocore's is replaced in ``botocore.endpoint``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

import steps
from imagebump.local import builders
from imagebump.local.moto import MotoServer
from steps.aws import ecr, ecr_http, transport
from steps.aws.ecr_http import EcrApiError, EcrClient, EcrConnectionError, route
from steps.aws.sigv4 import Credentials
from steps.domain.errors import ConfigError, PermissionDeniedError, TransientError

KEYS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret"}
CREDS = Credentials("testing", "testing")


def _botocore_data(name: str):
    import botocore.loaders

    return botocore.loaders.create_loader().load_data(name)


def _botocore_client(region: str, endpoint_url: str | None = None, **config):
    import botocore.session
    from botocore.config import Config

    return botocore.session.Session().create_client(
        "ecr",
        region_name=region,
        endpoint_url=endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(
            retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20, **config
        ),
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with keys and nothing else (HOME without ~/.aws)."""
    return {"HOME": str(tmp_path), **KEYS}


# --- endpoints ---------------------------------------------------------------------------------------


def test_the_aws_partition_is_the_one_this_client_knows() -> None:
    partitions = _botocore_data("partitions")["partitions"]
    assert partitions[0]["id"] == "aws"  # botocore matches partitions in order: aws first
    assert partitions[0]["regionRegex"] == ecr_http.AWS_PARTITION_REGEX
    assert partitions[0]["outputs"]["dnsSuffix"] == ecr_http.AWS_DNS_SUFFIX


def test_every_region_of_the_aws_partition_resolves_as_botocore_resolves_it(env) -> None:
    """Each region botocore's data lists for ``aws`` gets botocore's endpoint, or botocore's client
    (only ``aws-global``, not a region's shape); every other partition's region is botocore's."""
    partitions = _botocore_data("partitions")["partitions"]
    lean = set()
    for region in sorted(partitions[0]["regions"]):
        chosen = route(region, env)
        if chosen.fallback:
            assert region == "aws-global", (region, chosen.fallback)
            continue
        lean.add(region)
        assert chosen.endpoint == _botocore_client(region).meta.endpoint_url, region
    assert len(lean) == len(partitions[0]["regions"]) - 1
    for partition in partitions[1:]:
        for region in partition["regions"]:
            assert route(region, env).fallback, region
            assert ecr_http.regional_endpoint(region) is None


@pytest.mark.parametrize(
    "region",
    [
        "us-west-2\n",
        "US-WEST-2",
        "us-west_x-2",
        "xx-east-1",
        "us-gov-west-1",
        "eusc-de-east-1",
        "",
        "us-west",
    ],
)
def test_unknown_region_shapes_are_left_to_botocore(region, env) -> None:
    assert route(region, env).fallback


@pytest.mark.parametrize(
    ("region", "lean"),
    [
        ("us-gov-west-1", True),
        ("cn-north-1", True),
        ("local", True),
        ("US-WEST-2", False),
        ("", False),
        ("1", False),
    ],
)
def test_at_a_configured_endpoint_any_region_botocore_accepts_signs(region, lean, env) -> None:
    """botocore sends to the configured URL whatever the partition, and signs for the region."""
    assert (route(region, {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}).fallback == "") is lean


@pytest.mark.parametrize(
    ("settings", "endpoint"),
    [
        pytest.param({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}, "http://127.0.0.1:5000", id="global"),
        pytest.param(
            {
                "AWS_ENDPOINT_URL": "http://127.0.0.1:5000",
                "AWS_ENDPOINT_URL_ECR": "https://vpce-1.example.com/",
            },
            "https://vpce-1.example.com",
            id="service-specific-first",
        ),
        pytest.param(
            {"AWS_ENDPOINT_URL_ECR": "", "AWS_ENDPOINT_URL": "http://a:1"}, "http://a:1", id="empty-skipped"
        ),
        pytest.param(
            {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "TRUE"},
            "https://api.ecr.eu-west-1.amazonaws.com",
            id="ignored",
        ),
        pytest.param(
            {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "yes"},
            "http://127.0.0.1:5000",
            id="ignore-not-true",
        ),
        pytest.param(
            {"AWS_USE_FIPS_ENDPOINT": "false"}, "https://api.ecr.eu-west-1.amazonaws.com", id="fips-false"
        ),
        pytest.param(
            {"AWS_CA_BUNDLE": "/nowhere", "AWS_ENDPOINT_URL": "http://h:1"}, "http://h:1", id="ca-http"
        ),
    ],
)
def test_the_configured_endpoint_is_botocores(settings, endpoint, env, monkeypatch) -> None:
    chosen = route("eu-west-1", {**env, **settings})
    assert chosen.fallback == "" and chosen.endpoint == endpoint
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_ECR", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in settings.items():
        if name != "AWS_CA_BUNDLE":
            monkeypatch.setenv(name, value)
    assert _botocore_client("eu-west-1").meta.endpoint_url.rstrip("/") == endpoint


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"AWS_PROFILE": "dev"}, id="profile"),
        pytest.param({"AWS_DEFAULT_PROFILE": "default"}, id="default-profile"),
        pytest.param({"AWS_USE_FIPS_ENDPOINT": "true"}, id="fips"),
        pytest.param({"AWS_USE_DUALSTACK_ENDPOINT": "True"}, id="dualstack"),
        pytest.param({"AWS_DATA_PATH": "/x"}, id="data-path"),
        pytest.param({"AWS_DEFAULTS_MODE": "standard"}, id="defaults-mode"),
        pytest.param({"HTTPS_PROXY": "http://proxy:3128"}, id="proxy"),
        pytest.param({"https_proxy": "http://proxy:3128"}, id="proxy-lower"),
        pytest.param({"AWS_CA_BUNDLE": "/etc/ca.pem"}, id="ca-bundle-https"),
        pytest.param({"SSLKEYLOGFILE": "/tmp/keys"}, id="keylog-https"),
        pytest.param({"AWS_ACCESS_KEY_ID": ""}, id="no-key: another provider"),
        pytest.param({"AWS_SECRET_ACCESS_KEY": ""}, id="no-secret: botocore's error"),
        pytest.param({"AWS_CREDENTIAL_EXPIRATION": "2030-01-01T00:00:00Z"}, id="refreshable"),
        pytest.param({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000/prefix"}, id="endpoint-path"),
        pytest.param({"AWS_ENDPOINT_URL": "http://user@127.0.0.1:5000"}, id="endpoint-userinfo"),
        pytest.param({"AWS_ENDPOINT_URL": "http://Host:5000"}, id="endpoint-upper"),
        pytest.param({"AWS_ENDPOINT_URL": "http://[::1]:5000"}, id="endpoint-ipv6"),
        pytest.param({"AWS_ENDPOINT_URL": "ftp://h"}, id="endpoint-scheme"),
        pytest.param({"AWS_ENDPOINT_URL": "http://h:1?x=1"}, id="endpoint-query"),
    ],
)
def test_what_the_lean_client_does_not_reproduce_falls_back_to_botocore(settings, env) -> None:
    chosen = route("us-west-2", {**env, **settings})
    assert chosen.fallback and chosen.credentials is None
    assert ecr_http.lean_client("us-west-2", {**env, **settings}) is None


@pytest.mark.parametrize("name", ["config", "credentials"])
def test_a_shared_config_or_credentials_file_falls_back(name, env, tmp_path) -> None:
    """A profile in either file can set what the lean client does not read (an endpoint, FIPS, a CA
    bundle): whatever it holds, botocore reads it."""
    assert route("us-west-2", env).fallback == ""
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / name).write_text("[default]\n")
    assert route("us-west-2", env).fallback
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("[default]\n")
    variable = "AWS_CONFIG_FILE" if name == "config" else "AWS_SHARED_CREDENTIALS_FILE"
    (tmp_path / ".aws" / name).unlink()
    assert route("us-west-2", {**env, variable: str(elsewhere)}).fallback


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"AWS_SESSION_TOKEN": "session"},
        {"AWS_SECURITY_TOKEN": "security", "AWS_SESSION_TOKEN": "session"},
        {"AWS_SECURITY_TOKEN": "", "AWS_SESSION_TOKEN": "session"},
        {"AWS_ROLE_ARN": "arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE": "/nowhere"},
        {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials"},
    ],
)
def test_the_credentials_are_botocores_environment_providers(settings, env) -> None:
    """Keys in the environment come first in botocore's chain, before web identity and containers."""
    from botocore.credentials import EnvProvider

    environ = {**env, **settings}
    chosen = route("us-west-2", environ)
    theirs = EnvProvider(environ=environ).load()
    assert chosen.credentials is not None
    assert (chosen.credentials.access_key, chosen.credentials.secret_key, chosen.credentials.token) == (
        theirs.access_key,
        theirs.secret_key,
        theirs.token,
    )


def test_the_ca_bundle_is_botocores() -> None:
    from botocore.httpsession import get_cert_path

    assert transport.ca_bundle() == get_cert_path(True)


# --- shapes ------------------------------------------------------------------------------------------


def _shape(shape, seen: tuple[str, ...] = ()):
    kind = shape.type_name
    if kind == "structure":
        assert shape.name not in seen, "recursive shape"
        return {name: _shape(member, (*seen, shape.name)) for name, member in shape.members.items()}
    if kind == "list":
        return [_shape(shape.member, seen)]
    if kind == "map":
        return {"<map>": _shape(shape.value, seen)}
    assert kind != "blob" and not shape.serialization.get("jsonvalue"), shape.name
    return "timestamp" if kind == "timestamp" else None


@pytest.mark.parametrize("operation", sorted(ecr_http.OPERATIONS))
def test_the_operations_table_is_ecrs_model(operation) -> None:
    import botocore.session

    model = botocore.session.Session().get_service_model("ecr").operation_model(operation)
    spec = ecr_http.OPERATIONS[operation]
    assert spec["input"] == tuple(model.input_shape.members)
    assert spec["errors"] == tuple(e.name for e in model.error_shapes)
    assert spec["output"] == _shape(model.output_shape)
    assert model.http == {"method": "POST", "requestUri": "/"}
    meta = model.service_model.metadata
    assert (meta["targetPrefix"], meta["jsonVersion"], meta["signingName"]) == (
        ecr_http.TARGET_PREFIX,
        "1.1",
        ecr_http.SERVICE,
    )


def test_the_paginators_are_ecrs() -> None:
    paginators = _botocore_data("ecr/2015-09-21/paginators-1")["pagination"]
    for name, operation in ecr_http.PAGINATORS.items():
        assert paginators[operation]["input_token"] == paginators[operation]["output_token"] == "nextToken"
        assert paginators[operation]["limit_key"] == "maxResults"
        assert name == re.sub(r"(?<!^)([A-Z])", r"_\1", operation).lower()


# --- against moto's ECR: the same answers as botocore's client ----------------------------------------


def _strip(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k != "ResponseMetadata"}


def _error(call, client) -> tuple[str, int]:
    try:
        call(client)
    except Exception as exc:  # noqa: BLE001 - either client's error, compared by code and status
        response = exc.response  # type: ignore[attr-defined]
        return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError("no error")


@pytest.fixture
def clients(moto: MotoServer) -> Iterator[tuple[object, EcrClient, str]]:
    """(botocore's client, the lean client, a fresh repository with 5 tagged images, one untagged
    and an index listing two of them) on moto's server."""
    theirs = moto.client("ecr")
    ours = EcrClient("us-west-2", moto.endpoint_url, CREDS)
    name = f"team/lean-{uuid.uuid4().hex[:8]}"
    theirs.create_repository(repositoryName=name)
    for i in range(5):
        digest = "sha256:" + f"{i}" * 64
        theirs.put_image(
            repositoryName=name,
            imageManifest=builders.image_manifest(digest),
            imageDigest=digest,
            imageTag=f"1.{i}",
        )
    untagged = "sha256:" + "e" * 64
    theirs.put_image(
        repositoryName=name, imageManifest=builders.image_manifest(untagged), imageDigest=untagged
    )
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d, "size": 1}
            for d in (untagged, "sha256:" + "0" * 64)
        ],
    }
    theirs.put_image(
        repositoryName=name,
        imageManifest=json.dumps(index),
        imageManifestMediaType="application/vnd.oci.image.index.v1+json",
        imageDigest="sha256:" + "f" * 64,
        imageTag="multi",
    )
    yield theirs, ours, name
    ours.close()


def test_each_operation_answers_as_botocore_does(clients) -> None:
    theirs, ours, name = clients
    digest = "sha256:" + "3" * 64
    for kwargs in (
        {"repositoryName": name, "imageIds": [{"imageTag": "1.2"}]},
        {"repositoryName": name, "imageIds": [{"imageDigest": digest}], "registryId": "123456789012"},
        {"repositoryName": name},
        {"repositoryName": name, "filter": {"tagStatus": "TAGGED"}},
    ):
        mine = ours.describe_images(**kwargs)
        assert _strip(mine) == _strip(theirs.describe_images(**kwargs)), kwargs
        assert all(
            isinstance(d["imagePushedAt"], datetime) and d["imagePushedAt"].tzinfo
            for d in mine["imageDetails"]
        )
    assert _strip(ours.describe_repositories(repositoryNames=[name])) == _strip(
        theirs.describe_repositories(repositoryNames=[name])
    )
    ids = [{"imageDigest": "sha256:" + "f" * 64}, {"imageDigest": digest}, {"imageTag": "nope"}]
    media = [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
    assert _strip(
        ours.batch_get_image(repositoryName=name, imageIds=ids, acceptedMediaTypes=media)
    ) == _strip(theirs.batch_get_image(repositoryName=name, imageIds=ids, acceptedMediaTypes=media))
    meta = ours.describe_repositories(repositoryNames=[name])["ResponseMetadata"]
    assert meta["HTTPStatusCode"] == 200 and meta["RetryAttempts"] == 0 and meta["RequestId"]


def test_errors_carry_botocores_code_and_status(clients) -> None:
    theirs, ours, name = clients
    for call in (
        lambda c: c.describe_images(repositoryName=name, imageIds=[{"imageTag": "nope"}]),
        lambda c: c.describe_images(repositoryName=name + "-gone", imageIds=[{"imageTag": "1"}]),
        lambda c: c.describe_repositories(repositoryNames=[name + "-gone"]),
        lambda c: c.batch_get_image(repositoryName=name + "-gone", imageIds=[{"imageTag": "1"}]),
    ):
        assert _error(call, ours) == _error(call, theirs)


def test_pages_are_botocores(clients) -> None:
    """moto answers every page whole (it ignores ``maxResults``): the walk ends on the first page for
    both; the token-following is proven against a scripted server below."""
    theirs, ours, name = clients

    def walk(client, operation, **kwargs):
        pages = client.get_paginator(operation).paginate(**kwargs, PaginationConfig={"PageSize": 2})
        return [_strip(page) for page in pages]

    mine = walk(ours, "describe_images", repositoryName=name)
    assert len(mine[0]["imageDetails"]) == 7 and mine == walk(theirs, "describe_images", repositoryName=name)
    tagged = walk(ours, "describe_images", repositoryName=name, filter={"tagStatus": "TAGGED"})
    assert tagged == walk(theirs, "describe_images", repositoryName=name, filter={"tagStatus": "TAGGED"})
    assert walk(ours, "describe_repositories") == walk(theirs, "describe_repositories")


def test_the_lookups_answer_the_same_on_either_client(clients) -> None:
    theirs, ours, name = clients
    untagged = "sha256:" + "e" * 64
    for client in (ours, theirs):
        assert ecr.describe_image(name, region="us-west-2", tag="nope", client=client) is None
        with pytest.raises(ConfigError) as missing:
            ecr.describe_image(name + "-gone", region="us-west-2", tag="1", client=client)
        assert missing.value.reason == "repository-missing"
        assert (
            ecr.list_images(name + "-gone", registry_id="123456789012", client=client) is None
        )  # RepositoryMissing
    assert ecr.describe_image(name, region="us-west-2", tag="1.1", client=ours) == ecr.describe_image(
        name, region="us-west-2", tag="1.1", client=theirs
    )
    assert ecr.repository_account(name, region="us-west-2", client=ours) == ecr.repository_account(
        name, region="us-west-2", client=theirs
    )
    assert list(ecr.iter_images(name, registry_id="123456789012", client=ours)) == list(
        ecr.iter_images(name, registry_id="123456789012", client=theirs)
    )
    found = ecr.describe_image(name, region="us-west-2", digest=untagged, client=ours)
    assert found is not None
    index = ecr.index_listing(name, untagged, near=found.pushed_at, registry_id="123456789012", client=ours)
    assert index is not None and index.tags == ("multi",)
    assert index == ecr.index_listing(
        name, untagged, near=found.pushed_at, registry_id="123456789012", client=theirs
    )


def test_make_client_is_the_lean_one_with_keys_and_botocores_otherwise(moto: MotoServer, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    assert isinstance(ecr.make_client("us-west-2"), EcrClient)
    monkeypatch.setenv("AWS_DEFAULTS_MODE", "standard")
    fallback = ecr.make_client("us-west-2")
    assert not isinstance(fallback, EcrClient) and fallback.meta.endpoint_url == moto.endpoint_url
    monkeypatch.delenv("AWS_DEFAULTS_MODE")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    assert not isinstance(ecr.make_client("us-west-2"), EcrClient)


# --- retries, against a scripted server -----------------------------------------------------------------


class _Script:
    """A real HTTP server on 127.0.0.1 answering each request with the next scripted answer (the last
    one again when they run out), counting requests and connections."""

    def __init__(self, answers: list[tuple[int, dict[str, str], bytes]], *, keep_alive: bool = False) -> None:
        self.answers, self.requests, self.connections = list(answers), [], 0
        self.drop_after_answer = False
        script = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                script.connections += 1
                super().setup()

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                script.requests.append((dict(self.headers), body))
                status, headers, payload = (
                    script.answers.pop(0) if len(script.answers) > 1 else script.answers[0]
                )
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                if script.drop_after_answer:
                    self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[_Script]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


def _answer(status: int, body: object = b"", **headers: str) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return status, {"Content-Type": "application/x-amz-json-1.1", **headers}, data


OK = _answer(200, {"repositories": []})


def _error_body(code: str) -> dict:
    return {"__type": code, "message": f"{code} says no"}


CASES = {
    "429-empty-body": [_answer(429)],
    "500-then-ok": [_answer(500), OK],
    "503-html": [_answer(503, b"<html><body>Service Unavailable</body></html>")],
    "throttling-then-ok": [_answer(400, _error_body("ThrottlingException"))] * 2 + [OK],
    "throttling-qualified": [_answer(400, _error_body("com.amazonaws.ecr#ThrottlingException:http://x"))],
    "request-timeout-code": [_answer(400, _error_body("RequestTimeoutException"))],
    "502-json": [_answer(502, _error_body("ServerException"))],
    "429-modeled-error-not-retried": [_answer(429, _error_body("ServerException"))],
    "429-unmodeled": [_answer(429, _error_body("SomethingElse"))],
    "denied-not-retried": [_answer(400, _error_body("AccessDeniedException"))],
    "invalid-not-retried": [_answer(400, _error_body("InvalidParameterException"))],
    "403-plain-text": [_answer(403, b"Forbidden by a proxy")],
    "limit-exceeded-throttles": [_answer(400, _error_body("LimitExceededException"))],
}


def _outcome(client, operation: str = "describe_repositories") -> tuple[str, int]:
    try:
        getattr(client, operation)()
    except Exception as exc:  # noqa: BLE001 - either client's, compared by code and status
        response = exc.response  # type: ignore[attr-defined]
        return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]
    return "ok", 200


@pytest.fixture
def botocore_sleeps(monkeypatch) -> list[float]:
    """botocore's retry sleeps, recorded instead of slept (botocore/endpoint.py calls time.sleep)."""
    import time

    import botocore.endpoint

    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", SimpleNamespace(sleep=slept.append, time=time.time))
    return slept


@pytest.mark.parametrize("case", sorted(CASES))
def test_retries_are_botocores_standard_mode(case, botocore_sleeps) -> None:
    """The same number of requests and the same outcome as botocore's client with the same retry
    configuration; the lean client's delays are botocore's formula with ``random()`` fixed."""
    with _Script(CASES[case]).running() as server:
        theirs = _outcome(_botocore_client("us-west-2", server.url))
        their_requests = len(server.requests)
    slept: list[float] = []
    with _Script(CASES[case]).running() as server:
        ours = EcrClient("us-west-2", server.url, CREDS, sleep=slept.append, random=lambda: 0.5)
        assert _outcome(ours) == theirs
        assert (
            len(server.requests) == their_requests
            and len(slept) == len(botocore_sleeps) == their_requests - 1
        )
        attempts = [h["amz-sdk-request"] for h, _ in server.requests]
        assert attempts == [f"attempt={n}; max=6" for n in range(1, their_requests + 1)]
    first = CASES[case][0]
    code = (json.loads(first[2]).get("__type", "") if first[2].startswith(b"{") else "").split(":")[0]
    code = code.rsplit("#", 1)[-1] or str(first[0])
    throttling = code in ecr_http.THROTTLING_CODES or (first[0] == 429 and code != "ServerException")
    scale = 1.0 if throttling else 0.05
    assert slept == [0.5 * min(scale * 2**i, 20) for i in range(len(slept))]


def test_pages_follow_next_token_as_botocores_paginator_does(botocore_sleeps) -> None:
    """Three pages (tokens ``t1``, ``t2``, then none): the same requests and the same pages."""
    pages = [
        {
            "imageDetails": [{"imageDigest": f"sha256:{n}", "imagePushedAt": 1700000000 + n}],
            "nextToken": token,
        }
        for n, token in enumerate(["t1", "t2", None])
    ]
    answers = [_answer(200, {k: v for k, v in page.items() if v is not None}) for page in pages]
    seen = {}
    for who in ("theirs", "ours"):
        with _Script(list(answers)).running() as server:
            client = (
                _botocore_client("us-west-2", server.url)
                if who == "theirs"
                else EcrClient("us-west-2", server.url, CREDS)
            )
            walked = client.get_paginator("describe_images").paginate(
                repositoryName="team/app", filter={"tagStatus": "TAGGED"}, PaginationConfig={"PageSize": 1000}
            )
            seen[who] = ([_strip(p) for p in walked], [json.loads(body) for _, body in server.requests])
    assert seen["ours"] == seen["theirs"]
    assert [body.get("nextToken") for body in seen["ours"][1]] == [None, "t1", "t2"]
    assert all(body["maxResults"] == 1000 for body in seen["ours"][1])
    assert seen["ours"][0][2]["imageDetails"][0]["imagePushedAt"] == datetime.fromtimestamp(1700000002, UTC)


def test_a_retry_after_header_raises_the_delay_as_botocore_does() -> None:
    answers = [
        _answer(429, b"", **{"x-amz-retry-after": "3000"}),
        _answer(503, b"", **{"x-amz-retry-after": "x"}),
        OK,
    ]
    slept: list[float] = []
    with _Script(answers).running() as server:
        EcrClient(
            "us-west-2", server.url, CREDS, sleep=slept.append, random=lambda: 0.5
        ).describe_repositories()
    assert slept == [3.0, 0.5 * 0.05 * 2]  # max(t, min(3 s, t + 5)); an unreadable header is ignored


def test_the_retry_quota_runs_out_as_botocores_does(botocore_sleeps) -> None:
    """500 tokens, 14 a retry: seven calls retried five times each, then no retry at all."""
    counts: dict[str, list[int]] = {}
    for who in ("theirs", "ours"):
        with _Script([_answer(500)]).running() as server:
            client = (
                _botocore_client("us-west-2", server.url)
                if who == "theirs"
                else EcrClient("us-west-2", server.url, CREDS, sleep=lambda _: None)
            )
            seen = []
            for _ in range(9):
                before = len(server.requests)
                assert _outcome(client) == ("500", 500)
                seen.append(len(server.requests) - before)
            counts[who] = seen
    assert counts["ours"] == counts["theirs"] == [6] * 7 + [1, 1]


def test_a_refused_connection_is_retried_then_botocores_message(botocore_sleeps) -> None:
    with socket.socket() as held:  # a port nobody listens on
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}"
        from botocore.exceptions import EndpointConnectionError

        with pytest.raises(EndpointConnectionError) as theirs:
            _botocore_client("us-west-2", url).describe_repositories()
        slept: list[float] = []
        with pytest.raises(EcrConnectionError) as ours:
            EcrClient("us-west-2", url, CREDS, sleep=slept.append, random=lambda: 1.0).describe_repositories()
    assert str(ours.value) == str(theirs.value)
    assert slept == [0.05 * 2**i for i in range(5)] and len(botocore_sleeps) == 5


def test_a_read_timeout_is_retried_then_botocores_message() -> None:
    from botocore.exceptions import ReadTimeoutError

    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        slept: list[float] = []
        client = EcrClient("us-west-2", url, CREDS, sleep=slept.append, read_timeout=0.02)
        with pytest.raises(EcrConnectionError) as ours:
            client.describe_repositories()
    assert str(ours.value) == str(ReadTimeoutError(endpoint_url=url + "/"))
    assert len(slept) == 5


def test_a_kept_alive_connection_is_reused_and_a_dropped_one_replaced_without_a_retry() -> None:
    script = _Script([OK], keep_alive=True)
    with script.running() as server:
        client = EcrClient("us-west-2", server.url, CREDS, sleep=lambda _: pytest.fail("slept"))
        for _ in range(3):
            assert client.describe_repositories()["ResponseMetadata"]["RetryAttempts"] == 0
        assert server.connections == 1
        server.drop_after_answer = True  # the server closes after answering, without saying so
        for _ in range(3):
            assert client.describe_repositories()["ResponseMetadata"]["RetryAttempts"] == 0
        assert len(server.requests) == 6


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (cert file, key file)."""
    import ipaddress
    from datetime import timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "imagebump test")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


def test_https_trusts_botocores_bundle_only(tmp_path, monkeypatch, botocore_sleeps) -> None:
    """A certificate outside certifi's bundle is refused, as botocore refuses it (and retried as a
    connection failure); the same server is reached once its certificate is the trusted bundle."""
    import ssl

    from botocore.exceptions import SSLError

    cert_file, key_file = _certificate(tmp_path)
    script = _Script([OK])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    script.server.socket = context.wrap_socket(script.server.socket, server_side=True)
    url = script.url.replace("http://", "https://")
    with script.running():
        with pytest.raises(SSLError):
            _botocore_client("us-west-2", url).describe_repositories()
        slept: list[float] = []
        monkeypatch.setattr(transport, "_TLS", None)
        with pytest.raises(
            EcrConnectionError,
            match=f"^SSL validation failed for {re.escape(url)}/ .*CERTIFICATE_VERIFY_FAILED",
        ):
            EcrClient("us-west-2", url, CREDS, sleep=slept.append).describe_repositories()
        assert len(slept) == len(botocore_sleeps) == 5
        monkeypatch.setattr(transport, "_TLS", None)
        monkeypatch.setattr(transport, "ca_bundle", lambda: str(cert_file))
        answer = EcrClient("us-west-2", url, CREDS, sleep=slept.append).describe_repositories()
        assert answer["repositories"] == [] and answer["ResponseMetadata"]["RetryAttempts"] == 0
    monkeypatch.setattr(transport, "_TLS", None)  # the next user builds it on the real bundle


def test_requests_are_ecrs_protocol() -> None:
    with _Script([OK]).running() as server:
        EcrClient("us-west-2", server.url, Credentials("AKID", "secret", "tok")).describe_repositories(
            repositoryNames=["a/b"]
        )
    headers, body = server.requests[0]
    assert headers["X-Amz-Target"] == "AmazonEC2ContainerRegistry_V20150921.DescribeRepositories"
    assert headers["Content-Type"] == "application/x-amz-json-1.1"
    assert headers["Host"] == server.url.removeprefix("http://")
    assert headers["X-Amz-Security-Token"] == "tok"
    assert headers["User-Agent"] == f"imagebump-ecr-http/{steps.__version__}"  # CloudTrail's userAgent
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID/")
    assert (
        "/us-west-2/ecr/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-amz-target, "
        in (headers["Authorization"])
    )
    assert json.loads(body) == {"repositoryNames": ["a/b"]}


def test_unknown_parameters_are_refused_before_any_request() -> None:
    client = EcrClient("us-west-2", "http://127.0.0.1:9", CREDS, sleep=lambda _: pytest.fail("slept"))
    with pytest.raises(ValueError, match="takes no parameter repositoryNames"):
        client.describe_images(repositoryNames=["x"])


# --- classification ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "kind", "reason"),
    [
        ("RepositoryNotFoundException", 400, ConfigError, "repository-missing"),
        ("AccessDeniedException", 400, PermissionDeniedError, "denied"),
        ("UnrecognizedClientException", 400, PermissionDeniedError, "denied"),
        ("ExpiredTokenException", 400, PermissionDeniedError, "denied"),
        ("403", 403, PermissionDeniedError, "denied"),
        ("InvalidSignatureException", 401, PermissionDeniedError, "denied"),
        ("ThrottlingException", 400, TransientError, "unavailable"),
        ("429", 429, TransientError, "unavailable"),
        ("500", 500, TransientError, "unavailable"),
        ("ServerException", 500, TransientError, "unavailable"),
        ("InvalidParameterException", 400, ConfigError, ""),
    ],
)
def test_errors_are_classified_as_botocores(code, status, kind, reason) -> None:
    """The same code and status classify the same through either client's exception."""
    from botocore.exceptions import ClientError

    ours = ecr._classify(EcrApiError("DescribeImages", code, status, "no"), "DescribeImages", "team/app")
    response = {"Error": {"Code": code, "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    theirs = ecr._classify(ClientError(response, "DescribeImages"), "DescribeImages", "team/app")
    assert type(ours) is type(theirs) is kind
    assert (ours.reason, str(ours)) == (theirs.reason, str(theirs))  # type: ignore[attr-defined]
    assert ours.reason == reason  # type: ignore[attr-defined]


def test_no_answer_is_transient_and_unknown_errors_pass_through() -> None:
    unreachable = ecr._classify(EcrConnectionError("Could not connect"), "DescribeImages", "team/app")
    assert isinstance(unreachable, TransientError) and unreachable.reason == "unreachable"
    odd = ValueError("odd")
    assert ecr._classify(odd, "DescribeImages", "team/app") is odd


def test_describe_image_reads_image_not_found_from_either_client() -> None:
    class Refusing:
        def describe_images(self, **_):
            raise EcrApiError("DescribeImages", "ImageNotFoundException", 400, "gone")

    assert ecr.describe_image("team/app", region="us-west-2", tag="1", client=Refusing()) is None
