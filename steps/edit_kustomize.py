"""edit-kustomize: read the overlay from a fresh partial clone and decide; push nothing.

Reads: the target's repository — a partial (``blob:none``), depth-1, single-branch clone with a
sparse cone on the overlay's path only, in its own ``tempfile.TemporaryDirectory()`` (removed on
return) — with the optional read token (``IMAGEBUMP_GIT_READ_TOKEN[_FILE]``, else anonymous);
the overlay's ``kustomization.yaml`` / ``kustomization.yml`` / ``Kustomization``; and, for
``order: push-time``, ECR (boto3, standard AWS env) for the push time of the image the overlay
holds now (and of the pushed image when the target does not carry it).

Writes: nothing but its outputs — ``plan`` (old and new ``images`` entry, file, base commit and
branch), ``changed`` (``true``/``false``), ``decision`` (``update``/``current``/``stale``) and
``reason``. commit-pr re-applies the same pure edit on the newest base; this step never pushes.

Skips (``changed: false``) when the overlay already holds the image (``current``) or holds a newer
one (``stale``).

``mode: pr``: an update is also measured against the target's proposal branch
(:func:`steps.branches.branch_name`, fetched shallowly into the same partial clone): when the branch
already proposes the new image (``current``) or a newer one by the rule's order (``stale``, push
times from ECR as for the base), nothing is proposed — never a downgrade of a living proposal. For
``provider: local`` the branch *is* the proposal and the decision is final. For ``provider: github``
only commit-pr (which holds the token) can ask whether the branch's pull request is still open, so
the verdict travels in the plan (``pr_entry``, ``pr_decision``, ``pr_reason``) with ``changed:
true``: commit-pr skips when that pull request is open and proposes afresh when it was closed or
merged. The plan always records what the branch proposed (``pr_branch``, ``pr_entry``) so commit-pr
can refuse to overwrite a proposal that changed since. Errors: a path that leaves the repository, a missing overlay or kustomization, or
an image not listed under ``images:`` are :class:`~steps.errors.ConfigError` (never retried);
network trouble is a :class:`~steps.errors.TransientError`.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import tempfile
from datetime import datetime
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from steps._runtime import step_entry
from steps.branches import branch_name, proposed_entry
from steps.errors import ConfigError, ImageNotFoundError, InvalidEventError, KustomizationError
from steps.models import Decision, ImagesEntry, Plan, Target

log = logging.getLogger(__name__)

#: Modules this step imports only when it runs (a pod that is refused early never pays for them).
#: A local executor that forks steps from a warm interpreter imports them ahead (workflows.zygote).
LAZY_IMPORTS = (
    "steps.git",
    "steps.kustomize",
    "steps.ecr",
    "steps.events",
    "steps.order",
    "boto3",
    "botocore.config",
    "botocore.exceptions",
)


class EditKustomizeOutput(BaseModel):
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


def _new_entry(target: Target, old: ImagesEntry) -> ImagesEntry:
    """The entry after the edit: kustomize setter semantics (a tag alone drops the digest)."""
    tag = target.tag
    digest = target.digest if (target.write_digest or not target.tag) else None
    if tag is None and digest is None:
        raise ConfigError(
            f"target for {target.image} has neither a tag nor a digest; nothing to set in the overlay"
        )
    data = old.model_dump(exclude_none=True)
    data.pop("newTag", None)
    data.pop("digest", None)
    return ImagesEntry(**data, newTag=tag, digest=digest)


def _ecr_coordinates(image: str) -> tuple[str, str, str] | None:
    from steps.events import parse_repository_uri

    try:
        return parse_repository_uri(image)
    except InvalidEventError:
        return None


def _push_times(target: Target, old: ImagesEntry) -> tuple[datetime | None, datetime | None]:
    """(current, new) ECR push times; None where unknown or not needed."""
    new_at = target.pushed_at
    if target.order != "push-time":
        return None, new_at
    if old.newTag == target.tag and (old.digest == target.digest or not target.digest):
        return None, new_at  # same image reference: no lookup needed
    if not (old.newTag or old.digest):
        return None, new_at
    coords = _ecr_coordinates(target.image)
    if coords is None:
        return None, new_at
    account, region, repository = coords
    from steps.ecr import describe_image

    current_at = None
    if (old.newName or old.name) == target.image:
        found = describe_image(
            repository,
            region=region,
            registry_id=account,
            digest=old.digest or None,
            tag=None if old.digest else old.newTag,
        )
        current_at = found.pushed_at if found else None
    if new_at is None and (target.digest or target.tag):
        found = describe_image(
            repository,
            region=region,
            registry_id=account,
            digest=target.digest or None,
            tag=None if target.digest else target.tag,
        )
        new_at = found.pushed_at if found else None
    return current_at, new_at


def _plan(target: Target, text: str, file: str, base_commit: str, base_branch: str) -> Plan:
    """The pure core: decide on the kustomization text and describe the edit."""
    from steps import kustomize
    from steps.order import decide

    wanted = target.image_name or target.image
    old = kustomize.get_image(text, wanted, source=file)
    if old is None:
        found = [entry.name for entry in kustomize.read_images(text, source=file)]
        listed = f"found: {', '.join(found)}" if found else "it has no images entries"
        raise ImageNotFoundError(
            f"image {wanted!r} not in {file} ({listed}); add it under images:", found=found
        )
    new = _new_entry(target, old)
    current_at, new_at = _push_times(target, old)
    decision, reason = decide(
        current_tag=old.newTag,
        current_digest=old.digest,
        current_pushed_at=current_at,
        new_tag=target.tag,
        new_digest=target.digest,
        new_pushed_at=new_at,
        order=target.order,
    )
    changed = False
    if decision == "update":
        edited = kustomize.set_image(text, old.name, tag=new.newTag, digest=new.digest, source=file)
        changed = edited != text
        if not changed:
            ref = (new.newTag or "") + (f"@{new.digest}" if new.digest else "")
            decision, reason = "current", f"{file} already sets {old.name} to {ref}"
    return Plan(
        changed=changed,
        decision=decision,
        reason=reason,
        file=file,
        image_name=old.name,
        old=old,
        new=new,
        base_commit=base_commit,
        base_branch=base_branch,
    )


def _proposes(entry: ImagesEntry, new: ImagesEntry) -> bool:
    """Does ``entry`` already say what ``new`` says (name, tag and digest)?"""
    if new.newName is not None and entry.newName != new.newName:
        return False
    return (entry.newTag or None) == (new.newTag or None) and (entry.digest or None) == (new.digest or None)


def _ref(entry: ImagesEntry) -> str:
    return (entry.newTag or "") + (f"@{entry.digest}" if entry.digest else "") or "(unset)"


def _against_branch(target: Target, plan: Plan, branch: str, proposed: ImagesEntry | None) -> Plan:
    """Measure a planned update against what the proposal ``branch`` proposes (``mode: pr``).

    Pure but for ECR push-time look-ups. ``proposed`` is the branch's entry (None: no branch, or
    the branch has no such entry — nothing to protect). Returns the plan with ``pr_*`` filled in;
    for ``provider: local`` a ``current``/``stale`` verdict is final (``changed: false``).
    """
    from steps.order import decide

    plan = plan.model_copy(update={"pr_branch": branch, "pr_entry": proposed})
    if not plan.changed or proposed is None:
        return plan
    new_ref, branch_ref = _ref(plan.new), _ref(proposed)
    if _proposes(proposed, plan.new):
        verdict, why = "current", f"the open PR branch {branch} already proposes {plan.image_name} {new_ref}"
    else:
        current_at, new_at = _push_times(target, proposed)
        verdict, why = decide(
            current_tag=proposed.newTag,
            current_digest=proposed.digest,
            current_pushed_at=current_at,
            new_tag=target.tag,
            new_digest=target.digest,
            new_pushed_at=new_at,
            order=target.order,
        )
        if verdict == "current":
            why = f"the open PR branch {branch} already proposes the same image as {new_ref}: {why}"
        elif verdict == "stale":
            why = (
                f"the open PR branch {branch} proposes {branch_ref}, newer than {new_ref} "
                f"(order: {target.order}); not proposing {new_ref}: {why}"
            )
        else:
            return plan.model_copy(update={"pr_decision": verdict, "pr_reason": f"PR branch {branch}: {why}"})
    plan = plan.model_copy(update={"pr_decision": verdict, "pr_reason": why})
    if target.provider == "local":  # the branch is the proposal: final
        return plan.model_copy(update={"changed": False, "decision": verdict, "reason": why})
    # github: only commit-pr can ask whether the branch's pull request is still open
    return plan.model_copy(
        update={
            "reason": (
                f"{plan.reason}; but {why} — commit-pr skips unless that branch's pull request was closed or merged"
            )
        }
    )


def _branch_entry(repo, branch: str, plan: Plan) -> ImagesEntry | None:
    """The entry the remote ``branch`` proposes in ``plan.file`` (None: no branch, file or entry).

    Fetched shallowly into ``repo`` (the partial clone downloads only that one blob).
    """
    sha = repo.fetch(branch)
    return proposed_entry(repo, sha, plan.file, plan.image_name) if sha else None


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
        raise KustomizationError(str(exc).replace(str(directory), overlay or ".")) from None
    file = f"{overlay}/{found.name}" if overlay else found.name
    text = repo.read(file)  # resolves again: a kustomization symlinked out of the repo is refused
    if text is None:
        raise KustomizationError(f"{file} in {where} is not a regular file")
    return file, text


@step_entry
def run(target: Target) -> EditKustomizeOutput:
    """Clone the target's overlay, decide update/current/stale and output the plan; push nothing."""
    from steps import git

    overlay = _overlay_path(target.path)
    if not (target.tag or target.digest):
        raise ConfigError(f"target for {target.image} has neither a tag nor a digest; nothing to set")
    auth = git.GitAuth.from_env(write=False)
    with tempfile.TemporaryDirectory(prefix="edit-kustomize-") as scratch:
        repo = git.clone(
            target.repo_url,
            Path(scratch) / "repo",
            branch=target.base_branch,
            paths=[overlay] if overlay else [],
            sparse=True,
            auth=auth,
        )
        file, text = _read_overlay(repo, overlay)
        plan = _plan(target, text, file, repo.head(), repo.branch)
        if target.mode == "pr" and plan.changed:
            branch = branch_name(target)
            plan = _against_branch(target, plan, branch, _branch_entry(repo, branch, plan))
    log.info(
        "%s [%s] at %s: %s%s",
        plan.file,
        plan.image_name,
        plan.base_commit[:12],
        plan.decision,
        f": {plan.reason}" if plan.reason else "",
    )
    return EditKustomizeOutput(plan=plan, changed=plan.changed, decision=plan.decision, reason=plan.reason)
