"""steps.aws.credentials finds the credentials botocore's chain would, from the providers it
reproduces, and leaves the rest to botocore.

botocore's own ``EnvProvider`` and ``ContainerProvider`` are the oracles (tests only), against a real
HTTP server on 127.0.0.1 standing for the container endpoint (ECS's, or EKS Pod Identity's agent: a
loopback address is one botocore accepts). Nothing sleeps: the fetcher's sleep is injected, and
botocore's fetcher gets the same recorder.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from steps.aws import ecr_http
from steps.aws.credentials import ContainerCredentials, CredentialsError, from_environment
from steps.aws.sigv4 import Credentials

NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


def _document(key: str = "ASIACONTAINER", minutes: int = 360, now: datetime | None = None) -> dict:
    """The endpoint's answer, expiring ``minutes`` after ``now`` (default: the real clock's now, for
    the tests whose credentials are read by code on the real clock: botocore, a step process)."""
    expiry = ((now or datetime.now(UTC)) + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "AccessKeyId": key,
        "SecretAccessKey": "container-secret",
        "Token": "container-token",
        "Expiration": expiry,
    }


class _Endpoint:
    """The container credentials endpoint: answers each GET with the next scripted (status, body)."""

    def __init__(self, answers: list[tuple[int, object]]) -> None:
        self.answers, self.requests = list(answers), []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                endpoint.requests.append((self.path, dict(self.headers)))
                status, body = endpoint.answers.pop(0) if len(endpoint.answers) > 1 else endpoint.answers[0]
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/credentials"

    @contextmanager
    def running(self) -> Iterator[_Endpoint]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path)}


def _theirs(environ: dict[str, str], slept: list[float]):
    from botocore.credentials import ContainerProvider
    from botocore.utils import ContainerMetadataFetcher

    return ContainerProvider(environ=environ, fetcher=ContainerMetadataFetcher(sleep=slept.append))


def test_container_credentials_are_botocores(home, tmp_path) -> None:
    token = tmp_path / "token"
    token.write_text("pod-identity-token")
    with _Endpoint([(200, _document())]).running() as endpoint:
        environ = {
            **home,
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url,
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token),
            "AWS_CONTAINER_AUTHORIZATION_TOKEN": "ignored: the file wins",
        }
        ours = from_environment(environ)
        assert isinstance(ours, ContainerCredentials)
        ours.load()
        mine = ours()
        theirs = _theirs(environ, []).load().get_frozen_credentials()
        assert (mine.access_key, mine.secret_key, mine.token) == (
            theirs.access_key,
            theirs.secret_key,
            theirs.token,
        )
        (path, my_headers), (their_path, their_headers) = endpoint.requests
        assert path == their_path == "/v1/credentials"
        for name in ("Authorization", "Accept"):
            assert my_headers[name] == their_headers[name]
        assert my_headers["Authorization"] == "pod-identity-token"


def test_the_relative_uri_is_on_ecs_address_and_comes_first(home) -> None:
    environ = {
        **home,
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/abc",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/x",
    }
    found = from_environment(environ)
    assert isinstance(found, ContainerCredentials) and found.url == "http://169.254.170.2/v2/credentials/abc"


def test_keys_in_the_environment_come_before_the_container(home) -> None:
    environ = {
        **home,
        "AWS_ACCESS_KEY_ID": "AKID",
        "AWS_SECRET_ACCESS_KEY": "s",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/x",
    }
    assert from_environment(environ) == Credentials("AKID", "s", None)


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({"AWS_ROLE_ARN": "arn:aws:iam::1:role/r"}, id="web-identity-role"),
        pytest.param({"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token"}, id="web-identity-token"),
        pytest.param({"AWS_CREDENTIAL_FILE": "/x"}, id="original-ec2"),
        pytest.param(
            {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://example.com/creds"}, id="host-not-allowed"
        ),
        pytest.param({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "https://example.com/creds"}, id="https"),
        pytest.param(
            {"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://[fd00:ec2::23]/v1/credentials"}, id="ipv6"
        ),
        pytest.param({"AWS_CONTAINER_CREDENTIALS_FULL_URI": ""}, id="empty"),
    ],
)
def test_what_comes_before_the_container_or_is_not_plain_falls_back(settings, home) -> None:
    environ = {
        **home,
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
        **settings,
    }
    assert isinstance(from_environment(environ), str)


@pytest.mark.parametrize("host", ["169.254.170.23", "169.254.170.2", "localhost", "127.0.0.1", "127.1.2.3"])
def test_the_hosts_botocore_allows(host, home) -> None:
    environ = {**home, "AWS_CONTAINER_CREDENTIALS_FULL_URI": f"http://{host}/v1/credentials"}
    assert isinstance(from_environment(environ), ContainerCredentials)


def test_a_boto2_config_file_falls_back(home, tmp_path) -> None:
    """botocore's BotoProvider reads ``BOTO_CONFIG`` (only), else ``/etc/boto.cfg`` and ``~/.boto``:
    a file there may hold keys that come before the container's."""
    environ = {**home, "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials"}
    assert isinstance(
        from_environment({**environ, "BOTO_CONFIG": str(tmp_path / "nowhere")}), ContainerCredentials
    )
    (tmp_path / "boto.cfg").write_text("[Credentials]\n")
    assert isinstance(from_environment({**environ, "BOTO_CONFIG": str(tmp_path / "boto.cfg")}), str)
    (tmp_path / ".boto").write_text("[Credentials]\n")
    assert isinstance(from_environment(environ), str)


def test_no_provider_reproduced_is_botocores(home) -> None:
    assert isinstance(from_environment(home), str)  # instance metadata, …: botocore's


@pytest.mark.parametrize(
    ("answers", "ok"),
    [
        pytest.param([(500, b"busy"), (404, b"no"), (200, _document())], True, id="third-attempt"),
        pytest.param([(200, b"not json"), (200, _document())], True, id="bad-json-retried"),
        pytest.param([(500, b"busy")], False, id="three-failures"),
    ],
)
def test_fetching_retries_as_botocores_fetcher(answers, ok, home) -> None:
    counts = {}
    for who in ("theirs", "ours"):
        slept: list[float] = []
        with _Endpoint(answers).running() as endpoint:
            environ = {**home, "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url}
            provider = (
                _theirs(environ, slept) if who == "theirs" else from_environment(environ, sleep=slept.append)
            )
            try:
                provider.load()
                succeeded = True
            except Exception:  # noqa: BLE001 - botocore's CredentialRetrievalError or ours
                succeeded = False
            counts[who] = (succeeded, len(endpoint.requests), slept)
    assert counts["ours"] == counts["theirs"]
    assert counts["ours"][0] is ok


def test_a_refused_connection_is_three_attempts(home) -> None:
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{held.getsockname()[1]}/creds"
        slept: list[float] = []
        found = from_environment({**home, "AWS_CONTAINER_CREDENTIALS_FULL_URI": url}, sleep=slept.append)
        assert isinstance(found, ContainerCredentials)
        with pytest.raises(CredentialsError) as error:
            found.load()
    assert slept == [1.0, 1.0, 1.0] and "/creds" in str(error.value)


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
def test_refresh_is_botocores(minutes, refresh_fails, outcome, home) -> None:
    """botocore's RefreshableCredentials: within 15 minutes of expiry a request refreshes; a failed
    refresh is an error only within 10."""
    refresh = (500, b"down") if refresh_fails else (200, _document("ASIASECOND", now=NOW))
    with _Endpoint([(200, _document("ASIAFIRST", minutes, now=NOW)), refresh]).running() as endpoint:
        found = ContainerCredentials(endpoint.url, home, sleep=lambda _: None, now=lambda: NOW)
        found.load()
        if outcome == "error":
            with pytest.raises(CredentialsError):
                found()
        else:
            assert found().access_key == {"first": "ASIAFIRST", "second": "ASIASECOND"}[outcome]


def test_the_lean_client_signs_with_the_containers_credentials(home) -> None:
    with _Endpoint([(200, _document())]).running() as endpoint:
        environ = {
            **home,
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url,
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        }
        client = ecr_http.lean_client("us-west-2", environ)
        assert isinstance(client, ecr_http.EcrClient)
        assert len(endpoint.requests) == 1  # fetched when the client is made, as botocore does


def test_a_container_that_does_not_answer_leaves_the_client_to_botocore(home, monkeypatch) -> None:
    """botocore then fetches again and raises its own error, in its own words."""
    import steps.aws.credentials as credentials

    monkeypatch.setattr(credentials, "FETCH_SLEEP", 0.0)
    with _Endpoint([(500, b"down")]).running() as endpoint:
        environ = {
            **home,
            "AWS_CONTAINER_CREDENTIALS_FULL_URI": endpoint.url,
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        }
        assert ecr_http.lean_client("us-west-2", environ) is None
        assert len(endpoint.requests) == 3


def test_container_credentials_never_show_a_secret(home) -> None:
    shown = repr(
        ContainerCredentials(
            "http://169.254.170.23/v1/credentials", {**home, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "tok3n"}
        )
    )
    assert "tok3n" not in shown
