"""GitHub as a destination: a comment on imagebump's pull request when something about it changes,
and the commit status ``imagebump/live`` on imagebump's commits.

- Comments (:data:`COMMENTS`): ``held`` (a person's rollback or hold marker stands), ``live-before``
  (the image is live in the environment before this one) and ``blocked`` (the promotion gate
  holds it back), on the pull request the outcome names (field ``pr``: its number or URL; else the
  one open from the target's proposal branch, field ``branch``, into ``base`` when known), through
  :meth:`steps.forge.forges.Forge.comment_once` with a hidden marker per outcome and event:
  a resubmit finds the marker and comments nothing.
- Statuses (:data:`STATES`): ``pending`` on the commit a push produced while it is verified
  (``committed``/``pr-opened``/``pr-updated`` with ``verifying: true``), ``success`` when
  ``live``, ``failure`` on ``mismatch`` or ``timeout``, ``success`` on ``idle`` and ``error`` when
  verify-live ended without a verdict (``not-verified``: superseded, no Application, a manual
  sync), so no status stays ``pending``; on the commit the outcome names (field ``commit``),
  context ``imagebump/live``.

An outcome with nothing for GitHub (no ``pr``/``commit``, another kind) is not a GitHub message.
The repository is the outcome's ``repo`` field (the target's ``repo_url``); the credentials are
commit-pr's (``IMAGEBUMP_GIT_TOKEN`` or the GitHub App), never in the notifications file.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from steps.notify.decide import Message
from steps.notify.payloads import one_line

KIND = "github"
CONTEXT = "imagebump/live"
COMMENTS = frozenset({"held", "live-before", "blocked"})
STATES = {
    "committed": "pending",
    "pr-opened": "pending",
    "pr-updated": "pending",
    "live": "success",
    "mismatch": "failure",
    "timeout": "failure",
    "idle": "success",  # Argo CD synced the commit and is Healthy; no Pod runs the image now
    "not-verified": "error",  # superseded, no Application, a manual sync, off: never proven either way
}
_PR = re.compile(r"(?:/pull/)?(\d+)$")

ForgeFor = Callable[[str], object]  # repo_url → a steps.forge.forges.Forge


def marker(message: Message) -> str:
    """The hidden line that makes a comment once per outcome of one event and target."""
    return f"<!-- imagebump:notify:{message.kind}:{message.key[:20]} -->"


def pr_number(value: str) -> int | None:
    m = _PR.search(value.strip()) if value else None
    return int(m.group(1)) if m else None


def applies(message: Message) -> bool:
    """Whether GitHub has anything to show for ``message``."""
    fields = message.fields
    if not fields.get("repo"):
        return False
    if message.kind in COMMENTS:
        return pr_number(fields.get("pr", "")) is not None or bool(fields.get("branch"))
    if message.kind in STATES and fields.get("commit"):
        return STATES[message.kind] != "pending" or fields.get("verifying") == "true"
    return False


def description(message: Message) -> str:
    f = message.fields
    if message.kind == "live":
        return f"live in {f.get('overlay', '')} after {f.get('seconds', '?')}s"
    if message.kind in ("mismatch", "timeout"):
        return f"{message.kind}: {f.get('application', '') or f.get('overlay', '')} runs {f.get('running_image', '?')}"
    if message.kind == "idle":
        return (
            f"idle: {f.get('application', '') or f.get('overlay', '')} synced and Healthy, no Pod runs it now"
        )
    if message.kind == "not-verified":
        return f"not verified ({f.get('result', '')}): {f.get('message', '')}"[:140]
    return f"verifying that {f.get('overlay', '')} runs it"


_MENTION = re.compile(r"@(?=[A-Za-z0-9_-])")
ZWJ = "\u200d"


def neutral(text: str) -> str:
    """``text`` from data, made harmless in a comment: an ``@mention`` (a user or a team) gets a
    zero-width joiner after its ``@`` so GitHub notifies nobody, and ``<!--`` is written ``&lt;!--``
    so no data can open a hidden comment, such as a forged :func:`marker` that ``comment_once``
    would take for ours; on one line (:func:`steps.notify.payloads.one_line`), so a multi-line value
    starts no list item of its own."""
    return _MENTION.sub("@" + ZWJ, one_line(text).replace("<!--", "&lt;!--"))


def comment_body(message: Message) -> str:
    facts = "\n".join(
        f"- **{neutral(k)}**: {neutral(v)}"
        for k, v in message.fields.items()
        if v and k not in ("repo", "pr")
    )
    return f"{marker(message)}\n**imagebump: {message.title}** — {neutral(message.target)}\n\n{facts}\n"


def send(message: Message, forge_for: ForgeFor) -> str:
    """Comment or set the status; "" when done (or already there), else what went wrong."""
    forge = forge_for(message.fields["repo"])
    if message.kind in COMMENTS:
        number = pr_number(message.fields.get("pr", ""))
        if number is None:  # a held target's PR: the one open from its proposal branch
            found = forge.find_open_pr(message.fields["branch"], message.fields.get("base", ""))  # type: ignore[attr-defined]
            if found is None:
                return ""  # no open pull request: nothing to comment on
            number = found.number
        # what GitHub refuses is raised (counted failed, the claim given back); a marker found is
        # "already sent"
        forge.comment_once(number, marker(message), comment_body(message), strict=True)  # type: ignore[attr-defined]
        return ""
    took = forge.set_status(  # type: ignore[attr-defined]
        message.fields["commit"],
        state=STATES[message.kind],
        context=CONTEXT,
        description=description(message),
        target_url=next(
            (
                u
                for u in (message.fields.get("link", ""), message.fields.get("workflow_link", ""))
                if u.startswith("https://")
            ),
            None,
        ),
        strict=True,
    )
    return "" if took else "GitHub refused the commit status"


def default_forge_for(repo_url: str) -> object:
    from steps.forge.pull_requests import GitHubForge

    return GitHubForge.for_repo_url(repo_url)
