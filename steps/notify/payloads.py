"""The JSON body each kind of destination expects, for one :class:`~steps.notify.decide.Message`.

- ``slack``: an incoming webhook's ``{"text": …}`` (Slack's mrkdwn; api.slack.com/messaging/webhooks).
- ``teams``: a Workflows/incoming-webhook ``message`` with one Adaptive Card (a title and a
  FactSet of the fields; learn.microsoft.com, "Create incoming webhooks with Workflows").
- ``webhook``: imagebump's own JSON, signed (:mod:`steps.notify.signature`).

Pure; the destination's secrets are never part of a body.
"""

from __future__ import annotations

import json
from typing import Any

from steps.notify.decide import Message

KINDS = ("slack", "teams", "webhook")


def _line(message: Message) -> str:
    return f"imagebump: {message.title} — {message.target}"


def slack_escape(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` escaped as Slack documents
    (api.slack.com/reference/surfaces/formatting#escaping). Unescaped, data such as a git author's
    ``Ann <!channel>`` or a hold reason's ``<http://…|click>`` would ping a channel or make a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
                    "text": _line(message),
                    "weight": "Bolder",
                    "wrap": True,
                    **({"color": "Attention"} if message.alarm else {}),
                },
                {
                    "type": "FactSet",
                    "facts": [{"title": k, "value": v} for k, v in message.fields.items() if v != ""],
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
