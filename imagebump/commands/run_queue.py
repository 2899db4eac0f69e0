"""The SQS queue ``imagebump run --local`` reads: which region it is in, and whether it is there.

:func:`resolve_region` picks the region every SQS call and every step uses (``--region``,
``AWS_REGION``, the queue URL, the AWS profile, an emulator's default) and says where it came from;
:func:`check_queue` asks SQS once, before the sensor starts, so a missing or refused queue is bad
input (exit 2) naming the URL and the region, and an unreachable one transient (exit 75), instead
of a sensor that logs ``receive-failed`` forever.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from steps.domain.errors import ConfigError, TransientError

#: Variables that are secrets: they reach steps only as the template's Secret mounts.
#: The region of an emulator's queue when nothing names one: moto's and LocalStack's default.
EMULATOR_DEFAULT_REGION = "us-east-1"


#: SQS hosts that name their region: sqs.REGION.amazonaws.com (also sqs-fips., .com.cn, the
#: dual-stack sqs.REGION.api.aws) and the legacy REGION.queue.amazonaws.com.
_SQS_HOST_REGION = re.compile(
    r"^(?:sqs(?:-fips)?\.(?P<a>[a-z0-9-]+)\.(?:amazonaws\.com(?:\.cn)?|api\.aws)"
    r"|(?P<b>[a-z0-9-]+)\.queue\.amazonaws\.com(?:\.cn)?)$"
)
_AWS_HOST = re.compile(r"(?:^|\.)(?:amazonaws\.com(?:\.cn)?|api\.aws)$")


def _host(url: str | None) -> str:
    from urllib.parse import urlsplit

    try:
        return (urlsplit(url or "").hostname or "").lower()
    except ValueError:
        return ""


def queue_url_region(queue_url: str | None) -> str | None:
    """The region an AWS queue URL names (``https://sqs.us-west-2.amazonaws.com/…``), else None."""
    host = _host(queue_url)
    if host == "queue.amazonaws.com":  # the legacy host of us-east-1
        return "us-east-1"
    m = _SQS_HOST_REGION.match(host)
    return (m.group("a") or m.group("b")) if m else None


def sqs_endpoint(endpoint_url: str | None, environ: Mapping[str, str]) -> str | None:
    """The SQS endpoint boto3 will call: ``--endpoint-url``, else ``AWS_ENDPOINT_URL_SQS`` or
    ``AWS_ENDPOINT_URL`` (boto3 reads those itself), else None (AWS's own)."""
    return endpoint_url or environ.get("AWS_ENDPOINT_URL_SQS") or environ.get("AWS_ENDPOINT_URL") or None


def _configured_region() -> str | None:
    """The region of the AWS configuration (``AWS_PROFILE``'s ``region`` in ~/.aws/config), as botocore reads it."""
    from botocore.session import Session

    try:
        return Session().get_config_variable("region") or None
    except Exception:  # noqa: BLE001 - a broken config file: botocore's own calls will say so
        return None


def resolve_region(
    region: str | None, queue_url: str | None, endpoint_url: str | None, environ: Mapping[str, str]
) -> tuple[str, str]:
    """(region, where it came from) for the queue: the one every SQS call and every step uses.

    In order: ``--region``; ``AWS_REGION``, ``AWS_DEFAULT_REGION``; the region the queue URL names
    (``sqs.REGION.amazonaws.com``); the AWS profile's ``region``; and for an emulator (a queue URL
    or endpoint that is not AWS's, e.g. moto's ``http://127.0.0.1:PORT/123456789012/NAME``)
    :data:`EMULATOR_DEFAULT_REGION`, the region moto and LocalStack use when none is given.

    Raises:
        ConfigError: a queue on AWS whose URL names no region and nothing else does.
    """
    if region:
        return region, "--region"
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if environ.get(variable):
            return environ[variable], variable
    named = queue_url_region(queue_url)
    if named:
        return named, "the queue URL"
    configured = _configured_region()
    if configured:
        return configured, "the AWS profile"
    endpoint = sqs_endpoint(endpoint_url, environ)
    if not _AWS_HOST.search(_host(queue_url)) or (endpoint and not _AWS_HOST.search(_host(endpoint))):
        return EMULATOR_DEFAULT_REGION, "the default for an emulator"
    raise ConfigError(
        f"cannot tell the AWS region of the queue {queue_url}: its URL names none; pass --region "
        "(or export AWS_REGION) with the region the queue lives in"
    )


_NO_SUCH_QUEUE = {"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"}
#: Error codes of a call refused for its credentials or rights.
_DENIED = {
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
    "InvalidSecurity",
    "ExpiredToken",
    "ExpiredTokenException",
    "RequestExpired",
    "MissingAuthenticationToken",
    "AuthFailure",
}
_THROTTLED = {"Throttling", "ThrottlingException", "RequestThrottled", "RequestThrottledException"}


def _aws_message(message: str) -> str:
    """An error message for people: an XML error body (some endpoints send one) reduced to its
    ``<Code>`` and ``<Message>``; at most 300 characters."""
    if message.lstrip().startswith("<"):
        found = dict(re.findall(r"<(Code|Message)>([^<]*)</", message))
        message = (
            ": ".join(v for v in (found.get("Code"), found.get("Message")) if v) or "(an XML error body)"
        )
    return message[:300]


def check_queue(sqs: Any, queue_url: str, region: str, region_from: str, endpoint: str | None) -> None:
    """Ask SQS for the queue once, before anything starts: a queue that is not there, or that these
    credentials may not read, is bad input (exit 2) rather than a ``receive-failed`` every few
    seconds for ever; a network failure or an SQS 5xx is transient (exit 75: run it again).

    Raises:
        ConfigError: no such queue (in that region), access denied, no credentials, or another
            request SQS refuses as invalid. The message names the queue URL and the region.
        TransientError: the endpoint could not be reached, SQS throttled or failed (5xx).
    """
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        ConnectionError,
        HTTPClientError,
        NoCredentialsError,
        PartialCredentialsError,
    )

    where = f"in region {region} (from {region_from})"
    if endpoint:
        where += f" at {endpoint}"
    try:
        sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    except ClientError as exc:
        error = exc.response.get("Error") or {}
        code = str(error.get("Code") or "")
        codes = {code, str(error.get("QueryErrorCode") or "")}
        status = int((exc.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        said = _aws_message(str(error.get("Message") or code))
        if codes & _NO_SUCH_QUEUE:
            raise ConfigError(
                f"--queue-url {queue_url}: no such queue {where}. Check the URL (the CloudFormation "
                "stack's QueueUrl output) and the region: pass --region (or export AWS_REGION) when the "
                "queue lives in another"
            ) from None
        if codes & _DENIED or status in (401, 403):
            raise ConfigError(
                f"--queue-url {queue_url}: access denied {where} ({code}: {said}). The AWS credentials "
                "found (environment, profile, SSO) must be valid and allow sqs:GetQueueAttributes, "
                "ReceiveMessage, DeleteMessage and ChangeMessageVisibility on the queue"
            ) from None
        if codes & _THROTTLED or status == 429 or status >= 500:
            raise TransientError(
                f"--queue-url {queue_url}: SQS failed {where} ({code or status}: {said}); run it again"
            ) from None
        raise ConfigError(
            f"--queue-url {queue_url}: SQS refused the queue {where} ({code}: {said})"
        ) from None
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise ConfigError(
            f"--queue-url {queue_url}: no usable AWS credentials ({exc}); set them the usual way "
            "(AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, `aws sso login`)"
        ) from None
    except (ConnectionError, HTTPClientError) as exc:
        raise TransientError(
            f"--queue-url {queue_url}: cannot reach SQS {where} ({type(exc).__name__}: {exc}); "
            "check the network (or that the emulator runs) and run it again"
        ) from None
    except BotoCoreError as exc:  # e.g. a malformed endpoint URL or profile: the configuration's fault
        raise ConfigError(
            f"--queue-url {queue_url}: cannot call SQS {where}: {type(exc).__name__}: {exc}"
        ) from None
