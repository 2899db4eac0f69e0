"""Commit-message templating for commit-pr: the fields, the template check, the message, the PR text.

Pure (no I/O). ``IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE`` is a Python ``str.format`` string over
:data:`TEMPLATE_FIELDS` (documented in :mod:`steps.commit_pr.step`); :func:`validate_template` refuses
unknown fields and bad syntax before any I/O (:class:`steps.commit_pr.settings.CommitPrSettings` calls it);
:func:`message_fields` computes every field for one change; :func:`commit_message` fills the
template in and always ends it with imagebump's trailer ``Imagebump-Image: REPO:TAG@DIGEST``
(:func:`steps.domain.intent.trailer`: how a later run tells imagebump's commits from a person's, whatever
the template says); :func:`pr_text` makes the PR's title (the message's first line) and Markdown
body, which ends with the same trailer (a squash merge that takes the PR's description keeps it).
"""

from __future__ import annotations

import re
import string

from steps.domain.errors import ConfigError
from steps.domain.intent import HISTORY_LIMIT, history_trailer, trailer, with_history, with_trailer
from steps.domain.models import ImagesEntry, Plan, Target, entry_ref
from steps.runtime.harness import imagebump_version

TEMPLATE_ENV = "IMAGEBUMP_COMMIT_MESSAGE_TEMPLATE"
DEFAULT_TEMPLATE = "{subject}\n\n{details}"

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


def validate_template(template: str) -> None:
    """Refuse a message template with unknown fields or bad syntax (ConfigError, lists the known ones)."""
    known = ", ".join(TEMPLATE_FIELDS)
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ConfigError(
            f"{TEMPLATE_ENV} is not a valid str.format template ({exc}); fields: {known}",
            reason="template-syntax",
            field=TEMPLATE_ENV,
        ) from None
    for _literal, field_name, _spec, _conv in parsed:
        if field_name is None:
            continue
        root = re.split(r"[.\[]", field_name, maxsplit=1)[0]
        if root == "" or root.isdigit():
            raise ConfigError(
                f"{TEMPLATE_ENV} uses a positional field {{{field_name}}}; name one of: {known}",
                reason="template-positional-field",
                field=TEMPLATE_ENV,
            )
        if root not in TEMPLATE_FIELDS:
            raise ConfigError(
                f"{TEMPLATE_ENV} uses unknown field {{{root}}}; known fields: {known}",
                reason="template-unknown-field",
                field=TEMPLATE_ENV,
            )
    try:
        template.format(**{f: "x" for f in TEMPLATE_FIELDS})
    except (ValueError, KeyError, IndexError, AttributeError) as exc:
        raise ConfigError(
            f"{TEMPLATE_ENV} cannot be formatted ({exc}); fields: {known}",
            reason="template-format",
            field=TEMPLATE_ENV,
        ) from None
    if not template.strip():
        raise ConfigError(
            f"{TEMPLATE_ENV} is empty; leave it unset for the default",
            reason="template-empty",
            field=TEMPLATE_ENV,
        )


def message_fields(target: Target, plan: Plan, old: ImagesEntry | None, base_branch: str) -> dict[str, str]:
    """Every template field for this change (see the module docstring)."""
    new = plan.new
    version = imagebump_version()
    pushed = target.pushed_at.isoformat() if target.pushed_at else ""
    env = target.env or ""
    subject = f"imagebump({env or 'default'}): {plan.image_name} {entry_ref(old)} → {entry_ref(new)} in {target.path}"

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
        f"Produced by imagebump {version} (rule #{target.rule}, mode {target.settings.mode}).",
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
        "old": entry_ref(old),
        "new": entry_ref(new),
        "pushed_at": pushed,
        "env": env,
        "path": target.path,
        "file": plan.file,
        "repo_url": target.repo_url,
        "base_branch": base_branch,
        "event_id": target.event_id or "",
        "rule": str(target.rule),
        "mode": target.settings.mode,
        "version": version,
        "trailer": trailer(target.image, new.newTag, new.digest),
    }


def commit_message(template: str, fields: dict[str, str], history: str = "") -> str:
    """The commit message: the template filled in, trailing whitespace trimmed, imagebump's trailer
    (``fields["trailer"]``) last — then the ``history`` line (:func:`history_line`) when there is
    one — one final newline."""
    text = template.format(**fields)
    message = "\n".join(line.rstrip() for line in text.strip().splitlines()) + "\n"
    message = with_trailer(message, fields["trailer"]) if fields.get("trailer") else message
    return with_history(message, history)


def history_line(file: str, clean_at: str, parent: str) -> str:
    """The ``Imagebump-History`` trailer for a commit of ``file`` made on ``parent``: only when the
    rollback check found only imagebump's commits touching the file at that very commit
    (``clean_at``, :attr:`steps.commit_pr.decide.Applied.clean_at`); "" otherwise."""
    if not clean_at or clean_at != parent:
        return ""
    return history_trailer(HISTORY_LIMIT, parent, file)


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
    if fields.get("trailer"):
        body += f"\n{fields['trailer']}\n"
    return title, body
