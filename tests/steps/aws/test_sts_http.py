"""Web identity (IRSA) on the lean path: steps.aws.sts_http asks STS as botocore's
``AssumeRoleWithWebIdentityProvider`` does, and steps.aws.ecr_http.route takes it where botocore's
chain would.

botocore itself is the oracle (tests only): a botocore Session built on the same environment sends
its AssumeRoleWithWebIdentity to a scripted STS server on 127.0.0.1, and the two requests (path,
headers, form, attempts) and outcomes are compared. Our sleeps are injected; botocore's are its
standard-mode jitter for non-throttling errors (at most 0.1 s).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

import steps
from steps.aws import ecr, ecr_http, sts_http
from steps.aws.credentials import ContainerCredentials, WebIdentity, from_environment
from steps.aws.sigv4 import Credentials
from steps.aws.sts_http import StsApiError, StsConnectionError, WebIdentityCredentials
from steps.domain.errors import ConfigError, PermissionDeniedError, TransientError

NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::123456789012:role/imagebump-resolve"
#: A service account token has this shape (a JWT); '+', '/', '=' and the newline test the encoding.
TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2ln+/=\n"


def _ok(key: str = "ASIAWEBID", expires: datetime | None = None) -> tuple[int, bytes]:
    expiry = (expires or datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return 200, (
        '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
        "<AssumeRoleWithWebIdentityResult><Credentials>"
        f"<AccessKeyId>{key}</AccessKeyId><SecretAccessKey>web-secret</SecretAccessKey>"
        f"<SessionToken>web-session-token</SessionToken><Expiration>{expiry}</Expiration>"
        "</Credentials><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/r/s</Arn>"
        "<AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser></AssumeRoleWithWebIdentityResult>"
        "<ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>"
        "</AssumeRoleWithWebIdentityResponse>"
    ).encode()


def _refusal(code: str, status: int = 400, message: str = "refused") -> tuple[int, bytes]:
    return status, (
        '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
        f"<Code>{code}</Code><Message>{message}</Message></Error><RequestId>r-2</RequestId></ErrorResponse>"
    ).encode()


class _Sts:
    """STS on 127.0.0.1: answers each POST with the next scripted (status, body), the last one
    again once the script runs out, and records (path, headers, body) of each."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        self.answers, self.requests = list(answers), []
        sts = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sts.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, data = sts.answers.pop(0) if len(sts.answers) > 1 else sts.answers[0]
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def forms(self) -> list[dict[str, str]]:
        return [dict(parse_qsl(body.decode(), keep_blank_values=True)) for _, _, body in self.requests]

    @contextmanager
    def running(self) -> Iterator[_Sts]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def environ(monkeypatch, tmp_path: Path) -> dict[str, str]:
    """No AWS setting in this process (botocore reads os.environ) and a HOME without ~/.aws; a
    token file. Returns the environment both sides are given."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name in ("BOTO_CONFIG", "HTTP_PROXY", "HTTPS_PROXY"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    token = tmp_path / "token"
    token.write_text(TOKEN)
    return {"HOME": str(tmp_path), "AWS_ROLE_ARN": ROLE, "AWS_WEB_IDENTITY_TOKEN_FILE": str(token)}


def _botocores(env: dict[str, str], monkeypatch, region: str = "us-west-2"):
    """The credentials botocore's chain resolves for an ECR client made in ``env``, fetched."""
    import botocore.session

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    session = botocore.session.Session()
    session.create_client("ecr", region_name=region)
    return session.get_credentials()


def _ours(env: dict[str, str], region: str = "us-west-2", **kwargs) -> WebIdentityCredentials:
    chosen = ecr_http.route(region, env)
    assert not chosen.fallback and isinstance(chosen.credentials, WebIdentityCredentials), chosen
    return WebIdentityCredentials(chosen.credentials.identity, chosen.credentials.endpoint, **kwargs)


_DEFAULT_NAME = re.compile(rb"botocore-session-[0-9]+")
_TTL = re.compile(r"ttl=[0-9TZ]+; ")


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({}, id="default-session-name"),
        pytest.param({"AWS_ROLE_SESSION_NAME": "resolve image/1"}, id="session-name"),
        pytest.param({"AWS_ROLE_SESSION_NAME": ""}, id="empty-session-name"),
    ],
)
def test_the_request_and_the_credentials_are_botocores(settings, environ, monkeypatch) -> None:
    with _Sts([_ok()]).running() as sts:
        env = {
            **environ,
            **settings,
            "AWS_ENDPOINT_URL_STS": sts.url,
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        }
        theirs = _botocores(env, monkeypatch).get_frozen_credentials()
        mine = _ours(env, sleep=lambda _: None)()
        (their_path, their_headers, their_body), (path, headers, body) = sts.requests
    assert (mine.access_key, mine.secret_key, mine.token) == (
        theirs.access_key,
        theirs.secret_key,
        theirs.token,
    )
    assert path == their_path == "/"
    assert _DEFAULT_NAME.sub(b"N", body) == _DEFAULT_NAME.sub(b"N", their_body)  # byte for byte
    for name in ("content-type", "host", "amz-sdk-request"):
        assert headers[name] == their_headers[name], name
    assert "authorization" not in headers and "authorization" not in their_headers  # unsigned
    assert headers["user-agent"] == f"imagebump-sts-http/{steps.__version__}"
    form = sts.forms()[1]
    assert form["WebIdentityToken"] == TOKEN and form["RoleArn"] == ROLE
    if settings.get("AWS_ROLE_SESSION_NAME"):
        assert form["RoleSessionName"] == settings["AWS_ROLE_SESSION_NAME"]


@pytest.mark.parametrize(
    ("answers", "ok"),
    [
        pytest.param([_refusal("IDPCommunicationError"), (503, b""), _ok()], True, id="third-attempt"),
        pytest.param([(500, b"<html>busy</html>"), _ok()], True, id="html-5xx-retried"),
        pytest.param([_refusal("IDPCommunicationError")], False, id="three-idp-failures"),
        pytest.param([_refusal("InvalidIdentityToken")], False, id="invalid-token-not-retried"),
        pytest.param([_refusal("IDPRejectedClaim", 403)], False, id="rejected-not-retried"),
        pytest.param([_refusal("InvalidIdentityToken", 429)], False, id="modelled-429-not-retried"),
    ],
)
def test_retries_are_botocores(answers, ok, environ, monkeypatch) -> None:
    seen = {}
    for who in ("theirs", "ours"):
        with _Sts(answers).running() as sts:
            env = {**environ, "AWS_ENDPOINT_URL_STS": sts.url, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
            try:
                if who == "theirs":
                    _botocores(env, monkeypatch).get_frozen_credentials()
                else:
                    _ours(env, sleep=lambda _: None)()
                outcome = "ok"
            except Exception as exc:  # noqa: BLE001 - botocore's ClientError or ours
                outcome = exc.response["Error"]["Code"]
            # (botocore adds a ttl= to the header on a retry: a hint for the server, left out here)
            attempts = [_TTL.sub("", headers["amz-sdk-request"]) for _, headers, _ in sts.requests]
            seen[who] = (outcome, attempts)
    assert seen["ours"] == seen["theirs"]
    assert (seen["ours"][0] == "ok") is ok


def test_throttling_backs_off_on_its_own_scale(token_file) -> None:
    """botocore's standard mode: a throttled attempt waits random() * 1 s * 2 ** (attempt - 1)."""
    slept: list[float] = []
    with _Sts([_refusal("Throttling", 400), _refusal("Throttling", 400), _ok()]).running() as sts:
        found = WebIdentityCredentials(
            WebIdentity(ROLE, token_file, "s"), sts.url, sleep=slept.append, random=lambda: 0.5
        )
        assert found().access_key == "ASIAWEBID"
    assert slept == [0.5, 1.0]


@pytest.fixture
def token_file(tmp_path: Path) -> str:
    path = tmp_path / "projected-token"
    path.write_text(TOKEN)
    return str(path)


@pytest.mark.parametrize(
    "region", ["us-west-2", "us-east-1", "eu-central-1", "ap-southeast-2", "il-central-1"]
)
def test_the_sts_endpoint_is_botocores(region, environ) -> None:
    """``sts_regional_endpoints`` is ``regional`` by default: even the regions the legacy setting
    sent to sts.amazonaws.com have their own endpoint."""
    import botocore.session

    theirs = botocore.session.Session().create_client("sts", region_name=region).meta.endpoint_url
    assert ecr_http.sts_endpoint(region, {}) == (theirs, "")


def test_the_configured_sts_endpoint_comes_first() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:2/"}
    assert ecr_http.sts_endpoint("us-west-2", env) == ("http://127.0.0.1:2", "")
    assert (
        ecr_http.sts_endpoint("us-west-2", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"})[0]
        == "http://127.0.0.1:1"
    )
    ignored = {**env, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}
    assert ecr_http.sts_endpoint("us-west-2", ignored)[0] == "https://sts.us-west-2.amazonaws.com"


def test_the_modelled_errors_are_stss() -> None:
    import botocore.session

    model = botocore.session.Session().get_service_model("sts").operation_model(sts_http.OPERATION)
    assert sts_http.MODELLED_ERRORS == {shape.metadata["error"]["code"] for shape in model.error_shapes}


# --- where web identity stands in botocore's chain


_CONTAINER = {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials"}
_KEYS = {"AWS_ACCESS_KEY_ID": "AKIDKEYS", "AWS_SECRET_ACCESS_KEY": "keys-secret"}


@pytest.mark.parametrize(
    ("settings", "kind", "method"),
    [
        pytest.param({}, WebIdentityCredentials, "assume-role-with-web-identity", id="web-identity"),
        pytest.param(_KEYS, Credentials, "env", id="keys-beat-web-identity"),
        pytest.param(
            _CONTAINER, WebIdentityCredentials, "assume-role-with-web-identity", id="beats-container"
        ),
        pytest.param({"AWS_STS_REGIONAL_ENDPOINTS": "regional"}, WebIdentityCredentials, None, id="regional"),
    ],
)
def test_the_provider_is_the_one_botocores_chain_picks(settings, kind, method, environ, monkeypatch) -> None:
    env = {**environ, **settings}
    chosen = ecr_http.route("us-west-2", env)
    assert not chosen.fallback and isinstance(chosen.credentials, kind)
    if method:
        assert _botocores(env, monkeypatch).method == method  # (web identity: resolved, not fetched)


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"AWS_PROFILE": "ci"}, id="profile"),
        pytest.param({"AWS_CONFIG_FILE": "{home}/config"}, id="config-file"),
        pytest.param({"AWS_ROLE_ARN": ""}, id="no-role: botocore raises"),
        pytest.param({"AWS_STS_REGIONAL_ENDPOINTS": "legacy"}, id="legacy-sts-endpoints"),
        pytest.param({"AWS_RETRY_MODE": "standard"}, id="retry-mode"),
        pytest.param({"AWS_MAX_ATTEMPTS": "3"}, id="max-attempts"),
        pytest.param({"AWS_CA_BUNDLE": "/etc/ca.pem"}, id="ca-bundle-for-https-sts"),
        pytest.param({"AWS_ENDPOINT_URL_STS": "http://127.0.0.1:1/path"}, id="sts-endpoint-not-plain"),
        pytest.param({"AWS_USE_FIPS_ENDPOINT": "true"}, id="fips"),
    ],
)
def test_what_the_lean_path_does_not_reproduce_falls_back(settings, environ) -> None:
    (Path(environ["HOME"]) / "config").write_text("[default]\n")
    env = {
        **environ,
        "AWS_ENDPOINT_URL_ECR": "http://127.0.0.1:9",
        **{k: v.format(home=environ["HOME"]) for k, v in settings.items()},
    }
    assert ecr_http.route("us-west-2", env).fallback


def test_a_region_outside_the_aws_partition_falls_back(environ) -> None:
    assert ecr_http.route("cn-north-1", {**environ, "AWS_ENDPOINT_URL_ECR": "http://127.0.0.1:9"}).fallback
    assert ecr_http.route("us-gov-west-1", environ).fallback


def test_an_empty_token_file_variable_is_no_web_identity(environ) -> None:
    """botocore's provider then answers nothing; what comes after it is left to botocore here."""
    assert isinstance(from_environment({**environ, "AWS_WEB_IDENTITY_TOKEN_FILE": "", **_CONTAINER}), str)
    assert isinstance(from_environment({"HOME": environ["HOME"], **_CONTAINER}), ContainerCredentials)


def test_the_default_session_name_is_botocores(environ) -> None:
    found = from_environment(environ, clock=lambda: 1796623200.7)
    assert isinstance(found, WebIdentity) and found.session_name == "botocore-session-1796623200"


# --- refresh, with an injected clock


@pytest.mark.parametrize(
    ("minutes", "refresh_fails", "outcome"),
    [
        pytest.param(360, False, "first", id="far-from-expiry: no refresh"),
        pytest.param(12, False, "second", id="advisory: refreshed"),
        pytest.param(12, True, "first", id="advisory, refresh fails: kept"),
        pytest.param(5, False, "second", id="mandatory: refreshed"),
        pytest.param(5, True, "error", id="mandatory, refresh fails: raised"),
    ],
)
def test_refresh_is_botocores(minutes, refresh_fails, outcome, token_file) -> None:
    """botocore's RefreshableCredentials: within 15 minutes of expiry a request refreshes; a failed
    refresh is an error only within 10."""
    refresh = (
        _refusal("InvalidIdentityToken") if refresh_fails else _ok("ASIASECOND", NOW + timedelta(hours=1))
    )
    with _Sts([_ok("ASIAFIRST", NOW + timedelta(minutes=minutes)), refresh]).running() as sts:
        found = WebIdentityCredentials(WebIdentity(ROLE, token_file, "s"), sts.url, now=lambda: NOW)
        assert found().access_key == "ASIAFIRST"  # the first use fetches once, whatever the expiry
        if outcome == "error":
            with pytest.raises(StsApiError):
                found()
        else:
            assert found().access_key == {"first": "ASIAFIRST", "second": "ASIASECOND"}[outcome]
        assert len(sts.requests) == (1 if minutes == 360 else 2)


@pytest.mark.parametrize(("minutes", "waits"), [(12, False), (5, True)], ids=["advisory", "mandatory"])
def test_while_one_caller_refreshes_the_others_wait_only_in_the_mandatory_window(minutes, waits) -> None:
    """botocore's RefreshableCredentials._refresh: a non-blocking lock in the advisory window."""
    from steps.aws.credentials import RefreshingCredentials

    started, release = threading.Event(), threading.Event()

    class Slow(RefreshingCredentials):
        fetches = 0

        def _fetch(self):
            Slow.fetches += 1
            if Slow.fetches == 1:
                return Credentials("ASIAFIRST", "s", "t"), NOW + timedelta(minutes=minutes)
            started.set()
            release.wait(5)
            return Credentials("ASIASECOND", "s", "t"), NOW + timedelta(hours=1)

    found = Slow(now=lambda: NOW)
    found.load()
    refresher = threading.Thread(target=found)
    refresher.start()
    assert started.wait(5)
    answers: list[str] = []
    other = threading.Thread(target=lambda: answers.append(found().access_key))
    other.start()
    other.join(0.3)
    assert other.is_alive() is waits
    release.set()
    other.join(5)
    refresher.join(5)
    assert answers == ["ASIASECOND" if waits else "ASIAFIRST"] and Slow.fetches == 2


def test_nothing_is_fetched_before_the_first_use_and_the_token_is_read_at_each_fetch(environ) -> None:
    """botocore's DeferredRefreshableCredentials; the kubelet rotates the projected token."""
    token = Path(environ["AWS_WEB_IDENTITY_TOKEN_FILE"])
    with _Sts(
        [_ok("ASIAFIRST", NOW + timedelta(minutes=5)), _ok("ASIASECOND", NOW + timedelta(hours=1))]
    ).running() as sts:
        client = ecr_http.lean_client("us-west-2", {**environ, "AWS_ENDPOINT_URL": sts.url})
        assert isinstance(client, ecr_http.EcrClient) and sts.requests == []
        found = WebIdentityCredentials(WebIdentity(ROLE, str(token), "s"), sts.url, now=lambda: NOW)
        found()
        token.write_text("rotated")
        assert found().access_key == "ASIASECOND"
    assert [form["WebIdentityToken"] for form in sts.forms()] == [TOKEN, "rotated"]


def test_credentials_already_expired_are_botocores_error(token_file) -> None:
    with _Sts([_ok(expires=NOW - timedelta(minutes=1))]).running() as sts:
        found = WebIdentityCredentials(WebIdentity(ROLE, token_file, "s"), sts.url, now=lambda: NOW)
        with pytest.raises(RuntimeError, match="still expired"):
            found()


# --- errors: classified as the step classifies ECR's, from either client, with no secret


def _describe(env: dict[str, str], monkeypatch, client: str) -> Exception:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    made = ecr_http.lean_client("us-west-2", env) if client == "lean" else ecr.botocore_client("us-west-2")
    assert made is not None
    with pytest.raises(Exception) as error:
        ecr.describe_image("team/api", region="us-west-2", tag="1.0.0", client=made)
    return error.value


@pytest.mark.parametrize("client", ["lean", "botocore"])
@pytest.mark.parametrize(
    ("answers", "expected", "reason"),
    [
        pytest.param(
            [_refusal("InvalidIdentityToken", message=f"Incorrect token audience: {TOKEN.strip()}")],
            PermissionDeniedError,
            "web-identity-denied",
            id="invalid-token",
        ),
        pytest.param(
            [_refusal("ExpiredTokenException")], PermissionDeniedError, "web-identity-denied", id="expired"
        ),
        pytest.param([_refusal("IDPCommunicationError")], TransientError, "unavailable", id="idp-down"),
        pytest.param([(503, b"")], TransientError, "unavailable", id="sts-5xx"),
        pytest.param([_refusal("ValidationError")], ConfigError, "web-identity", id="validation"),
    ],
)
def test_sts_refusals_are_classified_alike_and_never_show_the_token(
    client, answers, expected, reason, environ, monkeypatch
) -> None:
    with _Sts(answers).running() as sts:
        env = {**environ, "AWS_ENDPOINT_URL_STS": sts.url, "AWS_ENDPOINT_URL_ECR": "http://127.0.0.1:9"}
        error = _describe(env, monkeypatch, client)
    assert type(error) is expected and error.reason == reason, error
    assert "STS" in str(error) and "team/api" in str(error)
    for secret in (TOKEN.strip(), "c2ln", "web-secret", "web-session-token"):
        assert secret not in str(error) and secret not in repr(error)


@pytest.mark.parametrize("client", ["lean", "botocore"])
def test_sts_out_of_reach_is_transient(client, environ, monkeypatch) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}"
        env = {**environ, "AWS_ENDPOINT_URL_STS": url, "AWS_ENDPOINT_URL_ECR": "http://127.0.0.1:9"}
        error = _describe(env, monkeypatch, client)
    assert isinstance(error, TransientError) and error.reason == "unreachable", error


def test_no_secret_in_the_lean_errors_or_reprs(environ) -> None:
    identity = from_environment(environ, clock=lambda: 0)
    assert isinstance(identity, WebIdentity) and TOKEN not in repr(identity)
    found = WebIdentityCredentials(identity, "http://127.0.0.1:1")
    assert TOKEN.strip() not in repr(found)
    refusal = sts_http._error(400, _refusal("InvalidIdentityToken", message=f"bad {TOKEN.strip()}")[1], TOKEN)
    assert TOKEN.strip() not in str(refusal) and refusal.code == "InvalidIdentityToken"
    assert isinstance(StsConnectionError("x"), Exception)
