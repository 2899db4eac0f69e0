"""commit-pr: re-apply the plan on the newest base; commit, or keep one living PR per target.

Reads: the ``target`` and the ``plan`` (parameters); the write token (``IMAGEBUMP_GIT_TOKEN`` /
``IMAGEBUMP_GIT_TOKEN_FILE``, or the GitHub App trio, see :mod:`steps.github`);
``IMAGEBUMP_GITHUB_API_URL``; ``IMAGEBUMP_GIT_AUTHOR_NAME`` / ``IMAGEBUMP_GIT_AUTHOR_EMAIL``
(default ``imagebump`` / ``imagebump@users.noreply.github.com``);
``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` (see below); ``IMAGEBUMP_PUSH_ATTEMPTS`` (default 10).

Writes: one commit on the base branch (``mode: commit``), or one branch per target plus one open
pull request for it (``mode: pr``). Outputs ``action`` (``committed`` | ``pr-created`` |
``pr-updated`` | ``unchanged``), ``commit_sha``, ``pr_url``, ``pr_number``, ``branch``, ``reason``.

How: a fresh partial, sparse clone of the newest base in a private temporary directory; the
plan's *edit* (``target`` + ``plan.new``) is re-applied there with the pure editor — never a
stale patch. Before writing, the file's current entry is re-checked:

- already equal to ``plan.new`` → ``unchanged`` (someone — or an earlier try of this step — landed it);
- changed since the plan to something else → with ``order: semver`` re-decided by
  :func:`steps.order.decide`; with ``order: push-time`` ``unchanged`` with a reason naming both
  (commit-pr does not read ECR, so it cannot know the other image's push time); with
  ``order: none`` the plan wins.

Skips (``unchanged``, no commit, no PR): ``plan.changed`` is false; the re-check above; in
``mode: pr`` the branch already holds exactly this tree and its open PR already says this, or the
living proposal must not be replaced (never a downgrade of an open PR);
GitHub's 422 "No commits between".

``mode: commit`` pushes to the base branch; a non-fast-forward rejection fetches the new base,
re-applies and pushes again, at most ``IMAGEBUMP_PUSH_ATTEMPTS`` times with jittered exponential
backoff, then fails as transient. A hook or permission rejection is :class:`PermissionDeniedError`.

``mode: pr`` uses the branch :func:`branch_name` (stable for env + overlay path + image; defined in
:mod:`steps.branches`), builds its one commit on the newest base and, unless the branch is a living
proposal that must not be replaced (see :func:`guard_branch`: it proposes something else than the
plan saw there, or edit-kustomize found it already proposes this image or a newer one — the
pull request is open; for ``provider: local`` the branch exists), force-pushes it with a lease on
the sha seen before (a branch whose pull request was closed or merged is replaced); then
the open PR for that branch is updated (title, body), or a new one is created (also after the
previous one was merged or closed). Running the same input twice gives one commit and one PR:
the second run finds the branch's tree identical and the PR's text identical and reports
``unchanged`` (with the PR's url and number), pushing nothing.

``provider: local`` has no API: the pushed branch is the proposal, ``pr_url`` is
``<repo_url>/tree/<branch>``, ``pr_number`` 0, ``pr-created`` when the branch was new.

Message template: ``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` is a Python ``str.format`` string over
these fields (unknown fields are a ConfigError, checked before any I/O); the PR title is the
message's first line, and the PR body is imagebump's own Markdown summary:

``subject``      the default first line (``imagebump(ENV): NAME OLD → NEW in PATH``)
``details``      the default body (image, tag and digest old → new, push time, env, overlay, event)
``image``        repository URI of the pushed image (no tag)
``image_name``   the ``images[].name`` set
``old_tag`` ``new_tag`` ``old_digest`` ``new_digest``   ("" when none)
``old`` ``new``  short forms: the tag, else the short digest
``pushed_at``    ISO-8601 push time ("" when unknown)
``env`` ``path`` ``file`` ``repo_url`` ``base_branch`` ``event_id`` ``rule`` ``mode``
``version``      imagebump's version
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import os
import random
import re
import string
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, Field

import imagebump
from steps import forge as forges
from steps import git
from steps import github as gh
from steps._runtime import step_entry
from steps.branches import BRANCH_PREFIX, MAX_BRANCH_LENGTH, branch_name, proposed_entry  # noqa: F401 - re-exported
from steps.errors import ConfigError, KustomizationError, TransientError
from steps.kustomize import get_image, set_image
from steps.models import ImagesEntry, Plan, Target

log = logging.getLogger(__name__)

Action = Literal["committed", "pr-created", "pr-updated", "unchanged"]

AUTHOR_NAME_ENV = "IMAGEBUMP_GIT_AUTHOR_NAME"
AUTHOR_EMAIL_ENV = "IMAGEBUMP_GIT_AUTHOR_EMAIL"
TEMPLATE_ENV = "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE"
PUSH_ATTEMPTS_ENV = "IMAGEBUMP_PUSH_ATTEMPTS"
DEFAULT_AUTHOR_NAME = "imagebump"
DEFAULT_AUTHOR_EMAIL = "imagebump@users.noreply.github.com"
DEFAULT_TEMPLATE = "{subject}\n\n{details}"
DEFAULT_PUSH_ATTEMPTS = 10

TEMPLATE_FIELDS = (
    "subject",
    "details",
    "image",
    "image_name",
    "old_tag",
    "new_tag",
    "old_digest",
    "new_digest",
    "old",
    "new",
    "pushed_at",
    "env",
    "path",
    "file",
    "repo_url",
    "base_branch",
    "event_id",
    "rule",
    "mode",
    "version",
)


class CommitPrOutput(BaseModel):
    action: Action
    commit_sha: str = ""
    pr_url: str = ""
    pr_number: int = 0
    branch: str = ""
    reason: str = ""
    seconds_since_push: str = Field(
        default="", description="seconds from the image's ECR push to the end of this step; '' if unknown"
    )


# ============================================================================ pure core


@dataclass(frozen=True)
class Settings:
    """commit-pr's runtime configuration (environment), validated before any I/O."""

    author_name: str = DEFAULT_AUTHOR_NAME
    author_email: str = DEFAULT_AUTHOR_EMAIL
    template: str = DEFAULT_TEMPLATE
    push_attempts: int = DEFAULT_PUSH_ATTEMPTS

    @property
    def author(self) -> str:
        return f"{self.author_name} <{self.author_email}>"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        """Read and validate. Raises ConfigError naming the variable and the fix."""
        env = dict(os.environ if env is None else env)
        name = env.get(AUTHOR_NAME_ENV) or DEFAULT_AUTHOR_NAME
        email = env.get(AUTHOR_EMAIL_ENV) or DEFAULT_AUTHOR_EMAIL
        if re.search(r"[<>\n\r]", name) or not name.strip():
            raise ConfigError(f"{AUTHOR_NAME_ENV}={name!r} is not a usable author name (no <, >, newlines)")
        if not re.fullmatch(r"[^\s<>@]+@[^\s<>@]+", email):
            raise ConfigError(f"{AUTHOR_EMAIL_ENV}={email!r} is not an e-mail address like bot@example.com")
        template = env.get(TEMPLATE_ENV) or DEFAULT_TEMPLATE
        validate_template(template)
        raw_attempts = env.get(PUSH_ATTEMPTS_ENV) or str(DEFAULT_PUSH_ATTEMPTS)
        try:
            attempts = int(raw_attempts)
        except ValueError:
            attempts = 0
        if not 1 <= attempts <= 50:
            raise ConfigError(f"{PUSH_ATTEMPTS_ENV}={raw_attempts!r} must be a whole number from 1 to 50")
        return cls(name.strip(), email, template, attempts)


def validate_template(template: str) -> None:
    """Refuse a message template with unknown fields or bad syntax (ConfigError, lists the known ones)."""
    known = ", ".join(TEMPLATE_FIELDS)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(
            f"{TEMPLATE_ENV} is not a valid str.format template ({exc}); fields: {known}"
        ) from None
    for _literal, field_name, _spec, _conv in parsed:
        if field_name is None:
            continue
        root = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        if root == "" or root.isdigit():
            raise ConfigError(
                f"{TEMPLATE_ENV} uses a positional field {{{field_name}}}; name one of: {known}"
            )
        if root not in TEMPLATE_FIELDS:
            raise ConfigError(f"{TEMPLATE_ENV} uses unknown field {{{root}}}; known fields: {known}")
    try:
        template.format(**{f: "x" for f in TEMPLATE_FIELDS})
    except (ValueError, KeyError, IndexError, AttributeError) as exc:
        raise ConfigError(f"{TEMPLATE_ENV} cannot be formatted ({exc}); fields: {known}") from None
    if not template.strip():
        raise ConfigError(f"{TEMPLATE_ENV} is empty; leave it unset for the default")


def _short_digest(digest: str | None) -> str:
    if not digest:
        return ""
    algo, _, hexpart = digest.partition(":")
    return f"{algo}:{hexpart[:12]}" if hexpart else digest[:19]


def _short(entry: ImagesEntry | None) -> str:
    if entry is None:
        return "(none)"
    return entry.newTag or _short_digest(entry.digest) or "(unset)"


def message_fields(target: Target, plan: Plan, old: ImagesEntry | None, base_branch: str) -> dict[str, str]:
    """Every template field for this change (see the module docstring)."""
    new = plan.new
    pushed = target.pushed_at.isoformat() if target.pushed_at else ""
    env = target.env or ""
    subject = (
        f"imagebump({env or 'default'}): {plan.image_name} {_short(old)} → {_short(new)} in {target.path}"
    )

    def arrow(a, b):
        return f"{a or '(none)'} → {b or '(none)'}"

    old_tag, old_digest = (old.newTag, old.digest) if old else (None, None)
    lines = [f"Image:    {target.image}"]
    if old_tag or new.newTag:
        lines.append(f"Tag:      {arrow(old_tag, new.newTag)}")
    if old_digest or new.digest:
        lines.append(f"Digest:   {arrow(old_digest, new.digest)}")
    lines += [
        f"Pushed:   {pushed or '(unknown)'}",
        f"Env:      {env or '(none)'}",
        f"Overlay:  {target.path} ({plan.file})",
        f"Event:    {target.event_id or '(none)'}",
        "",
        f"Produced by imagebump {imagebump.__version__} (rule #{target.rule}, mode {target.mode}).",
    ]
    return {
        "subject": subject,
        "details": "\n".join(lines),
        "image": target.image,
        "image_name": plan.image_name,
        "old_tag": (old.newTag or "") if old else "",
        "new_tag": new.newTag or "",
        "old_digest": (old.digest or "") if old else "",
        "new_digest": new.digest or "",
        "old": _short(old),
        "new": _short(new),
        "pushed_at": pushed,
        "env": env,
        "path": target.path,
        "file": plan.file,
        "repo_url": target.repo_url,
        "base_branch": base_branch,
        "event_id": target.event_id or "",
        "rule": str(target.rule),
        "mode": target.mode,
        "version": imagebump.__version__,
    }


def commit_message(template: str, fields: dict[str, str]) -> str:
    """The commit message: the template filled in, trailing whitespace trimmed, one final newline."""
    text = template.format(**fields)
    return "\n".join(line.rstrip() for line in text.strip().splitlines()) + "\n"


def pr_text(fields: dict[str, str], message: str) -> tuple[str, str]:
    """PR title (the message's first line) and a Markdown body a reviewer can act on."""
    title = message.splitlines()[0][:256]
    rows = [
        ("Image", f"`{fields['image']}`"),
        ("Entry", f"`{fields['image_name']}` in `{fields['file']}`"),
        ("Tag", f"`{fields['old_tag'] or '(none)'}` → `{fields['new_tag'] or '(none)'}`"),
        ("Digest", f"`{fields['old_digest'] or '(none)'}` → `{fields['new_digest'] or '(none)'}`"),
        ("Pushed at", fields["pushed_at"] or "(unknown)"),
        ("Environment", fields["env"] or "(none)"),
        ("Overlay", f"`{fields['path']}`"),
        ("Event", f"`{fields['event_id']}`" if fields["event_id"] else "(none)"),
    ]
    table = "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])
    body = (
        f"{table}\n\n"
        "This pull request is kept up to date by imagebump: a newer image for this target "
        "updates this branch and this description; merge it or close it, a later push opens a fresh one.\n\n"
        f"<sub>Produced by imagebump {fields['version']} (rule #{fields['rule']}).</sub>\n"
    )
    return title, body


def _same(current: ImagesEntry, new: ImagesEntry) -> bool:
    """Does the file's entry already say what the plan wants?"""
    if new.newName is not None and current.newName != new.newName:
        return False
    return (current.newTag or None) == (new.newTag or None) and (current.digest or None) == (
        new.digest or None
    )


@dataclass(frozen=True)
class Applied:
    """The outcome of re-applying the plan to the file as it is now."""

    text: str | None  # the new file text; None: nothing to write
    current: ImagesEntry | None
    reason: str


def reapply(text: str, target: Target, plan: Plan) -> Applied:
    """Re-check the file's entry against the plan and re-apply the edit (pure).

    Returns ``Applied.text`` None with a reason when nothing must change.
    """
    current = get_image(text, plan.image_name, source=plan.file)
    if current is not None and _same(current, plan.new):
        return Applied(None, current, f"{plan.file} already sets {plan.image_name} to {_short(plan.new)}")
    if (
        current is not None
        and plan.old is not None
        and not _same(current, plan.old)
        and target.order != "none"
    ):
        now, planned, wanted = _short(current), _short(plan.old), _short(plan.new)
        if target.order == "semver":
            from steps.order import decide

            decision, why = decide(
                current_tag=current.newTag,
                current_digest=current.digest,
                current_pushed_at=None,
                new_tag=plan.new.newTag,
                new_digest=plan.new.digest,
                new_pushed_at=target.pushed_at,
                order=target.order,
            )
            if decision != "update":
                return Applied(
                    None,
                    current,
                    f"{plan.file} changed since the plan ({planned} → {now}); not setting {wanted}: {why}",
                )
        else:
            return Applied(
                None,
                current,
                (
                    f"{plan.file} changed since the plan: {plan.image_name} is now {now} (planned from {planned}); "
                    f"not replacing it with {wanted} without knowing which was pushed later (order: push-time); "
                    "the next push re-plans"
                ),
            )
    new_text = set_image(
        text,
        plan.image_name,
        new_name=plan.new.newName,
        tag=plan.new.newTag,
        digest=plan.new.digest,
        source=plan.file,
    )
    if new_text == text:
        return Applied(None, current, f"{plan.file} already sets {plan.image_name} to {_short(plan.new)}")
    return Applied(new_text, current, "")


def _same_entry(a: ImagesEntry | None, b: ImagesEntry | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.newName, a.newTag or None, a.digest or None) == (b.newName, b.newTag or None, b.digest or None)


def guard_branch(plan: Plan, branch: str, proposed: ImagesEntry | None) -> str | None:
    """May this run replace what the living proposal ``branch`` proposes now? None, or why not (pure).

    ``proposed`` is the branch's entry now (None: no such entry). The same entry as ``plan.new`` is
    no downgrade (the branch is merely rebuilt on the newest base). Otherwise, when edit-kustomize
    looked at this branch (``plan.pr_branch``): a branch that changed since (``plan.pr_entry``) is
    an unknown proposal, never overwritten; a ``current``/``stale`` verdict on it stands. A plan
    that did not look at the branch (older plans, hand-made ones) proceeds as before.
    """
    if proposed is not None and _same(proposed, plan.new):
        return None
    if plan.pr_branch != branch:
        return None
    wanted = _short(plan.new)
    if not _same_entry(proposed, plan.pr_entry):
        seen = _short(plan.pr_entry) if plan.pr_entry else "no proposal"
        return (
            f"{branch} changed since the plan: it now proposes {plan.image_name} {_short(proposed)} "
            f"(the plan saw {seen}); not replacing it with {wanted} without knowing which is newer; "
            "a newer event re-plans"
        )
    if plan.pr_decision in ("current", "stale"):
        return plan.pr_reason or f"{branch} already proposes {_short(proposed)}; not proposing {wanted}"
    return None


def _backoff(attempt: int, base: float = 0.2, cap: float = 5.0) -> float:
    """Jittered exponential backoff ("full jitter" over [base, base·2^attempt], capped)."""
    return random.uniform(base, min(cap, base * (2**attempt)))


def _check_input(target: Target, plan: Plan) -> str:
    """Validate what the runner's models cannot; return the file path inside the repository."""
    file = PurePosixPath(plan.file)
    if file.is_absolute() or ".." in file.parts or not plan.file.strip():
        raise ConfigError(f"plan.file {plan.file!r} must be a relative path inside the repository")
    gh.parse_repo_url(target.repo_url)  # https://HOST/OWNER/REPO, no credentials
    return str(file)


# ============================================================================ I/O


def _resolve_base(target: Target, plan: Plan, auth: "git.GitAuth") -> str:
    return target.base_branch or plan.base_branch or git.default_branch(target.repo_url, auth=auth)


def _credentials(target: Target) -> tuple["git.GitAuth | None", "gh.GitHubSettings | None"]:
    """Read (not yet use) the git token and, when the API is needed, the GitHub settings.

    The API is needed for ``provider: github`` in ``mode: pr``, and to mint a GitHub App
    installation token when no git token is set. Both are validated here, before any I/O.
    """
    auth = git.GitAuth.from_env(write=True, required=False)
    settings = None
    if target.provider == "github" and (target.mode == "pr" or auth is None):
        settings = gh.GitHubSettings.from_env()  # ConfigError naming both ways when neither is set
    if auth is None and not (settings and settings.uses_app):
        git.GitAuth.from_env(write=True, required=True)  # raises the "no git token" ConfigError
    return auth, settings


def _read(repo: "git.ClonedRepo", plan: Plan, target: Target, base: str) -> str:
    text = repo.read(plan.file)
    if text is None:
        raise KustomizationError(
            f"{plan.file} does not exist on {base} of {target.repo_url} any more (moved or deleted since "
            "the plan?); fix the rule's path"
        )
    return text


def _commit_mode(
    target: Target, plan: Plan, settings: Settings, auth: "git.GitAuth", base: str, workdir: Path
) -> CommitPrOutput:
    repo = git.clone(
        target.repo_url,
        workdir / "repo",
        branch=base,
        paths=(str(PurePosixPath(plan.file).parent),),
        auth=auth,
    )
    for attempt in range(1, settings.push_attempts + 1):
        applied = reapply(_read(repo, plan, target, base), target, plan)
        if applied.text is None:
            return CommitPrOutput(action="unchanged", reason=applied.reason, commit_sha=repo.head())
        repo.write(plan.file, applied.text)
        fields = message_fields(target, plan, applied.current, base)
        sha = repo.commit(
            commit_message(settings.template, fields), settings.author_name, settings.author_email
        )
        if sha is None:  # the editor changed bytes git does not see (cannot happen; be safe)
            return CommitPrOutput(action="unchanged", reason=f"{plan.file}: no difference to commit")
        try:
            repo.push(f"HEAD:refs/heads/{base}")
        except git.PushRejected as exc:
            if attempt == settings.push_attempts:
                raise TransientError(
                    f"push to {base} of {target.repo_url} lost the race {attempt} times (last: {exc}); "
                    "the step will be retried"
                ) from None
            delay = _backoff(attempt)
            log.info(
                "push to %s rejected (non-fast-forward), attempt %d/%d; re-applying on the new base in %.2fs",
                base,
                attempt,
                settings.push_attempts,
                delay,
            )
            time.sleep(delay)
            repo.fetch_and_reset(base)
            continue
        log.info("committed %s to %s: %s", sha[:12], base, fields["subject"])
        return CommitPrOutput(action="committed", commit_sha=sha, reason=fields["subject"])
    raise AssertionError("unreachable")


def _tree(repo: "git.ClonedRepo", rev: str) -> str:
    return repo.git("rev-parse", f"{rev}^{{tree}}").stdout.strip()


@dataclass(frozen=True)
class _Proposal:
    """The branch as this run left it."""

    sha: str
    existed: bool  # the branch was on the remote before this run
    pushed: bool  # this run moved it
    fields: dict[str, str]
    message: str


class _OpenPr:
    """The open pull request of the branch: looked up once per attempt (github), or the branch itself (local)."""

    def __init__(self, target: Target, forge: "forges.GitHubForge | None", branch: str, base: str) -> None:
        self.local = forges.LocalForge(target.repo_url)
        self.forge, self.branch, self.base = forge, branch, base
        self._looked = False
        self._found: forges.PullRequest | None = None

    def __call__(self) -> "forges.PullRequest | None":
        """Only asked when the branch exists on the remote."""
        if self.forge is None:
            return forges.PullRequest(
                number=0, url=self.local.url(self.branch), state="open", head=self.branch, base=self.base
            )
        if not self._looked:
            self._found, self._looked = self.forge.find_open_pr(self.branch, self.base), True
        return self._found

    def forget(self) -> None:
        self._looked, self._found = False, None


def _propose(
    repo: "git.ClonedRepo",
    target: Target,
    plan: Plan,
    settings: Settings,
    base: str,
    branch: str,
    open_pr: _OpenPr,
) -> "_Proposal | CommitPrOutput":
    """Build the branch's one commit on the newest base and force-push it with a lease.

    Before pushing, a living proposal on the branch (its pull request is open; for ``provider:
    local`` the branch exists) is re-checked with :func:`guard_branch`: never overwrite a newer or
    unknown proposal. A branch whose pull request was closed or merged is no proposal: replaced.
    A lost lease (someone moved the branch meanwhile) re-fetches the base and tries again, like
    ``mode: commit``. Returns the outcome, or an ``unchanged`` output when nothing is to propose.
    """
    for attempt in range(1, settings.push_attempts + 1):
        open_pr.forget()
        applied = reapply(_read(repo, plan, target, base), target, plan)
        if applied.text is None:
            return CommitPrOutput(action="unchanged", reason=applied.reason, branch=branch)
        repo.write(plan.file, applied.text)
        fields = message_fields(target, plan, applied.current, base)
        message = commit_message(settings.template, fields)
        sha = repo.commit(message, settings.author_name, settings.author_email)
        if sha is None:
            return CommitPrOutput(
                action="unchanged", reason=f"{plan.file}: no difference to commit", branch=branch
            )
        remote_sha = repo.fetch(branch)  # what the lease expects (None: the branch must not exist)
        if remote_sha and _tree(repo, remote_sha) == _tree(repo, "HEAD"):
            # The branch already proposes exactly this tree on this base: no new commit.
            return _Proposal(remote_sha, True, False, fields, message)
        living = open_pr() if remote_sha else None
        if remote_sha and living is not None:
            why = guard_branch(plan, branch, proposed_entry(repo, remote_sha, plan.file, plan.image_name))
            if why:
                log.info("not updating %s: %s", branch, why)
                return CommitPrOutput(
                    action="unchanged",
                    commit_sha=remote_sha,
                    pr_url=living.url,
                    pr_number=living.number,
                    branch=branch,
                    reason=why,
                )
        try:
            repo.push(f"HEAD:refs/heads/{branch}", force_with_lease=(branch, remote_sha or ""))
            return _Proposal(sha, remote_sha is not None, True, fields, message)
        except git.PushRejected as exc:
            if attempt == settings.push_attempts:
                raise TransientError(
                    f"branch {branch} of {target.repo_url} kept moving ({exc}); retried"
                ) from None
            time.sleep(_backoff(attempt))
            repo.fetch_and_reset(base)
    raise AssertionError("unreachable")


def _pr_mode(
    target: Target,
    plan: Plan,
    settings: Settings,
    auth: "git.GitAuth",
    gh_settings: "gh.GitHubSettings | None",
    base: str,
    workdir: Path,
) -> CommitPrOutput:
    branch = branch_name(target)
    github = (
        None if target.provider == "local" else forges.GitHubForge.for_repo_url(target.repo_url, gh_settings)
    )
    open_pr = _OpenPr(target, github, branch, base)
    repo = git.clone(
        target.repo_url,
        workdir / "repo",
        branch=base,
        paths=(str(PurePosixPath(plan.file).parent),),
        auth=auth,
    )
    proposal = _propose(repo, target, plan, settings, base, branch, open_pr)
    if isinstance(proposal, CommitPrOutput):
        return proposal
    sha, fields = proposal.sha, proposal.fields
    title, body = pr_text(fields, proposal.message)
    if github is None:
        forge: forges.Forge = forges.LocalForge(target.repo_url, {branch} if proposal.existed else set())
        existing = forge.find_open_pr(branch, base)
    else:
        forge = github
        existing = open_pr()  # looked up before the push when the branch existed, else now
    if existing is not None:
        # LocalForge knows no PR text: the branch is all there is.
        same_text = isinstance(forge, forges.LocalForge) or (
            existing.title == title and existing.body == body
        )
        if not proposal.pushed and same_text:
            return CommitPrOutput(
                action="unchanged",
                commit_sha=sha,
                pr_url=existing.url,
                pr_number=existing.number,
                branch=branch,
                reason=f"{branch} and its pull request already propose this change",
            )
        pr = forge.update_pr(existing.number, title=title, body=body)
        action: Action = "pr-updated"
    else:
        try:
            pr = forge.create_pr(head=branch, base=base, title=title, body=body)
            action = "pr-created"
        except forges.NoCommitsBetween as exc:
            return CommitPrOutput(action="unchanged", commit_sha=sha, branch=branch, reason=str(exc))
        except forges.PullRequestExists:
            # A concurrent run (or a retried POST that did land) opened it: adopt it.
            found = forge.find_open_pr(branch, base)
            if found is None:
                raise TransientError(
                    f"GitHub says a PR for {branch} exists but none is open; retried"
                ) from None
            pr = forge.update_pr(found.number, title=title, body=body)
            action = "pr-updated"
    forge.add_labels(pr.number, list(target.labels))
    forge.request_reviewers(pr.number, list(target.reviewers))
    log.info("%s %s for %s", action, pr.url or branch, fields["subject"])
    return CommitPrOutput(
        action=action,
        commit_sha=sha,
        pr_url=pr.url,
        pr_number=pr.number,
        branch=branch,
        reason=fields["subject"],
    )


def land(target: Target, plan: Plan) -> CommitPrOutput:
    """Land ``plan`` for ``target``: commit to the base branch, or keep one living PR.

    The step's body (``run`` adds the runner's output files and error → exit-code mapping).

    Raises:
        ConfigError: bad settings or input, the file or image is gone (never retried).
        PermissionDeniedError: the remote or GitHub refused for lack of rights (never retried).
        TransientError: lost push races, network trouble, 5xx, rate limits (retried by Argo).
    """
    settings = Settings.from_env()
    _check_input(target, plan)
    if not plan.changed:
        return CommitPrOutput(
            action="unchanged",
            reason=plan.reason or "the plan changes nothing",
            branch=branch_name(target) if target.mode == "pr" else "",
        )
    auth, gh_settings = _credentials(target)
    if auth is None:
        assert gh_settings is not None
        auth = git.GitAuth(gh.installation_token(gh_settings))  # the App's token pushes too
    base = _resolve_base(target, plan, auth)
    with tempfile.TemporaryDirectory(prefix="imagebump-commit-pr-") as tmp:
        if target.mode == "commit":
            return _commit_mode(target, plan, settings, auth, base, Path(tmp))
        return _pr_mode(target, plan, settings, auth, gh_settings, base, Path(tmp))


@step_entry
def run(target: Target, plan: Plan) -> CommitPrOutput:
    """The commit-pr step: :func:`land` under the step runtime."""
    output = land(target, plan)
    if target.pushed_at is not None:
        pushed = target.pushed_at if target.pushed_at.tzinfo else target.pushed_at.replace(tzinfo=UTC)
        elapsed = (datetime.now(UTC) - pushed).total_seconds()
        output.seconds_since_push = f"{max(elapsed, 0.0):.3f}"
    return output
