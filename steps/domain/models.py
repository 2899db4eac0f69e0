"""The values that travel between steps (as Argo parameters, i.e. JSON) — the shared contract.

``Image`` leaves resolve-image, a list of ``Target`` fans out (``withParam``), each target's
``Plan`` leaves edit-kustomize and enters commit-pr. They are plain data: no I/O here. Each is a :class:`steps.domain.contract.Contract` (a msgspec
struct: what a cold step pod imports in milliseconds).

Also the one way an image reference is written for people (:func:`image_ref`, :func:`short_digest`,
:func:`short_ref`, :func:`entry_ref`): ``name:tag@digest``, a tag or a short digest, and what "no image" reads as;
and the one comparison of two ``images`` entries (:func:`entry_sets`, :func:`same_entry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, field

from steps.domain.contract import Contract
from steps.domain.repo_url import repo_id as repository_id

#: The closed choices of a rule and its targets, declared once (the rules schema imports them),
#: and their defaults: what a rule that does not say gets.
Mode = Literal["pr", "commit"]
Order = Literal["push-time", "semver", "none"]
Provider = Literal["github", "local"]
CommitMethod = Literal["git", "api"]
DEFAULT_MODE: Mode = "pr"
DEFAULT_ORDER: Order = "push-time"
DEFAULT_PROVIDER: Provider = "github"
DEFAULT_COMMIT_METHOD: CommitMethod = "git"
#: ``gate`` (issue 35): ``wait`` — no commit or PR until the soak passed; ``check`` — the PR opens at
#: once with a commit status ``imagebump/soak: ENV`` pending until it passes.
GateMode = Literal["wait", "check"]
DEFAULT_GATE: GateMode = "wait"


def short_digest(digest: str | None, *, mark: str = "") -> str:
    """``sha256:0123456789ab`` (the algorithm and 12 hex digits), ``mark`` appended when cut; "" for none."""
    if not digest:
        return ""
    algorithm, _, hexpart = digest.partition(":")
    short = f"{algorithm}:{hexpart[:12]}" if hexpart else digest[:19]
    return short + mark if len(short) < len(digest) else digest


def short_ref(ref: str) -> str:
    """``1.4.2@sha256:0123456789ab…``: a ``tag@digest`` reference with its digest cut, for tables
    and one-line reasons; any other reference as it is."""
    tag, at, digest = ref.partition("@")
    return f"{tag}@{digest[:19]}…" if at and len(digest) > 19 else ref


def image_ref(
    tag: str | None = None,
    digest: str | None = None,
    *,
    name: str = "",
    short: bool = False,
    one: bool = False,
    mark: str = "",
    none: str = "(none)",
) -> str:
    """An image reference for people: ``name:tag@digest`` and its shorter forms.

    Args:
        tag, digest: what the reference pins (either may be absent).
        name: the image's name or repository URI ("" for the version alone: ``tag@digest``).
        short: the digest as :func:`short_digest` (with ``mark`` when cut, e.g. ``"…"``).
        one: the tag if there is one, else the digest (never both).
        mark: appended to a digest :func:`short_digest` cut.
        none: what a reference with neither tag nor digest reads as (with a ``name``: the name).

    Without a ``name`` a digest-only reference is the digest alone (no leading ``@``).

    >>> image_ref("1.4.2", "sha256:" + "a" * 64, name="api", short=True, mark="…")
    'api:1.4.2@sha256:aaaaaaaaaaaa…'
    >>> image_ref(None, "sha256:" + "a" * 64, one=True, short=True)
    'sha256:aaaaaaaaaaaa'
    >>> image_ref(None, None, none="(unset)")
    '(unset)'
    """
    if one and tag:
        digest = None
    shown = short_digest(digest, mark=mark) if short else (digest or "")
    if not tag and not shown:
        return name or none
    if not tag:
        return f"{name}@{shown}" if name else shown
    return (f"{name}:{tag}" if name else tag) + (f"@{shown}" if shown else "")


class Image(Contract, frozen=True, kw_only=True):
    """One pushed image, validated as ECR validates it.

    ``registry`` is ``{account}.dkr.ecr.{region}.amazonaws.com``; ``uri`` is
    ``{registry}/{repository}`` (no tag). A digest-only push has ``tag=None``.
    """

    account: str
    region: str
    repository: str
    tag: str | None = None
    digest: str | None = None
    pushed_at: datetime | None = None
    event_id: str | None = None

    @property
    def registry(self) -> str:
        return f"{self.account}.dkr.ecr.{self.region}.amazonaws.com"

    @property
    def uri(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """``uri[:tag][@digest]`` — what ``docker pull`` takes."""
        return image_ref(self.tag, self.digest, name=self.uri)


class HelmfileRef(Contract, frozen=True, kw_only=True):
    """A rule's ``helmfile``: the release whose values hold the image, in an environment."""

    #: the helmfile, repository-relative (resolved like valuesFile)
    file: str
    release: str
    #: replaces ``{{ .Environment.Name }}``; "" = none given
    environment: str = ""


class ValuesRef(Contract, frozen=True, kw_only=True):
    """Where a values-file target's image is, beyond the file: the rule's ``valuesKeys`` and, for
    inline values in a helmfile, the path to that mapping (document index first)."""

    keys: dict[str, str] | None = None
    scope: list[str | int] | None = None
    #: For a helmfile release's file that overrides only the tag (and digest) of an image an earlier
    #: values file names (``keys`` then names the tag): the repository the earlier files compose.
    repository: str | None = None
    #: writeDigest: append the digest to a string image
    add_digest: bool = False


class PromoteAfter(Contract, frozen=True, kw_only=True):
    """A target's gate (a rule's ``promoteAfter``): the environment before it and the soak (seconds)."""

    env: str
    soak_seconds: Annotated[int, Meta(ge=0)]


class RuleSettings(Contract, frozen=True, kw_only=True):
    """What a rule says about how its targets are written, gated and announced: one declaration,
    which every target carries (a :class:`Target` is a ``RuleSettings`` plus what it edits), never
    copied field by field.

    The defaults are what a rule that does not say gets (the rules schema declares the same ones).
    """

    mode: Mode = DEFAULT_MODE
    #: None: the remote's default branch
    base_branch: str | None = None
    #: images[].name to set; None: the entry whose name or newName is ``image``
    image_name: str | None = None
    write_digest: bool = False
    order: Order = DEFAULT_ORDER
    labels: tuple[str, ...] = ()
    reviewers: tuple[str, ...] = ()
    #: The rule's ``notify:`` destination names (empty: the notifications file's default).
    notify: tuple[str, ...] = ()
    provider: Provider = DEFAULT_PROVIDER
    #: git: commit and push with git; api: through GitHub's git database API (Verified)
    commit_method: CommitMethod = DEFAULT_COMMIT_METHOD
    #: refuse to move a ref to a commit GitHub does not show as Verified
    require_verified: bool = False
    #: the rule's promoteAfter: promoted only after env ran the image for the soak
    promote_after: PromoteAfter | None = None
    #: wait: no commit/PR until promoted; check: a status
    gate: GateMode = DEFAULT_GATE


#: The rule's settings a target holds (on the wire they sit at the top level, beside its own fields).
SETTINGS_FIELDS = frozenset(RuleSettings.__struct_fields__)


class Target(RuleSettings, frozen=True, kw_only=True):
    """One overlay to update for one image: the result of one matching rule — what it edits (the
    repository, overlay, values file), the image, and the rule's settings.

    A target *is* its rule's :class:`RuleSettings` plus what it edits: on the wire (Argo parameters,
    ``imagebump explain``) the settings sit at the top level, as every version of the steps wrote
    and read them, so a Workflow resubmitted from the Argo UI and a step of another version read
    the same JSON. :attr:`settings` gives them as one object; :meth:`of` builds a target from one.
    """

    #: 0-based index of the rule that produced this target
    rule: int
    #: https://HOST/OWNER/REPO
    repo_url: str
    #: overlay directory inside the repository, relative, no '..'
    path: str
    env: str = ""
    #: repository URI of the pushed image, no tag
    image: str
    tag: str | None = None
    digest: str | None = None
    pushed_at: datetime | None = None
    event_id: str | None = None
    #: a Helm values file to edit instead of a kustomization (repository-relative)
    values_file: str | None = None
    #: dotted paths of repository, tag (registry, digest) in the values file
    values_keys: dict[str, str] | None = None
    #: a helmfile release whose values files (or inline values) hold the image
    helmfile: HelmfileRef | None = None
    #: the repository's one spelling (steps.domain.repo_url.repo_id of repo_url): what compares and
    #: locks repositories; derived, any value given is replaced
    repo_id: str = ""

    def __post_init__(self) -> None:
        msgspec.structs.force_setattr(self, "repo_id", repository_id(self.repo_url))

    @classmethod
    def of(cls, settings: RuleSettings | None = None, **fields: Any) -> Target:
        """A target from its rule's ``settings`` and its own ``fields`` (a field given wins)."""
        given = msgspec.structs.asdict(settings) if settings is not None else {}
        return cls(**{**given, **fields})

    @property
    def settings(self) -> RuleSettings:
        """The rule's settings this target carries, as one object."""
        return RuleSettings(**{name: getattr(self, name) for name in RuleSettings.__struct_fields__})

    def with_settings(self, **changes: Any) -> Target:
        """This target with some of its rule's settings changed (validated)."""
        unknown = set(changes) - SETTINGS_FIELDS
        if unknown:
            raise TypeError(f"{sorted(unknown)} are not settings: use model_copy()")
        checked = RuleSettings.model_validate({**msgspec.structs.asdict(self.settings), **changes})
        return self.model_copy(update={name: getattr(checked, name) for name in changes})

    @property
    def edits_values(self) -> bool:
        """Does this target edit a Helm values file (or a helmfile release) rather than a kustomization?"""
        return self.values_file is not None or self.helmfile is not None

    @property
    def edited(self) -> str:
        """What the target edits inside its repository: the overlay directory, the values file, or
        the helmfile release (``FILE#RELEASE@ENV``): one target per edited thing."""
        if self.values_file is not None:
            return self.values_file
        if self.helmfile is not None:
            return f"{self.helmfile.file}#{self.helmfile.release}@{self.helmfile.environment}"
        return self.path

    def values_ref(
        self, scope: list | None = None, keys: dict[str, str] | None = None, repository: str | None = None
    ) -> ValuesRef | None:
        """How to find the image in this target's values file (None: it edits a kustomization);
        ``keys``/``repository``: what a helmfile release's sources say (else the rule's valuesKeys)."""
        if not self.edits_values:
            return None
        return ValuesRef(
            keys=keys if keys is not None else self.values_keys,
            scope=scope,
            repository=repository,
            add_digest=self.settings.write_digest,
        )

    @property
    def key(self) -> str:
        """What serialises writers: one overlay of one repository, however a rule spells it
        (``update-target``'s mutex renders the same string)."""
        return f"{self.repo_id}/{self.path}"


class ImagesEntry(Contract, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """One entry of a kustomization's ``images:`` list (kustomize's field names; kustomize reads no
    other key of an entry, so any other is ignored: the file's bytes keep it, the edit is a splice)."""

    name: str
    newName: str | None = None
    newTag: str | None = None
    digest: str | None = None

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> ImagesEntry:
        """An entry from an entry's keys as the file holds them (keys kustomize does not read ignored)."""
        return cls(**{k: v for k, v in fields.items() if k in cls.__struct_fields__})


def entry_ref(entry: ImagesEntry | None, *, none: str = "(none)") -> str:
    """An entry's version for people: its tag, else its short digest; ``(unset)`` when it pins neither."""
    if entry is None:
        return none
    return image_ref(entry.newTag, entry.digest, one=True, short=True, none="(unset)")


def entry_sets(entry: ImagesEntry, wanted: ImagesEntry) -> bool:
    """Does ``entry`` already say what ``wanted`` says: its ``newName`` (when ``wanted`` sets one),
    tag and digest (an empty value is no value)?"""
    if wanted.newName is not None and entry.newName != wanted.newName:
        return False
    return (entry.newTag or None, entry.digest or None) == (wanted.newTag or None, wanted.digest or None)


def same_entry(a: ImagesEntry | None, b: ImagesEntry | None) -> bool:
    """Are two (possibly absent) entries the same proposal: same ``newName``, tag and digest?"""
    if a is None or b is None:
        return a is b
    return (a.newName, a.newTag or None, a.digest or None) == (b.newName, b.newTag or None, b.digest or None)


#: ``held`` and ``pinned``: what a person decided stands (:mod:`steps.domain.intent`); terminal, never errors.
Decision = Literal["update", "current", "stale", "held", "pinned"]


#: The largest kustomization text a plan carries to commit-pr (bytes); a larger one is read again there.
CARRIED_TEXT_LIMIT = 32 * 1024
#: The most bytes of raw git objects a plan carries (Plan.base_objects; the trees above the file
#: list the names next to each directory on the way, a few KiB in a monorepo of hundreds of apps).
CARRIED_OBJECTS_LIMIT = 32 * 1024


class Plan(Contract, kw_only=True):
    """What edit-kustomize decided for one target; commit-pr re-applies it on the newest base."""

    changed: bool
    decision: Decision
    reason: str = ""
    #: path of the kustomization file inside the repository
    file: str
    #: the images[].name of the entry that is (or would be) set; for a values file the pushed
    #: repository
    image_name: str
    #: set when ``file`` is a Helm values file (or a helmfile): how to find the image
    values: ValuesRef | None = None
    old: ImagesEntry | None = None
    new: ImagesEntry
    base_commit: str = ""
    base_branch: str = ""
    #: the blob id of ``file`` at base_commit, when base_text carries its text ('' = not carried)
    base_blob: str = ""
    #: the text of ``file`` at base_commit (at most CARRIED_TEXT_LIMIT bytes; never a file with a
    #: secretGenerator), so commit-pr need not download it again while the file is unchanged; checked
    #: against base_blob before use
    base_text: str = ""
    #: mode commit, with base_text: the raw git objects from base_commit down to file's directory (the
    #: commit, then one tree per directory from the root; base64; at most CARRIED_OBJECTS_LIMIT bytes
    #: in all), so commit-pr can commit on base_commit without fetching it; believed only when each
    #: hashes to the id its parent names
    base_objects: list[str] = field(default_factory=list)
    #: the rollback check found only imagebump's commits among the last touches of file at base_commit
    #: (steps.entry_history.only_imagebump), so a commit made on base_commit may say so (the
    #: Imagebump-History trailer)
    history_clean: bool = False
    #: mode pr: the proposal branch edit-kustomize looked at ('' = not looked at)
    pr_branch: str = ""
    #: mode pr: the entry that branch proposed then (None: no branch or no entry)
    pr_entry: ImagesEntry | None = None
    #: mode pr: the new image against pr_entry (None: nothing to compare)
    pr_decision: Decision | None = None
    pr_reason: str = ""
