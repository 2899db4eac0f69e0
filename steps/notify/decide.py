"""Which outcome becomes which message for which destination: pure, no I/O.

An :class:`Outcome` is one thing that happened to one target of one event (or to one backup run).
:func:`decide` turns it into one :class:`Message` per destination it is routed to, each with an
idempotency key from the event, the target, the outcome and the destination: a retried step, a
redelivered event or a resubmitted Workflow yields the same keys, and the ledger
(:mod:`steps.notify.ledger`) sends each key once. No-ops (``current``, ``stale``, ``unchanged``)
yield nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from steps.domain.errors import NotifyConfigError

#: Outcomes and the fields each message names (issue 36's catalogue; docs/notifications.md).
FIELDS: dict[str, tuple[str, ...]] = {
    "committed": ("image", "overlay", "link"),
    "pr-opened": ("image", "overlay", "link"),
    "pr-updated": ("image", "overlay", "link"),
    "held": ("image", "overlay", "by", "commit", "reason"),
    "live-before": ("image", "overlay", "environment", "pr"),
    "blocked": ("image", "overlay", "reason", "pr"),
    "pinned": ("image", "overlay", "reason"),
    "live": ("image", "overlay", "seconds"),
    "mismatch": ("application", "revision", "git_image", "running_image"),
    "timeout": ("image", "overlay", "application"),
    "idle": ("image", "overlay", "application"),
    "not-verified": ("image", "overlay", "result"),
    "failed": ("image", "overlay", "workflow_link"),
    "backup-failed": ("workflow_link",),
    "backup-suspect": ("archive", "objects", "previous_objects"),
    "restore-finished": ("archive", "objects"),
    "restore-halfway": ("archive", "applied", "remaining"),
}
#: Outcomes that are alarms: routed to the ``alarms`` destinations when those are configured.
ALARMS = frozenset({"mismatch", "timeout", "failed", "backup-failed", "backup-suspect", "restore-halfway"})
#: Decisions that say nothing happened: never a message.
NOOPS = frozenset({"current", "stale", "unchanged", "skipped", ""})
#: Outcomes only a ``github`` destination acts on (they end ``imagebump/live``'s ``pending``); the
#: team's channels hear nothing of them: verify-live ended without a verdict worth a message.
GITHUB_ONLY = frozenset({"idle", "not-verified"})
#: Outcomes that end a commit's ``imagebump/live`` (every one of :data:`steps.notify.github.STATES`
#: but the pending ones): each also goes to every ``github`` destination the commit's pending went to,
#: whatever the routing says, so a ``pending`` never stays (docs/notifications.md).
STATUS_ENDS = frozenset({"live", "mismatch", "timeout", "idle", "not-verified"})
#: The outcome that sets the pending status (notify-verifying's; ``pr-opened``/``pr-updated`` route alike).
PENDING = "committed"

_TITLES = {
    "committed": "committed",
    "pr-opened": "pull request opened",
    "pr-updated": "pull request updated",
    "held": "held (a person's decision stands)",
    "pinned": "pinned (newName names another repository)",
    "live-before": "live in the environment before",
    "blocked": "blocked by the promotion gate",
    "live": "live",
    "mismatch": "MISMATCH: a synced Application runs another image",
    "timeout": "TIMEOUT: not live before the deadline",
    "idle": "synced and healthy, no Pod runs it now",
    "not-verified": "not verified",
    "failed": "FAILED for good (after its retries)",
    "backup-failed": "Argo CD backup FAILED",
    "backup-suspect": "Argo CD backup SUSPECT: the archive shrank",
    "restore-finished": "restore finished",
    "restore-halfway": "restore STOPPED HALFWAY",
}


@dataclass(frozen=True)
class Outcome:
    """One outcome of one target of one event. ``event``: the event id (or the Workflow's name for
    a manual run, the backup run's name); ``target``: ``repo/path`` or the backup bucket;
    ``rule_notify``: the rule's ``notify:`` destination names (empty: the default)."""

    kind: str
    event: str
    target: str
    fields: Mapping[str, str] = field(default_factory=dict)
    rule_notify: tuple[str, ...] = ()


@dataclass(frozen=True)
class Routing:
    """Where messages go. ``default``: destinations for every outcome no rule routes; ``alarms``:
    if set, alarms go there instead of the default or the rule's; ``others``: if set, every
    non-alarm goes there instead of the default; ``github``: the destinations of type ``github``
    (a status's end follows its pending there, :data:`STATUS_ENDS`)."""

    default: tuple[str, ...] = ()
    alarms: tuple[str, ...] | None = None
    others: tuple[str, ...] | None = None
    github: tuple[str, ...] = ()


@dataclass(frozen=True)
class Message:
    """One message for one destination."""

    destination: str
    key: str
    kind: str
    alarm: bool
    title: str
    event: str
    target: str
    fields: Mapping[str, str]


def idempotency_key(event: str, target: str, kind: str, destination: str) -> str:
    """The key sent at most once: the same for every retry, redelivery and resubmit of an outcome."""
    import hashlib  # here: an exit handler with nothing to send never loads OpenSSL's hashes (issue 33)

    raw = "\x1f".join((event, target, kind, destination)).encode()
    return hashlib.sha256(raw).hexdigest()


def destinations_for(outcome: Outcome, routing: Routing) -> tuple[str, ...]:
    """The destination names an outcome goes to (deduplicated, in order). An outcome that ends
    ``imagebump/live`` also goes to every ``github`` destination its commit's pending went to (an
    alarm routed to ``alarms`` would otherwise leave that status pending for ever)."""
    names = _routed(outcome, routing)
    if outcome.kind in STATUS_ENDS and routing.github:
        pending = _routed(replace(outcome, kind=PENDING), routing)
        names += tuple(n for n in pending if n in routing.github)
    return tuple(dict.fromkeys(names))


def _routed(outcome: Outcome, routing: Routing) -> tuple[str, ...]:
    if outcome.kind in ALARMS and routing.alarms is not None:
        names: Sequence[str] = routing.alarms
    elif outcome.rule_notify:
        names = outcome.rule_notify
    elif outcome.kind not in ALARMS and routing.others is not None:
        names = routing.others
    else:
        names = routing.default
    return tuple(names)


def decide(outcome: Outcome, routing: Routing, known: Sequence[str] | None = None) -> list[Message]:
    """The messages for ``outcome``: none for a no-op; one per destination otherwise.

    ``known``: the configured destination names; a routed name not among them is refused.
    """
    if outcome.kind in NOOPS:
        return []
    if outcome.kind not in FIELDS:
        raise NotifyConfigError(f"unknown outcome {outcome.kind!r} (known: {', '.join(FIELDS)})")
    names = destinations_for(outcome, routing)
    if known is not None:
        unknown = [n for n in names if n not in known]
        if unknown:
            raise NotifyConfigError(
                f"notify destination(s) {', '.join(map(repr, unknown))} not configured "
                f"(configured: {', '.join(known) or 'none'}); add them to the notifications file"
            )
    wanted = FIELDS[outcome.kind]
    fields = {k: str(outcome.fields.get(k, "")) for k in wanted}
    fields.update({k: str(v) for k, v in outcome.fields.items() if k not in fields})
    return [
        Message(
            destination=name,
            key=idempotency_key(outcome.event, outcome.target, outcome.kind, name),
            kind=outcome.kind,
            alarm=outcome.kind in ALARMS,
            title=_TITLES[outcome.kind],
            event=outcome.event,
            target=outcome.target,
            fields=fields,
        )
        for name in names
    ]
