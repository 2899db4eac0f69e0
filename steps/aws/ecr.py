"""ECR lookups: an image's digest, tags and push time; a repository's account.

Reads ECR with the client :func:`make_client` builds: on the event path (resolve-image,
edit-kustomize) the standard-library client of :mod:`steps.aws.ecr_http` when the environment holds
what it reproduces exactly (credentials in ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, IRSA's web
identity or the container endpoint (:mod:`steps.aws.credentials`), no shared
config file or profile, a plain or regional endpoint of the ``aws`` partition), else botocore, boto3's
client layer (region from the caller; endpoint, credentials and retries from the SDK's own
configuration, so ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_ECR`` reach moto or a VPC endpoint).
Both answer with the same dicts; reconcile's listing client is always botocore's. Writes nothing.

Errors: a missing image is ``None`` (the caller decides whether that is a skip or an error); a
missing repository is a :class:`ConfigError` naming it; access denied is a
:class:`PermissionDeniedError`; throttling, 5xx and connection failures are a
:class:`TransientError` (Argo retries the step). STS's refusal of the step's web identity (IRSA) is
classified the same way, from either client: a token the role does not trust is a
:class:`PermissionDeniedError`, an unreachable identity provider a :class:`TransientError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from steps.domain.errors import (
    ConfigError,
    EcrApiError,
    EcrConnectionError,
    PermissionDeniedError,
    RepositoryMissing,
    StsApiError,
    StsConnectionError,
    TransientError,
)
from steps.runtime.timing import timed

_TRANSIENT_CODES = {
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalServerError",
    "InternalFailure",
    "ServerException",
    "RequestTimeout",
    "RequestTimeoutException",
}
_DENIED_CODES = {
    "AccessDeniedException",
    "AccessDenied",
    "UnrecognizedClientException",
    "ExpiredTokenException",
}


@dataclass(frozen=True)
class EcrImage:
    """One image as ECR describes it."""

    digest: str
    tags: tuple[str, ...] = field(default_factory=tuple)
    pushed_at: datetime | None = None
    registry_id: str = ""  # the account that holds it, as ECR says ("" if it did not)
    #: the image this artifact is about (a signature, an SBOM, an attestation pushed as an OCI
    #: referrer: ECR's ``subjectManifestDigest``); "" for an image
    subject: str = ""
    #: ECR's ``imageStatus``: ``ACTIVE`` (pullable), ``ARCHIVED`` (archive storage class: cannot be
    #: pulled, still described with its push time) or ``ACTIVATING``
    status: str = "ACTIVE"


#: Called by a warm interpreter that forks steps (workflows.local.forkserver_server) before it
#: forks: botocore's data files parsed once, and one session built on them for the child to take.
WARM_UP = ("warm_loader",)
#: botocore's data loader with ECR's model, the endpoints and the retry data already parsed (pure
#: data: no environment, no credentials); None until :func:`warm_loader` ran in this process.
_LOADER: Any = None
#: A botocore Session built by :func:`warm_loader` and not yet handed out: its ~130 built-in event
#: handlers registered (a third of a client's build time), nothing resolved. Credentials, region,
#: endpoint and profile are looked up when a client is made, from the environment at that time.
_WARM_SESSION: Any = None


def warm_loader() -> None:
    """Parse the botocore data an ECR client needs into a shared ``Loader`` (each new botocore
    Session otherwise re-parses ``endpoints.json`` and the service model: 4-5x the client's build
    time), and build one session on it for the next :func:`_session` call (a forked step's first
    client)."""
    global _LOADER, _WARM_SESSION
    loader = create_loader()
    for name in ("endpoints", "partitions", "_retry", "sdk-default-configuration"):
        loader.load_data(name)
    for kind in ("service-2", "endpoint-rule-set-1", "paginators-1", "waiters-2"):
        try:
            loader.load_service_model("ecr", kind)
        except Exception:  # noqa: BLE001 - an optional file of this botocore version: parsed on use
            pass
    _LOADER = loader
    # One throwaway client, every setting given, on a session of its own (never handed out): it
    # fills what botocore keeps per process — compiled patterns, the operation-name and endpoint
    # ruleset caches — so the step's own first client is built in half the time.
    _new_session().create_client(
        "ecr",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="warm-up",
        aws_secret_access_key="warm-up",
    )
    _WARM_SESSION = _new_session()


def create_loader(data_path: str | None = None) -> Any:
    """botocore's data loader (``botocore.loaders.create_loader``: the same search path, ``AWS_DATA_PATH``
    first, the same files) made cheaper to start on, with what botocore's data says unchanged:

    * which services have a model (checked before a client's model is read) is looked up for the
      one service asked (its own directory), not by listing every service's directory in botocore's
      data (~460, a ``stat`` of each: 0.015-0.025 s CPU of a fresh process's first client). The full
      list is still botocore's own scan (an unknown service's error, ``get_available_services``);
    * its JSON files are parsed into plain dicts (insertion-ordered as botocore's ``OrderedDict`` s):
      ``endpoints.json`` (1.2 MB, every service of every partition) parses in half the time.
    """
    from botocore.exceptions import DataNotFoundError
    from botocore.loaders import JSONFileLoader, Loader
    from botocore.loaders import create_loader as botocore_loader

    class PlainJSONFileLoader(JSONFileLoader):  # type: ignore[misc]
        def _load_file(self, full_path: str, open_method: Any) -> Any:
            import json
            import os

            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                return json.loads(fp.read().decode("utf-8"))

    class KnownServices(Sequence):  # type: ignore[type-arg]
        """What ``Loader.list_available_services`` answers, ``in`` checked for one name."""

        def __init__(self, loader: Any, type_name: str) -> None:
            self._loader, self._type_name = loader, type_name
            self._all: list[str] | None = None

        def __contains__(self, name: object) -> bool:
            try:
                return bool(self._loader.list_api_versions(name, self._type_name))
            except DataNotFoundError:
                return False

        def _names(self) -> list[str]:
            if self._all is None:
                self._all = Loader.list_available_services(self._loader, self._type_name)
            return self._all

        def __getitem__(self, index: Any) -> Any:
            return self._names()[index]

        def __len__(self) -> int:
            return len(self._names())

    class EcrLoader(Loader):  # type: ignore[misc]
        FILE_LOADER_CLASS = PlainJSONFileLoader

        def list_available_services(self, type_name: str) -> Any:
            return KnownServices(self, type_name)

    paths = botocore_loader(data_path).search_paths  # AWS_DATA_PATH's entries, as botocore reads them
    return EcrLoader(extra_search_paths=list(paths), include_default_search_paths=False)


def _new_session() -> Any:
    import botocore.session

    core = botocore.session.Session()
    if _LOADER is not None:
        core.register_component("data_loader", _LOADER)
    else:  # botocore's own default, on this module's loader
        core.lazy_register_component(
            "data_loader", lambda: create_loader(core.get_config_variable("data_path"))
        )
    return core


def _session() -> Any:
    """A botocore Session whose credentials and region come from this process's environment: the
    one :func:`warm_loader` built (handed out once: a session is never shared between callers), else
    a new one, on the shared pre-parsed data loader when :func:`warm_loader` ran.

    botocore, not boto3: ``import boto3`` also imports s3transfer (a third of boto3's import time,
    paid by every step pod that reads ECR), and a boto3 client is botocore's client anyway.
    """
    global _WARM_SESSION
    session, _WARM_SESSION = _WARM_SESSION, None
    if session is None:
        return _new_session()
    from botocore.useragent import UserAgentString

    # The one part a session reads from the environment when it is built: read it again, here.
    session.register_component("user_agent_creator", UserAgentString.from_environment())
    return session


def make_client(region: str) -> Any:
    """An ECR client for ``region`` with standard retries (throttling is retried): the lean
    :class:`steps.aws.ecr_http.EcrClient` when :func:`steps.aws.ecr_http.route` finds it answers as
    botocore's would, else botocore's (:func:`botocore_client`)."""
    with timed("ecr client"):
        from steps.aws.ecr_http import lean_client

        return lean_client(region) or _botocore_client(region)


def botocore_client(region: str) -> Any:
    """botocore's ECR client for ``region``, configured as :func:`make_client`'s fallback."""
    with timed("ecr client"):
        return _botocore_client(region)


def _botocore_client(region: str) -> Any:
    from botocore.config import Config

    return _session().create_client(
        "ecr",
        region_name=region,
        config=Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=20),
    )


def _classify(exc: Exception, what: str, repository: str) -> Exception:
    """Map an ECR client's exception (botocore's, or :mod:`steps.aws.ecr_http`'s) to our hierarchy
    (never includes credentials: neither client puts them in an error)."""
    if isinstance(exc, EcrApiError):
        return _classify_answer(exc.code, exc.status, exc.message, what, repository)
    if isinstance(exc, EcrConnectionError):
        return TransientError(f"cannot reach ECR for {what} of {repository!r}: {exc}", reason="unreachable")
    if isinstance(exc, StsApiError):  # the lean client's web identity (IRSA)
        return _classify_web_identity(exc.code, exc.status, exc.message, what, repository)
    if isinstance(exc, StsConnectionError):
        return TransientError(
            f"cannot reach STS for the step's web identity credentials ({what} of {repository!r}): {exc}",
            reason="unreachable",
        )
    if type(exc).__module__.partition(".")[0] != "botocore":
        return exc  # neither client's: not ours to classify (and botocore need not be imported to say so)
    from botocore.exceptions import (
        ClientError,
        HTTPClientError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )
    from botocore.exceptions import (
        ConnectionError as BotoConnectionError,
    )

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        if getattr(exc, "operation_name", "") == "AssumeRoleWithWebIdentity":  # botocore's IRSA credentials
            return _classify_web_identity(
                err.get("Code", ""),
                exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0),
                err.get("Message", ""),
                what,
                repository,
            )
        return _classify_answer(
            err.get("Code", ""),
            exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0),
            err.get("Message", ""),
            what,
            repository,
        )
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return ConfigError(
            f"no AWS credentials for ECR {what}: configure the step's role or AWS_* variables",
            reason="no-credentials",
        )
    if isinstance(exc, NoRegionError):
        return ConfigError(f"no AWS region for ECR {what}: set AWS_REGION", reason="no-region")
    if isinstance(exc, (BotoConnectionError, HTTPClientError)):
        return TransientError(f"cannot reach ECR for {what} of {repository!r}: {exc}", reason="unreachable")
    return exc


#: STS's refusals of a web identity that mean the role does not trust this token (IAM's side: the
#: role's trust policy, the OIDC provider, the service account's annotation)
_WEB_IDENTITY_DENIED = {
    "InvalidIdentityToken",
    "ExpiredTokenException",
    "IDPRejectedClaim",
    "AccessDenied",
    "RegionDisabledException",
}
#: A JSON Web Token (a service account token is one), should STS's message quote it.
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


def _classify_web_identity(code: str, status: int, message: str, what: str, repository: str) -> Exception:
    """STS's refusal of the step's web identity (AssumeRoleWithWebIdentity, IRSA: asked for the
    credentials of ECR's ``what``) in our hierarchy, from either client; any token STS's message
    quotes is cut out."""
    message = _JWT.sub("(a token)", message)
    if code == "IDPCommunicationError" or code in _TRANSIENT_CODES or status >= 500 or status == 429:
        return TransientError(
            f"STS could not give the step's web identity credentials for ECR {what} of {repository!r} "
            f"for now ({code or status}: {message})",
            reason="unavailable",
        )
    if code in _WEB_IDENTITY_DENIED or status in (401, 403):
        return PermissionDeniedError(
            f"STS refused the step's web identity ({code}: {message}) before ECR {what} of "
            f"{repository!r}: check that the service account's eks.amazonaws.com/role-arn is the role "
            "and that the role's trust policy names the cluster's OIDC provider, the audience "
            "sts.amazonaws.com and this service account",
            reason="web-identity-denied",
        )
    return ConfigError(
        f"STS AssumeRoleWithWebIdentity failed ({code}: {message}) before ECR {what} of {repository!r}: "
        "check AWS_ROLE_ARN and AWS_ROLE_SESSION_NAME",
        reason="web-identity",
    )


def _classify_answer(code: str, status: int, message: str, what: str, repository: str) -> Exception:
    """ECR's refusal (its error code, HTTP status and message) in our hierarchy."""
    if code == "RepositoryNotFoundException":
        return ConfigError(
            f"ECR repository {repository!r} does not exist ({what}): check the repository name, "
            "the region and the account",
            reason="repository-missing",
        )
    if code in _DENIED_CODES or status in (401, 403):
        return PermissionDeniedError(
            f"ECR refused {what} for {repository!r} ({code}): grant ecr:DescribeImages and "
            "ecr:DescribeRepositories to the step's role",
            reason="denied",
        )
    if code in _TRANSIENT_CODES or status >= 500 or status == 429:
        return TransientError(
            f"ECR {what} for {repository!r} failed for now ({code or status}: {message})",
            reason="unavailable",
        )
    return ConfigError(f"ECR {what} for {repository!r} failed: {code}: {message}")


def describe_image(
    repository: str,
    *,
    region: str,
    tag: str | None = None,
    digest: str | None = None,
    registry_id: str | None = None,
    client: Any = None,
) -> EcrImage | None:
    """The image ``repository:tag`` or ``repository@digest`` as ECR has it now; None if absent.

    Give a tag to learn where the tag points *now* (and whether it moved); give a digest to learn
    an image's push time. With both, the tag is asked and the caller compares digests.

    Raises:
        ConfigError: the repository does not exist (or another non-retryable refusal).
        PermissionDeniedError: the role may not describe images.
        TransientError: throttling, 5xx, connection failure.
    """
    if not tag and not digest:
        raise ValueError("describe_image needs a tag or a digest")
    client = client or make_client(region)
    image_id = {"imageTag": tag} if tag else {"imageDigest": digest}
    kwargs: dict[str, Any] = {"repositoryName": repository, "imageIds": [image_id]}
    if registry_id:
        kwargs["registryId"] = registry_id
    try:
        with timed("ecr call"):
            response = client.describe_images(**kwargs)
    except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised as they are
        if _error_code(exc) == "ImageNotFoundException":  # botocore's ClientError or ecr_http's EcrApiError
            return None
        raise _classify(exc, "DescribeImages", repository) from None
    details = response.get("imageDetails") or []
    if not details:
        return None
    detail = details[0]
    return EcrImage(
        digest=detail["imageDigest"],
        tags=tuple(detail.get("imageTags") or ()),
        pushed_at=detail.get("imagePushedAt"),
        registry_id=detail.get("registryId") or "",
        subject=str(detail.get("subjectManifestDigest") or ""),
    )


#: The media types of an image index (OCI) and a manifest list (Docker): a multi-platform image,
#: whose ``manifests[]`` are its platforms' manifests and (buildx) their attestation manifests.
INDEX_MEDIA_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
#: How far apart (push times) an index and the manifests it lists are looked for: a client pushes
#: the manifests first, then the index, in one push.
INDEX_WINDOW = timedelta(minutes=10)
#: An index manifest larger than this is not read (ECR's manifest limit is 4 MiB).
MAX_INDEX_BYTES = 4 * 1024 * 1024


def index_listing(
    repository: str,
    digest: str,
    *,
    near: datetime | None,
    registry_id: str,
    client: Any,
) -> EcrImage | None:
    """The tagged image index (or manifest list) of ``repository`` that lists ``digest`` among its
    ``manifests``, pushed within :data:`INDEX_WINDOW` of ``near``; None when there is none.

    A multi-platform push (``docker buildx``) puts each platform's manifest and its attestation
    manifests first, untagged, then the index with the tag; ECR sends a push event for each. Those
    manifests are parts of the image the index is, not images to deploy by themselves.
    """
    candidates = [
        image
        for image in iter_images(repository, registry_id=registry_id, client=client, tagged_only=True)
        if image.tags
        and image.digest != digest
        and (near is None or image.pushed_at is None or abs(image.pushed_at - near) <= INDEX_WINDOW)
    ]
    for start in range(0, len(candidates), 100):  # BatchGetImage takes 100 ids
        chunk = candidates[start : start + 100]
        try:
            with timed("ecr call"):
                response = client.batch_get_image(
                    repositoryName=repository,
                    registryId=registry_id,
                    imageIds=[{"imageDigest": image.digest} for image in chunk],
                    acceptedMediaTypes=list(INDEX_MEDIA_TYPES),
                )
        except Exception as exc:  # noqa: BLE001
            raise _classify(exc, "BatchGetImage", repository) from None
        for found in response.get("images") or []:
            text = found.get("imageManifest") or ""
            if len(text) > MAX_INDEX_BYTES or '"manifests"' not in text:
                continue
            try:
                manifest = json.loads(text)
            except ValueError:
                continue
            listed = manifest.get("manifests") if isinstance(manifest, dict) else None
            if isinstance(listed, list) and any(
                isinstance(m, dict) and m.get("digest") == digest for m in listed
            ):
                parent = (found.get("imageId") or {}).get("imageDigest")
                return next((image for image in chunk if image.digest == parent), None)
    return None


def repository_account(repository: str, *, region: str, client: Any = None) -> str:
    """The AWS account that holds ``repository`` in ``region`` (its registry id).

    Raises:
        ConfigError: the repository does not exist.
        PermissionDeniedError, TransientError: as :func:`describe_image`.
    """
    client = client or make_client(region)
    try:
        with timed("ecr call"):
            response = client.describe_repositories(repositoryNames=[repository])
    except Exception as exc:  # noqa: BLE001
        raise _classify(exc, "DescribeRepositories", repository) from None
    repos = response.get("repositories") or []
    if not repos:
        raise ConfigError(f"ECR repository {repository!r} does not exist in {region}")
    repo = repos[0]
    account = repo.get("registryId") or ""
    if not account and repo.get("repositoryUri"):
        account = repo["repositoryUri"].split(".", 1)[0]
    if not account:
        raise ConfigError(f"ECR did not say which account holds {repository!r}")
    return account


# --- listing (the reconcile run) -------------------------------------------------------------

#: The most ECR returns per page of DescribeRepositories / DescribeImages (its API reference).
MAX_PAGE_SIZE = 1000


def make_listing_client(region: str, *, max_pool_connections: int = 10) -> Any:
    """An ECR client for reconcile runs: botocore's *adaptive* retry mode (client-side rate limiting that
    backs off when ECR throttles), and a connection pool as large as reconcile's concurrency."""
    from botocore.config import Config

    return _session().create_client(
        "ecr",
        region_name=region,
        config=Config(
            retries={"mode": "adaptive", "max_attempts": 10},
            connect_timeout=5,
            read_timeout=30,
            max_pool_connections=max(10, max_pool_connections),
        ),
    )


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return (response or {}).get("Error", {}).get("Code", "") if isinstance(response, dict) else ""


def _pages(client: Any, operation: str, what: str, subject: str, on_call: Any, **kwargs: Any) -> Any:
    """Every page of a paginated ECR operation; ``on_call()`` once per page (one API call each)."""
    paginator = client.get_paginator(operation)
    pages = paginator.paginate(**kwargs, PaginationConfig={"PageSize": MAX_PAGE_SIZE})
    iterator = iter(pages)
    while True:
        try:
            page = next(iterator)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - classified below, unknown ones re-raised as they are
            if on_call is not None:
                on_call()
            if _error_code(exc) == "RepositoryNotFoundException":
                raise RepositoryMissing(subject) from None
            raise _classify(exc, what, subject) from None
        if on_call is not None:
            on_call()
        yield page


def list_repositories(registry_id: str, *, client: Any, prefix: str = "", on_call: Any = None) -> list[str]:
    """Names of the repositories of registry ``registry_id`` that start with ``prefix`` (sorted).

    DescribeRepositories cannot filter by prefix: every page is read, the filter is ours.

    Raises:
        PermissionDeniedError: the role may not list repositories (ecr:DescribeRepositories on ``*``).
        TransientError: throttling beyond the retries, 5xx, connection failure.
    """
    names = []
    for page in _pages(
        client,
        "describe_repositories",
        "DescribeRepositories",
        f"registry {registry_id}",
        on_call,
        registryId=registry_id,
    ):
        for repo in page.get("repositories") or []:
            name = repo.get("repositoryName") or ""
            if name.startswith(prefix):
                names.append(name)
    return sorted(set(names))


def _filter(status: str, tagged_only: bool) -> dict[str, Any]:
    """DescribeImages' ``filter`` argument (none when nothing is filtered)."""
    wanted = {
        **({"imageStatus": status} if status else {}),
        **({"tagStatus": "TAGGED"} if tagged_only else {}),
    }
    return {"filter": wanted} if wanted else {}


def iter_images(
    repository: str,
    *,
    registry_id: str,
    client: Any,
    on_call: Any = None,
    status: str = "",
    tagged_only: bool = False,
) -> Iterator[EcrImage]:
    """Every image of ``repository`` (tagged or not) with its tags and push time, page by page:
    one DescribeImages page is held at a time, so a caller that keeps only what it needs holds
    memory bounded by what it keeps, not by the repository's size.

    ``status``: ECR's ``imageStatus`` filter. Without it ECR lists ACTIVE images only
    (DescribeImagesFilter: "If not specified, only images with ACTIVE status are returned");
    ``ANY`` adds the archived ones, whose push times still order what they were. ``tagged_only``:
    ECR leaves out untagged images (``tagStatus: TAGGED``).

    Raises:
        RepositoryMissing: the repository does not exist (any more), on the first page.
        PermissionDeniedError, TransientError: as :func:`describe_image`.
    """
    for page in _pages(
        client,
        "describe_images",
        "DescribeImages",
        repository,
        on_call,
        repositoryName=repository,
        registryId=registry_id,
        **_filter(status, tagged_only),
    ):
        for detail in page.get("imageDetails") or []:
            yield EcrImage(
                digest=detail["imageDigest"],
                tags=tuple(detail.get("imageTags") or ()),
                pushed_at=detail.get("imagePushedAt"),
                status=str(detail.get("imageStatus") or "ACTIVE"),
            )


def list_images(
    repository: str, *, registry_id: str, client: Any, on_call: Any = None
) -> list[EcrImage] | None:
    """Every image of ``repository`` (tagged or not) with its tags and push time; None if the
    repository does not exist (any more). Holds them all: reconcile streams :func:`iter_images`.

    Raises:
        PermissionDeniedError, TransientError: as :func:`describe_image`.
    """
    try:
        return list(iter_images(repository, registry_id=registry_id, client=client, on_call=on_call))
    except RepositoryMissing:
        return None
