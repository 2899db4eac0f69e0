"""edit-kustomize (the step's I/O and ``run``): read the overlay from a fresh partial clone and decide; push nothing.

Reads: the target's repository — a partial (``blob:none``), single-branch clone
:data:`steps.entry_history.DEPTHS`\\ [0] commits deep (the history read's first commits) with a
sparse cone on the overlay's path only, in its own scratch directory (:mod:`steps.runtime.scratch_dir`:
private, deleted after the step) — with the optional read token (``IMAGEBUMP_GIT_READ_TOKEN[_FILE]``, else anonymous);
the overlay's ``kustomization.yaml`` / ``kustomization.yml`` / ``Kustomization``; and, for
``order: push-time``, ECR (:func:`steps.aws.ecr.make_client`: the standard-library client, or botocore's
when the environment needs it; the standard AWS variables) for the push time of the image the overlay
holds now (and of the pushed image when the target does not carry it).

Writes: nothing but its outputs — ``plan`` (old and new ``images`` entry, file, base commit and
branch; for a plan that changes something, also the file's text and blob id, so commit-pr need not
download it again, and in ``mode: commit`` the commit and trees above the file, so commit-pr need
not fetch the base either: :func:`carry_text`), ``changed`` (``true``/``false``), ``decision`` (``update``/``current``/``stale``/``held``/``pinned``) and
``reason``. commit-pr re-applies the same pure edit on the newest base; this step never pushes.

Skips (``changed: false``) when the overlay already holds the image (``current``), holds a newer
one (``stale``), is held by a person (``held``: a ``# imagebump:hold`` marker, or a rollback found in
the file's history, read only for a target that would change: :mod:`steps.edit_kustomize.rollbacks`) or pinned
to another repository (``pinned``) — :mod:`steps.domain.intent`.

Shape: gather (clone, read the overlay, ask ECR the push times :func:`steps.domain.never_downgrade.lookups`
names) → :func:`steps.edit_kustomize.decide.decide`, the pure core → act (the outputs). The never-downgrade decisions
themselves are :mod:`steps.domain.never_downgrade`'s. When ECR is asked (the overlay holds another
image than the pushed one, so the plan will likely change), the history's first read
(:func:`steps.edit_kustomize.rollbacks.read_ahead`) runs while ECR answers, and the rollback check
takes its answer: the two waits overlap instead of adding up.

``mode: pr``: an update is also measured against the target's proposal branch
(:func:`steps.domain.branches.branch_name`, fetched shallowly into the same partial clone and read
by :mod:`steps.proposals`): when the branch
already proposes the new image (``current``) or a newer one by the rule's order (``stale``, push
times from ECR as for the base), nothing is proposed — never a downgrade of a living proposal. For
``provider: local`` the branch *is* the proposal and the decision is final. For ``provider: github``
only commit-pr (which holds the token) can ask whether the branch's pull request is still open, so
the verdict travels in the plan (``pr_entry``, ``pr_decision``, ``pr_reason``) with ``changed:
true``: commit-pr skips when that pull request is open and proposes afresh when it was closed or
merged. The plan always records what the branch proposed (``pr_branch``, ``pr_entry``) so commit-pr
can refuse to overwrite a proposal that changed since. Errors: a path that leaves the repository, a missing overlay or kustomization, or
an image not listed under ``images:`` are :class:`~steps.domain.errors.ConfigError` (never retried);
network trouble is a :class:`~steps.domain.errors.TransientError`.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from steps.domain.branches import branch_name
from steps.domain.contract import Contract
from steps.domain.errors import ConfigError, InvalidEventError, KustomizationError
from steps.domain.events import parse_repository_uri
from steps.domain.models import Decision, Plan, Target, ValuesRef
from steps.edit_kustomize.decide import decide, find_entry, values_ref
from steps.runtime.harness import step_entry
from steps.runtime.settings import github_app_configured
from steps.runtime.timing import timed

if TYPE_CHECKING:
    from steps.domain.never_downgrade import ImageKey

log = logging.getLogger(__name__)

#: The step's name in its log records (:func:`steps.runtime.harness.step_entry`).
STEP_NAME = "edit-kustomize"

#: Modules this step imports only when it runs (a pod that is refused early never pays for them).
#: A local executor that forks steps from a warm interpreter imports them ahead (workflows.local.forkserver_server).
LAZY_IMPORTS = (
    "steps.git",
    "steps.kustomize",
    "steps.aws.ecr",
    "steps.domain.events",
    "steps.domain.version_order",
    "steps.domain.never_downgrade",
    "steps.domain.intent",
    "steps.entry_history",
    "steps.edit_kustomize.rollbacks",
    "steps.aws.ecr_http",  # the lean client (steps.aws.ecr.make_client), and what it imports:
    "http.client",
    # botocore's client, when the lean one cannot answer as it would (steps.aws.ecr_http.route):
    # imported ahead too, so a forked step that falls back is as quick as before
    "botocore.session",
    "botocore.config",
    "botocore.exceptions",
    "steps.runtime.scratch_dir",
    "encodings.idna",  # the ECR call's socket: CPython encodes every host name with this codec
)


class EditKustomizeInput(Contract, frozen=True, kw_only=True):
    """The step's input: the target, with its overlay path normalised; checked before any I/O."""

    target: Target
    #: the overlay directory inside the repository ('' = the root)
    overlay: str

    @classmethod
    def of(cls, target: Target) -> "EditKustomizeInput":
        """Raises ConfigError for a path that leaves the repository or a target with nothing to set."""
        overlay = _overlay_path(target.path)
        if not (target.tag or target.digest):
            raise ConfigError(f"target for {target.image} has neither a tag nor a digest; nothing to set")
        return cls(target=target, overlay=overlay)


class EditKustomizeOutput(Contract, kw_only=True):
    plan: Plan
    changed: bool
    decision: Decision
    reason: str = ""


def _overlay_path(path: str) -> str:
    """The overlay directory, normalised and checked to stay inside the repository ("" = root)."""
    raw = path.strip()
    p = PurePosixPath(raw)
    if raw.startswith("/") or p.is_absolute() or "\\" in raw:
        raise ConfigError(f"overlay path {path!r} must be relative to the repository root")
    if ".." in p.parts:
        raise ConfigError(f"overlay path {path!r} must not contain '..': it would leave the repository")
    text = p.as_posix()
    return "" if text == "." else text


# --- gather: git and ECR ----------------------------------------------------------------------------


class _Ecr:
    """ECR as this step asks it: one client, built on the first question and passed explicitly to
    every lookup (the base's entry and, ``mode: pr``, the proposal branch's), never one per call.

    The pushed image's own push time travels in the target (resolve-image asked ECR for it), so a
    lookup here is for an image the overlay or the branch holds now.

    :meth:`start` builds the client on a thread while the clone runs: the lean client
    (:mod:`steps.aws.ecr_http`) is a few milliseconds, but its fallback, importing botocore and
    building its client, is ~0.3 s of Python in a fresh step process; the clone is a ``git``
    process that waits on the network, so the two overlap instead of adding up. Only ``order:
    push-time`` ever asks.
    """

    def __init__(self, target: Target) -> None:
        self.target = target
        self.client = None
        self.calls = 0
        self._builder: threading.Thread | None = None
        self._built: list[Any] = []

    def start(self) -> None:
        """Begin building the client in the background when this target may need ECR."""
        if self.target.settings.order != "push-time" or self._builder is not None:
            return
        try:
            _, region, _ = parse_repository_uri(self.target.image)
        except InvalidEventError:
            return  # not an ECR image: nothing will be asked

        def build() -> None:
            from steps.aws.ecr import make_client

            try:
                self._built.append(make_client(region))
            except Exception as exc:  # noqa: BLE001 - raised again where the client is used
                self._built.append(exc)

        self._builder = threading.Thread(target=build, name="ecr-client", daemon=True)
        self._builder.start()

    def finish(self) -> None:
        """Wait for a client being built (so the step never exits in the middle of an import)."""
        if self._builder is not None:
            self._builder.join()

    def _client(self, region: str) -> Any:
        if self.client is None and self._builder is not None:
            with timed("ecr client (waited for)"):
                self._builder.join()
            built = self._built[0]
            if not isinstance(built, Exception):
                self.client = built
        if self.client is None:
            from steps.aws.ecr import make_client

            self.client = make_client(region)  # raises what building it raises, in this thread
        return self.client

    def ask_later(self, keys: "list[ImageKey]") -> "Callable[[], dict[ImageKey, datetime | None]]":
        """:meth:`ask` on a thread: the returned call waits for its answer (and raises what it
        raised). ECR's answer is a network wait, like the git reads the caller runs meanwhile."""
        if not keys:
            return dict
        answer: list[Any] = []

        def asking() -> None:
            try:
                answer.append(self.ask(keys))
            except BaseException as exc:  # noqa: BLE001 - raised again where the answer is taken
                answer.append(exc)

        thread = threading.Thread(target=asking, name="ecr-lookup", daemon=True)
        thread.start()

        def taken() -> "dict[ImageKey, datetime | None]":
            with timed("ecr call (waited for)"):
                thread.join()
            if isinstance(answer[0], BaseException):
                raise answer[0]
            return answer[0]

        return taken

    def ask(self, keys: "list[ImageKey]") -> "dict[ImageKey, datetime | None]":
        """ECR's push time of each image in ``keys`` (nothing asked when empty)."""
        if not keys:
            return {}
        from steps.aws.ecr import describe_image

        account, region, repository = parse_repository_uri(self.target.image)
        client = self._client(region)
        known: dict[ImageKey, datetime | None] = {}
        for tag, digest in dict.fromkeys(keys):
            self.calls += 1
            found = describe_image(
                repository, region=region, registry_id=account, digest=digest, tag=tag, client=client
            )
            known[(tag, digest)] = found.pushed_at if found else None
        return known


@contextmanager
def _finishing(ecr: _Ecr) -> Iterator[None]:
    try:
        yield
    finally:
        ecr.finish()


def _read_overlay(repo, overlay: str) -> tuple[str, str]:
    """(repo-relative kustomization path, its text) from the clone; escapes refused."""
    from steps import kustomize

    directory = repo.resolve(overlay) if overlay else repo.path.resolve()
    where = f"{overlay or '(repository root)'} of {repo.url} branch '{repo.branch}'"
    if not directory.is_dir():
        raise KustomizationError(f"overlay directory {where} does not exist; fix the path in the rule")
    try:
        found = kustomize.find_kustomization(directory)
    except KustomizationError as exc:
        raise KustomizationError(
            str(exc).replace(str(directory), overlay or "."), reason=exc.reason
        ) from None
    file = f"{overlay}/{found.name}" if overlay else found.name
    # resolves again: a kustomization symlinked out of the repo is refused; a huge one, before it is read
    text = repo.read(file, **kustomize.read_limit(file, values=False))
    if text is None:
        raise KustomizationError(f"{file} in {where} is not a regular file")
    return file, text


def _read_values(repo, target: Target) -> tuple[str, str, ValuesRef]:
    """(repository path of the values file that holds the image, its text, how to find it there).

    A ``valuesFile`` is read as it is; for a helmfile release, the source whose scalars win Helm's
    merge of the release's values (:func:`steps.kustomize.values.helmfile.locate_image`).
    """
    from steps.kustomize import read_limit
    from steps.kustomize.values.helmfile import locate_image

    if target.values_file is not None:
        text = repo.read(target.values_file, **read_limit(target.values_file, values=True))
        if text is None:
            where = f"{repo.url} branch '{repo.branch}'"
            raise KustomizationError(
                f"values file {target.values_file} is not in {where}; fix valuesFile in the rule"
            )
        return target.values_file, text, values_ref(target)
    ref = target.helmfile
    assert ref is not None
    head = repo.cloned_head()
    got = locate_image(
        lambda path: repo.show(head, path, **read_limit(path, values=True)),
        ref.file,
        ref.release,
        ref.environment,
        target.image,
        target.values_keys,
    )
    scope = list(got.scope) if got.scope else None
    return got.file, got.text, target.values_ref(scope, got.keys, got.repository)


def carry_text(plan: Plan, repo, text: str, mode: str = "commit") -> Plan:
    """The plan with the file's text and blob id, so commit-pr need not download the file again,
    and in ``mode: commit`` the objects above it, so commit-pr need not fetch the base either.

    Only for a plan that changes something, a text of at most :data:`CARRIED_TEXT_LIMIT` bytes, a
    regular file reached without a symbolic link (the blob id is what commit-pr compares with the
    newest base; a file behind a link has another), and a file without a ``secretGenerator`` (its
    literals would be secrets in a workflow parameter, shown by Argo's UI and kept in the
    Workflow's status; commit-pr reads such a file from the remote), nor a Helm values file (values
    often hold credentials). commit-pr believes the text
    only when it hashes to the blob id (:meth:`steps.git.ClonedRepo.know`).

    The objects (``Plan.base_objects``: the base commit and the trees from its root down to the
    file's directory, at most :data:`CARRIED_OBJECTS_LIMIT` bytes; file names and ids, no content)
    let commit-pr write its commit on the base without a clone (:func:`steps.git.seed`) and push
    it with a lease on the base: one fetch per event instead of two while nobody else pushed.
    """
    import base64

    from steps.domain.models import CARRIED_OBJECTS_LIMIT, CARRIED_TEXT_LIMIT
    from steps.git.objects import blob_id, object_format

    if not plan.changed or len(text.encode("utf-8")) > CARRIED_TEXT_LIMIT or "secretGenerator" in text:
        return plan
    if plan.values is not None:  # a Helm values file may hold passwords: never in a workflow parameter
        return plan
    root = repo.path.resolve()
    if repo.resolve(plan.file) != root / plan.file or (repo.path / plan.file).is_symlink():
        return plan
    update: dict[str, Any] = {"base_blob": blob_id(text, object_format(plan.base_commit)), "base_text": text}
    objects = repo.path_objects(plan.base_commit, plan.file) if mode == "commit" else None
    if objects and sum(len(o) for o in objects) <= CARRIED_OBJECTS_LIMIT:
        update["base_objects"] = [base64.b64encode(o).decode("ascii") for o in objects]
    return plan.model_copy(update=update)


@step_entry
def run(target: Target) -> EditKustomizeOutput:
    """Clone the target's overlay, decide update/current/stale and output the plan; push nothing.

    Gather (clone, read, ECR push times) → :func:`~steps.edit_kustomize.decide.decide` (pure) → for ``mode: pr`` gather the
    proposal branch's entry → :func:`steps.domain.never_downgrade.against_branch` (pure) → output.
    """
    from steps import git
    from steps.domain.intent import pinned
    from steps.domain.never_downgrade import against_branch, branch_lookups, lookups
    from steps.edit_kustomize.rollbacks import read_ahead, unless_rolled_back
    from steps.entry_history import DEPTHS
    from steps.proposals import branch_entry

    overlay = EditKustomizeInput.of(target).overlay
    auth = git.GitAuth.from_env(write=False)
    if auth is None and github_app_configured():  # only the App's settings: read as the App
        from steps.forge.github import read_auth

        auth = read_auth()
    from steps.runtime.scratch_dir import scratch

    ecr = _Ecr(target)
    ecr.start()  # the ECR client is built while the clone runs
    with scratch("edit-kustomize-") as workdir, _finishing(ecr):
        repo = git.clone(
            target.repo_url,
            workdir / "repo",
            branch=target.settings.base_branch,
            paths=[overlay] if overlay else [],
            sparse=True,
            auth=auth,
            depth=DEPTHS[0],  # the history read's commits come with the clone: no second fetch
        )
        values = None
        with timed("kustomize"):  # finding and reading the kustomization, then its entry
            if target.edits_values:
                file, text, values = _read_values(repo, target)
            else:
                file, text = _read_overlay(repo, overlay)
            entry = find_entry(
                text, target, file, values
            )  # read once: the lookups and the decision both use it
        keys = lookups(target, entry) if not pinned(entry, target.image) else []
        head = repo.cloned_head()
        depths = {repo.branch: DEPTHS[0]}
        answer = ecr.ask_later(keys)
        # ECR is asked only when the overlay holds another image than the pushed one: the plan will
        # likely change and read the history, whose first read runs while ECR answers
        ahead = read_ahead(repo, head, file, depths) if keys else None
        known = dict(answer())
        with timed("kustomize"):
            plan = decide(target, text, file, head, repo.branch, known, old=entry, values=values)
        if plan.changed:  # only a target that would change reads the history: was it rolled back?
            plan = unless_rolled_back(
                target, plan, repo, ecr.ask, known, current=(text, entry), depths=depths, ahead=ahead
            )
        if target.settings.mode == "pr" and plan.changed:
            branch = branch_name(target)
            proposed = branch_entry(repo, branch, plan.file, plan.image_name, plan.values)
            known = ecr.ask(branch_lookups(target, plan, proposed))
            plan = against_branch(target, plan, branch, proposed, known)
        plan = carry_text(plan, repo, text, target.settings.mode)
    log.info(
        "%s [%s] at %s: %s%s",
        plan.file,
        plan.image_name,
        plan.base_commit[:12],
        plan.decision,
        f": {plan.reason}" if plan.reason else "",
    )
    return EditKustomizeOutput(plan=plan, changed=plan.changed, decision=plan.decision, reason=plan.reason)
