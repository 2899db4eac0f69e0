"""steps.aws.sigv4 signs as botocore signs: botocore's own ``SigV4Auth`` is the oracle (tests only).

For generated requests — ECR operation names, JSON bodies (unicode included, escaped or not),
regions, hosts with and without a port, access keys, secrets, with and without a session token, any
time — the ``Authorization`` header (and so the signed header list and the signature), ``X-Amz-Date``
and ``X-Amz-Security-Token`` equal what botocore's signer puts on an ``AWSRequest`` with the same
method, URL, headers, body and fixed time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from unittest import mock

from hypothesis import example, given, settings
from hypothesis import strategies as st

from steps.aws.sigv4 import Credentials, sign

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_PRINTABLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E)


def _botocore(method, url, headers, body, credentials, region, service, now):
    """What botocore's SigV4Auth leaves on the request (its clock fixed at ``now``)."""
    import botocore.auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    creds = BotoCredentials(credentials.access_key, credentials.secret_key, credentials.token)
    with mock.patch.object(botocore.auth, "get_current_datetime", lambda *a, **k: now.replace(tzinfo=None)):
        botocore.auth.SigV4Auth(creds, service, region).add_auth(request)
    return dict(request.headers.items())


@settings(max_examples=150, deadline=None)
@given(
    operation=st.from_regex(r"[A-Z][A-Za-z]{0,30}", fullmatch=True),
    document=st.dictionaries(st.text(max_size=10), _JSON, max_size=4),
    ascii_only=st.booleans(),
    region=st.from_regex(r"[a-z]{2}-[a-z]{1,12}-[0-9]{1,2}", fullmatch=True),
    https=st.booleans(),
    port=st.none() | st.integers(min_value=1, max_value=65535),
    access_key=st.text(alphabet=_PRINTABLE, min_size=1, max_size=24),
    secret=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    token=st.none() | st.text(alphabet=_PRINTABLE, min_size=1, max_size=60),
    now=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2099, 12, 31)),
)
@example(
    operation="DescribeImages",
    document={"repositoryName": "team/äpp", "imageIds": [{"imageTag": "1.4.2"}]},
    ascii_only=False,
    region="us-west-2",
    https=True,
    port=None,
    access_key="AKIDEXAMPLE",
    secret="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    token=None,
    now=datetime(2015, 8, 30, 12, 36),
)
@example(  # the default port of the scheme is left out of the signed host, another is kept
    operation="BatchGetImage",
    document={},
    ascii_only=True,
    region="eu-central-1",
    https=False,
    port=80,
    access_key="testing",
    secret="testing",
    token="testing",
    now=datetime(2026, 12, 7, 0, 0),
)
def test_the_signature_equals_botocores(
    operation, document, ascii_only, region, https, port, access_key, secret, token, now
) -> None:
    body = json.dumps(document, ensure_ascii=ascii_only).encode("utf-8")
    scheme = "https" if https else "http"
    host = f"api.ecr.{region}.amazonaws.com"
    default = 443 if https else 80
    url = f"{scheme}://{host}{'' if port is None else f':{port}'}/"
    host_header = host if port in (None, default) else f"{host}:{port}"
    headers = {
        "X-Amz-Target": f"AmazonEC2ContainerRegistry_V20150921.{operation}",
        "Content-Type": "application/x-amz-json-1.1",
    }
    credentials = Credentials(access_key, secret, token)
    theirs = _botocore("POST", url, headers, body, credentials, region, "ecr", now)
    ours = sign(
        method="POST",
        host=host_header,
        path="/",
        headers=headers,
        body=body,
        credentials=credentials,
        region=region,
        service="ecr",
        now=now.replace(tzinfo=UTC),
    )
    assert ours["Authorization"] == theirs["Authorization"]
    assert ours["X-Amz-Date"] == theirs["X-Amz-Date"]
    assert ours.get("X-Amz-Security-Token") == theirs.get("X-Amz-Security-Token")
    assert ours == theirs  # nothing else added, nothing left out


def test_credentials_never_show_the_secret_or_the_token() -> None:
    shown = repr(Credentials("AKIDEXAMPLE", "s3cr3t-value", "t0ken-value"))
    assert "AKIDEXAMPLE" in shown and "s3cr3t" not in shown and "t0ken" not in shown
