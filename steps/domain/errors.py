"""The one exception hierarchy of imagebump.

Every error a user can cause or meet derives from :class:`ImagebumpError`. Entry points (the CLI
and the step runner) turn these into a short message and an exit code, never a traceback.

::

    ImagebumpError
    ├── ConfigError            bad input: the user must change something. Never retried.
    │   ├── InvalidEventError  an SQS body / image reference that is not a valid ECR push
    │   ├── RulesError         a rules file that cannot be loaded (names rule index and field)
    │   ├── KustomizationError a kustomization that cannot be read or edited
    │   │   └── ImageNotFoundError  the image is not in the file (names the ones that are)
    │   ├── PermissionDeniedError   the remote refused for lack of rights (protected branch, 403)
    │   ├── UnverifiedCommit   GitHub did not verify an API commit and verified commits are required
    │   ├── TreeMismatch       GitHub's tree for an API commit is not the one computed locally
    │   └── LiveMismatch   verify-live: Argo CD runs another image than Git holds (fails the Workflow)
    ├── TransientError         the world broke for a while: network, 5xx, push race. Retried.
    │   └── PushRejected       git: the remote branch moved on (non-fast-forward, stale lease)
    ├── GitCommandError        git failed for a reason imagebump does not recognise
    ├── NoCommitsBetween       GitHub: the PR's head adds nothing to its base (commit-pr: unchanged)
    ├── PullRequestExists      GitHub: a concurrent run opened the PR first (commit-pr adopts it)
    └── RepositoryMissing      ECR: a listed repository vanished mid-listing (the lister skips it)

    ValueError (what each is, not a user's error: each is caught where it is meant to be)
    ├── BadInput               a step's input parameter does not validate (steps.runtime.launcher: exit 2)
    ├── CarriedObjectsError    a plan's carried git objects do not prove its file (commit-pr clones)
    ├── ContractError          data that does not fit a contract (steps.domain.contract: names the field)
    ├── UndecidableCondition   a helmfile template condition imagebump cannot evaluate exactly
    └── SettingError           a backup setting's value is bad (inside a pydantic validator;
                               steps.argocd_backup.settings reports it as a ConfigError naming where to fix it)

    EditMismatch               an edited kustomization does not read as meant (leaves the
                               kustomize package as KustomizationError)

Every exception class the steps raise or catch lives here; the modules that raised them first
(``steps.git``, ``steps.forge.pull_requests``) re-export them under their old names.

Exit codes of a step process (what Argo's ``retryStrategy`` keys on): ``EXIT_CONFIG`` (2) is
terminal, ``EXIT_TRANSIENT`` (75, EX_TEMPFAIL) is retried; any other non-zero exit is an
unexpected failure and is retried as well (it is more likely a flaky dependency than a bug that
a retry would make worse).

Messages must name the thing, the cause and the fix, and must never contain a secret.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_TRANSIENT = 75


class ImagebumpError(Exception):
    """Base of every error imagebump raises on purpose.

    ``reason`` is a short, stable code for what went wrong (kebab-case, e.g. ``invalid-yaml``) where
    one class covers several causes, and ``field`` the input or file field at fault: callers and tests
    key on them, so the message's wording may change and the meaning may not. Empty where the class
    alone says it.
    """

    exit_code: int = EXIT_FAILURE
    reason: str = ""
    field: str = ""

    def __init__(self, *args: object, reason: str = "", field: str = "") -> None:
        super().__init__(*args)
        if reason:
            self.reason = reason
        if field:
            self.field = field


class ConfigError(ImagebumpError):
    """The input is wrong; retrying cannot help. Say what is wrong and how to fix it."""

    exit_code = EXIT_CONFIG


class InvalidEventError(ConfigError):
    """An event body or image reference that is not a valid ECR push."""


class RulesError(ConfigError):
    """A rules file that cannot be loaded; the message names the rule index and field.

    ``rule`` is that index (None when the file as a whole is wrong) and ``field`` that field.
    """

    rule: int | None = None

    def __init__(self, *args: object, rule: int | None = None, **kwargs: str) -> None:
        super().__init__(*args, **kwargs)
        self.rule = rule


class KustomizationError(ConfigError):
    """A kustomization file that cannot be found, parsed or edited."""


class ValuesError(KustomizationError):
    """A Helm values file or helmfile that cannot be read, or an image in it that cannot be edited safely."""


class ImageNotFoundError(KustomizationError):
    """The image to set is not an entry of the kustomization's ``images``."""

    def __init__(self, message: str, found: list[str] | None = None) -> None:
        super().__init__(message)
        self.found = list(found or [])


class PermissionDeniedError(ConfigError):
    """The remote refused the change for lack of rights (protected branch, 401/403)."""


class UnverifiedCommit(ConfigError):
    """``requireVerified``: GitHub created the commit but does not show it as Verified (the message
    names GitHub's ``reason``); no ref was moved to it."""


class TreeMismatch(ConfigError):
    """``commitMethod: api``: the tree GitHub built is not the tree git computes locally for the same
    edit (bytes or a file mode would differ); no ref was moved to it."""


class LiveMismatch(ConfigError):
    """An Argo CD Application synced at a revision holding the commit runs another image (terminal:
    a retry cannot fix what Argo CD rendered; a person must look)."""


class TransientError(ImagebumpError):
    """A failure that may pass: network error, 5xx, rate limit, a push that lost a race."""

    exit_code = EXIT_TRANSIENT


class RuleFieldError(RulesError):
    """One field of one rule is wrong (raised while a rule compiles).

    :func:`steps.rules.load_rules` catches it and raises :class:`RulesError` as
    ``SOURCE: rule N: FIELD: problem``; it never leaves the rules package on its own.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class PushRejected(TransientError):
    """The remote branch moved on (non-fast-forward, fetch first, stale lease): fetch and retry."""


class GitCommandError(ImagebumpError):
    """A git command failed for a reason imagebump does not recognise (message is redacted)."""


class NoCommitsBetween(ImagebumpError):
    """GitHub's 422 "No commits between BASE and HEAD": the branch proposes nothing new."""


class PullRequestExists(ImagebumpError):
    """GitHub's 422 "A pull request already exists for OWNER:BRANCH" (a concurrent creator won)."""


class RepositoryMissing(ImagebumpError):
    """An ECR repository that was listed a moment ago is gone (``RepositoryNotFoundException``)."""


class ConflictError(TransientError):
    """409: the object was changed (or created) since it was read; re-read it and try again.

    Raised by :mod:`steps.kube.api` (Kubernetes API writes) and caught by :mod:`steps.argocd_backup.restore`.
    """


class BadInput(ValueError):
    """An input parameter that does not validate against the step function's annotation.

    Raised and caught by :mod:`steps.runtime.launcher` (one JSON error record, exit 2), before the step runs.
    """


class UndecidableCondition(ValueError):
    """A helmfile template condition (``{{ if … }}``) whose value imagebump cannot work out exactly
    from the rule's environment. Raised and caught inside :mod:`steps.kustomize.values.helmfile`,
    which refuses the release with a ValuesError naming the entry and the fix."""


class ContractError(ValueError):
    """Data that does not fit a contract (:mod:`steps.domain.contract`): the message names the
    contract and what is wrong; ``field`` the path at fault (``tag``, ``targets[0].rule``; "" for
    the whole value: a missing or unknown key, or not a mapping at all)."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class CarriedObjectsError(ValueError):
    """The git objects a plan carries do not prove what they claim: a chain that does not hash to
    the ids its parents name, a text that is not its blob, a branch that is no plain name, objects
    that are not base64.

    Raised by :mod:`steps.git.objects` and :func:`steps.git.seed`; commit-pr catches exactly this
    and clones the base instead (:func:`steps.commit_pr.base_branch.seed_base`). Nothing was written.
    """


class StatusError(ValueError):
    """An Argo CD Application status field of the wrong type or shape, or a revision that is not a
    commit id (the message names the field).

    Raised and caught inside :mod:`steps.verify_live.decide`: the Application's state is ``unknown``
    with that reason, never an exception out of the judgement.
    """


class EditMismatch(Exception):
    """The edited text does not read as the original plus the intended change.

    Raised and caught inside :mod:`steps.kustomize.verify`; it leaves as :class:`KustomizationError`.
    """


class SettingError(ValueError):
    """A bad setting value, with the names of the settings to change (raised inside a pydantic
    validator, hence a ValueError; :mod:`steps.argocd_backup.settings` turns it into a ConfigError)."""

    def __init__(self, message: str, *settings: str) -> None:
        super().__init__(message)
        self.settings = settings


class NotifyConfigError(ValueError):
    """An outcome or a notification routing that cannot be used (the message names what is wrong).

    Raised by :mod:`steps.notify.decide` and :mod:`steps.notify.config`; the notify step turns it
    into a log record and a counted failure, never a failed Workflow.
    """


class AwsApiError(Exception):
    """An AWS API answered the lean clients (:mod:`steps.aws.ecr_http`, :mod:`steps.aws.sts_http`)
    with an error: its ``code`` (the HTTP status as text when it gave none, as botocore does), the
    HTTP ``status`` and its ``message``; ``response`` is shaped as botocore's ``ClientError.response``
    (``Error``, ``ResponseMetadata``), so :func:`steps.aws.ecr._classify` reads either alike."""

    def __init__(self, operation: str, code: str, status: int, message: str, request_id: str = "") -> None:
        self.operation, self.code, self.status, self.message = operation, code, status, message
        self.response: dict[str, object] = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"RequestId": request_id, "HTTPStatusCode": status},
        }
        super().__init__(f"An error occurred ({code}) when calling the {operation} operation: {message}")


class EcrApiError(AwsApiError):
    """ECR answered with an error (:mod:`steps.aws.ecr_http`)."""


class StsApiError(AwsApiError):
    """STS refused AssumeRoleWithWebIdentity (:mod:`steps.aws.sts_http`); its message never holds
    the token."""

    def __init__(self, code: str, status: int, message: str, request_id: str = "") -> None:
        super().__init__("AssumeRoleWithWebIdentity", code, status, message, request_id)


class EcrConnectionError(Exception):
    """No answer from ECR: the connection could not be made, timed out or was closed. The message is
    botocore's for the same failure (``EndpointConnectionError``, ``ConnectTimeoutError``,
    ``ReadTimeoutError``, ``ConnectionClosedError``, ``SSLError``)."""


class StsConnectionError(Exception):
    """No answer from STS (botocore's message for the same failure, naming the URL)."""


class EcrPaginationError(Exception):
    """ECR returned the same ``nextToken`` twice (botocore's ``PaginationError``)."""


class DroppedConnection(Exception):
    """A kept-alive connection was closed before an answer began (:mod:`steps.aws.ecr_http` opens
    another, as urllib3 does, without counting an attempt)."""


class CredentialsError(Exception):
    """The container endpoint or STS gave no usable credentials (botocore's
    ``CredentialRetrievalError``) (:mod:`steps.aws.credentials`)."""
