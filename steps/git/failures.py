"""What a failed git command means: its (redacted) stderr mapped to :mod:`steps.domain.errors`.

:func:`classify` is pure: a push that lost a race is :class:`~steps.domain.errors.PushRejected`
(transient, retried), a refused push or a rejected token is
:class:`~steps.domain.errors.PermissionDeniedError`, a missing repository or branch is a
:class:`~steps.domain.errors.ConfigError`, network trouble and 5xx are
:class:`~steps.domain.errors.TransientError`, anything else :class:`~steps.domain.errors.GitCommandError`.
An anonymous read the remote refuses names the read-token Secret to create.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from steps.domain.errors import (
    ConfigError,
    GitCommandError,
    ImagebumpError,
    PermissionDeniedError,
    PushRejected,
    TransientError,
)
from steps.git.auth import anonymous_read_fix

__all__ = ["NO_BRANCH", "classify", "describe"]


def describe(args: Sequence[str]) -> str:
    return "git " + " ".join(str(a) for a in args[:3])


_TRANSIENT = re.compile(
    r"returned error: 5\d\d|Could not resolve host|Failed to connect|Connection refused|"
    r"Connection reset|Connection timed out|Operation timed out|timed out|early EOF|"
    r"the remote end hung up unexpectedly|RPC failed|transfer closed|SSL_ERROR|gnutls_handshake|"
    r"Empty reply from server|HTTP/2 stream|unexpected disconnect|Could not read from remote|"
    r"index-pack failed|fetch-pack: invalid index-pack output|Recv failure|Send failure|"
    r"remote: Internal Server Error|Temporary failure|Service Unavailable|Too Many Requests|"
    r"returned error: 429",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"returned error: 401|Authentication failed|could not read Username|could not read Password|"
    r"Invalid username or password|terminal prompts disabled",
    re.IGNORECASE,
)
_FORBIDDEN = re.compile(
    r"returned error: 403|pre-receive hook declined|protected branch|GH006|GH013|"
    r"permission to .* denied|denied to|\[remote rejected\].*\((?!failed to update ref|"
    r"cannot lock ref|incorrect old value)[^)]*\)|You are not allowed to push|"
    r"push declined|insufficient permission",
    re.IGNORECASE,
)
_RACE = re.compile(
    r"non-fast-forward|\(fetch first\)|\(stale info\)|stale info|failed to update ref|"
    r"cannot lock ref|incorrect old value|Updates were rejected because|"
    r"failed to push some refs.*\n.*tip of your current branch is behind",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(
    r"returned error: 404|repository '.*' not found|Repository not found|"
    r"does not appear to be a git repository|not found: did you run git update-server-info",
    re.IGNORECASE,
)
NO_BRANCH = re.compile(r"Remote branch (.+?) not found|couldn't find remote ref (\S+)", re.IGNORECASE)


def _remote_lines(stderr: str, limit: int = 6) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    interesting = [ln for ln in lines if ln.startswith(("remote:", "error:", "fatal:", " !", "!"))]
    picked = (interesting or lines)[-limit:]
    return " | ".join(picked)


def _push_branch(args: Sequence[str]) -> str | None:
    """The destination branch of a ``git push`` (from its last refspec)."""
    if not args or args[0] != "push":
        return None
    specs = [a for a in args[1:] if not a.startswith("-")]
    if len(specs) < 2:
        return None
    dst = specs[-1].lstrip("+").rsplit(":", 1)[-1]
    return dst.removeprefix("refs/heads/")


def classify(
    stderr: str,
    *,
    args: Sequence[str] = (),
    what: str | None = None,
    url: str | None = None,
    returncode: int = 1,
    anonymous: bool = False,
) -> ImagebumpError:
    """Map a failed git command's (redacted) stderr to the imagebump error that says what to do.

    ``anonymous``: the command sent no token to an http(s) remote; a refusal (401, 403, 404) then
    names the read-token Secret to create (:func:`anonymous_read_fix`).
    """
    doing = what or describe(args)
    where = f" ({url})" if url and url not in doing else ""
    detail = _remote_lines(stderr)
    branch = _push_branch(args)
    is_push = bool(args) and args[0] == "push"
    if anonymous and not is_push:
        status = (
            "401"
            if _AUTH.search(stderr)
            else "403"
            if re.search(r"returned error: 403", stderr)
            else "404"
            if _NOT_FOUND.search(stderr)
            else None
        )
        if status is not None:
            return PermissionDeniedError(
                f"{doing}{where}: the remote refused an anonymous read (HTTP {status}): {detail}. "
                + anonymous_read_fix()
            )
    if is_push and _FORBIDDEN.search(stderr) and not _RACE.search(stderr):
        target = f"branch '{branch}'" if branch else "the branch"
        return PermissionDeniedError(
            f"push to {target}{where} was refused by the remote (protected branch, pre-receive "
            f"hook or missing rights): {detail}. A human must grant the token's owner push rights "
            f"to {target}, or use mode: pr for this rule"
        )
    if is_push and _RACE.search(stderr):
        return PushRejected(
            f"push to branch '{branch or '?'}'{where} was rejected because the remote moved on "
            f"(non-fast-forward or stale lease): {detail}; fetch the newest base and retry"
        )
    if _AUTH.search(stderr):
        return PermissionDeniedError(
            f"{doing}{where}: the git token was rejected or is missing (HTTP 401): {detail}. "
            "Set IMAGEBUMP_GIT_TOKEN / IMAGEBUMP_GIT_READ_TOKEN (or *_FILE) to a valid token with "
            "access to this repository"
        )
    if re.search(r"returned error: 403", stderr):
        return PermissionDeniedError(
            f"{doing}{where}: access denied (HTTP 403): {detail}. A human must grant the token's "
            "owner access to this repository" + (" or use mode: pr" if is_push else "")
        )
    if m := NO_BRANCH.search(stderr):
        name = next(g for g in m.groups() if g)
        return ConfigError(
            f"{doing}{where}: branch '{name}' does not exist in the repository; fix baseBranch in "
            "the rule or create the branch"
        )
    if _NOT_FOUND.search(stderr):
        return ConfigError(
            f"{doing}{where}: repository not found (404): {detail}. Check the repository URL in "
            "the rule and that the token can see it"
        )
    if _TRANSIENT.search(stderr):
        return TransientError(f"{doing}{where} failed for a reason that may pass: {detail}; retry later")
    return GitCommandError(f"{doing}{where} failed (exit {returncode}): {detail or 'no output'}")
