"""The JSON body each kind of destination expects, for one :class:`~steps.notify.decide.Message`.

- ``slack``: an incoming webhook's ``{"text": …}`` (Slack's mrkdwn; api.slack.com/messaging/webhooks).
- ``teams``: a Workflows/incoming-webhook ``message`` with one Adaptive Card (a title and a
  FactSet of the fields; learn.microsoft.com, "Create incoming webhooks with Workflows").
- ``webhook``: imagebump's own JSON, signed (:mod:`steps.notify.signature`).

Pure; the destination's secrets are never part of a body.
"""

from __future__ import annotations

import json
import re
from typing import Any

from steps.notify.decide import Message

KINDS = ("slack", "teams", "webhook")


def _line(message: Message) -> str:
    return f"imagebump: {message.title} — {message.target}"


#: Line breaks (``str.splitlines``'s set): in data, each would start a line of its own.
_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")


def one_line(text: str) -> str:
    """``text`` from data on one line (every run of line breaks one space): a multi-line error or
    hold reason can never start a line that looks like one of ours (``• *commit*: …`` in Slack, a
    list item in Teams or in a GitHub comment)."""
    return _BREAKS.sub(" ", text)


def slack_escape(text: str) -> str:
    """``text`` as Slack shows it literally, on one line (:func:`one_line`): ``&``, ``<`` and ``>``
    escaped as Slack documents (api.slack.com/reference/surfaces/formatting#escaping). Unescaped,
    data such as a git author's ``Ann <!channel>`` or a hold reason's ``<http://…|click>`` would
    ping a channel or make a link."""
    return one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


#: The characters of the Markdown that Adaptive Cards render (a CommonMark subset: ``**bold**``,
#: ``_italic_``, ``[title](url)``, lists; learn.microsoft.com/adaptive-cards/authoring-cards/text-features),
#: escaped with a backslash as CommonMark escapes any ASCII punctuation (spec.commonmark.org, 2.4).
_TEAMS_MARKDOWN = re.compile(r"([\\*_\[\]`~&<])")  # & an entity (&amp;), < an autolink
#: What would start a list, a heading, a quote or a rule at the start of a text block.
_TEAMS_LEADING = re.compile(r"[-+#>=]|[0-9]+(?=[.)])")


def teams_escape(text: str) -> str:
    """``text`` as an Adaptive Card shows it literally, on one line: Teams renders Markdown in a
    ``TextBlock`` and in a ``FactSet``'s titles and values (learn.microsoft.com/microsoftteams/platform/
    task-modules-and-cards/cards/cards-format), so data such as a hold reason's ``[click](http://…)``
    would make a link and ``- a`` a list. Leading and trailing blanks are dropped (four leading
    spaces would make a code block)."""
    escaped = _TEAMS_MARKDOWN.sub(r"\\\1", one_line(text).strip(" \t"))
    leading = _TEAMS_LEADING.match(escaped)
    if leading:  # `\- a`, `\# a`, `1\. a`
        at = leading.end() if leading.group()[0].isdigit() else 0
        escaped = escaped[:at] + "\\" + escaped[at:]
    return escaped


def body(kind: str, message: Message) -> dict[str, Any]:
    """The JSON object sent to a destination of ``kind``."""
    if kind == "slack":
        esc = slack_escape  # every text built from data; the title and the layout are ours
        facts = "\n".join(f"• *{esc(k)}*: {esc(v)}" for k, v in message.fields.items() if v != "")
        emoji = ":rotating_light: " if message.alarm else ""
        return {"text": f"{emoji}{esc(_line(message))}\n{facts}"}
    if kind == "teams":
        card = {
            "type": "AdaptiveCard",
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4",
            "body": [
                {
                    "type": "TextBlock",
                    "text": teams_escape(_line(message)),
                    "weight": "Bolder",
                    "wrap": True,
                    **({"color": "Attention"} if message.alarm else {}),
                },
                {
                    "type": "FactSet",
                    "facts": [
                        {"title": teams_escape(k), "value": teams_escape(v)}
                        for k, v in message.fields.items()
                        if v != ""
                    ],
                },
            ],
        }
        return {
            "type": "message",
            "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
        }
    if kind == "webhook":
        return {
            "id": message.key,
            "outcome": message.kind,
            "alarm": message.alarm,
            "title": message.title,
            "event": message.event,
            "target": message.target,
            "fields": dict(message.fields),
        }
    raise ValueError(f"unknown destination type {kind!r} (known: {', '.join(KINDS)})")


def encode(kind: str, message: Message) -> bytes:
    """The exact bytes sent (and signed, for a webhook)."""
    return json.dumps(body(kind, message), sort_keys=True, separators=(",", ":")).encode()
