"""reconcile's report: one row per target (:class:`TargetState`), the gauge's counts, the table.

Pure. :func:`render_table` is the human view ``imagebump reconcile`` prints on stderr;
:func:`count_states` the ``counts`` output (every state for every env, zeros too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from steps.domain.contract import Contract
from steps.domain.errors import ConfigError, TransientError
from steps.domain.models import short_ref
from steps.domain.terminal import for_terminal
from steps.reconcile.decide import STATES, State, summary_states

#: Why an ``unknown`` target could not be read: ``transient`` (Git or ECR failing for now: the next
#: reconcile tries again), ``refused`` (a token or IAM policy refused the read, or the configuration is
#: wrong: it needs a fix), ``failed`` (anything else). ``""``: not an error (every other state, and
#: the unknowns that are only reported: ``order: none``, a missing overlay or images entry).
ErrorKind = Literal["", "transient", "refused", "failed"]
ERROR_KINDS: tuple[str, ...] = ("refused", "transient", "failed")
#: commit-pr's actions that change something: what reconcile's counter of updates counts (a target
#: found current after all, or ``unchanged`` because an event got there first, is not an update).
UPDATED_ACTIONS: tuple[str, ...] = ("committed", "pr-created", "pr-updated")


def error_kind(exc: BaseException) -> ErrorKind:
    """The :data:`ErrorKind` of an exception that left targets unknown."""
    if isinstance(exc, TransientError):
        return "transient"
    if isinstance(exc, ConfigError):  # PermissionDeniedError too: a token or a policy refused
        return "refused"
    return "failed"


class TargetState(Contract, kw_only=True):
    """One target of reconcile: where, what the overlay holds, the newest allowed, and the verdict."""

    repo_url: str
    path: str
    env: str = ""
    #: a values-file target: the Helm values file it edits ('' for an overlay)
    file: str = ""
    #: the overlay's newTag[@digest] ('' when unreadable)
    current: str = ""
    #: the newest allowed image as it would be written
    newest: str = ""
    state: State
    reason: str = ""
    #: unknown only: why the read failed (transient, refused, failed); '' when not an error
    error: ErrorKind = ""
    #: promoteAfter: waiting, blocked or promoted ('' = not gated)
    gate: str = ""
    #: promoteAfter: the environment waited on
    waiting_on: str = ""
    #: waiting: seconds of the soak left
    time_left: int | None = None
    #: blocked: mismatch, degraded, rolled-back, held or superseded
    blocked_reason: str = ""
    #: waiting: not-live, idle, suspended, unhealthy, soaking or hydrated ('' when the gate could not
    #: read the environment or no Application deploys it: the row's reason says which)
    wait_reason: str = ""


class StateCount(Contract, kw_only=True):
    state: State
    env: str
    count: int


def count_states(report: Iterable[TargetState]) -> list[StateCount]:
    """Targets per (state, env), every state listed for every env seen (zeros too: gauges reset)."""
    seen = Counter((t.state, t.env or "none") for t in report)
    envs = sorted({env for _, env in seen})
    return [StateCount(state=s, env=e, count=seen.get((s, e), 0)) for e in envs for s in STATES]


_RANK = {
    s: i
    for i, s in enumerate(
        (
            *(
                "behind",
                "promoted",
                "blocked",
                "unknown",
                "branch-taken",
                "held",
                "waiting",
                "ahead",
                "pinned",
            ),
            *("proposed", "current"),
        )
    )
}


def worst_first(report: Iterable[TargetState]) -> list[TargetState]:
    """Behind, unknown, branch-taken, held, ahead, pinned, proposed, current; by repository and path
    within a state (a state no rank knows goes last)."""
    return sorted(report, key=lambda t: (_RANK.get(t.state, len(_RANK)), t.repo_url, t.path))


def cap_report(report: Sequence[TargetState], limit: int | None) -> tuple[list[TargetState], int]:
    """At most ``limit`` rows, worst first, and how many were left out (None: no cap).

    On a cluster the report is a Workflow output parameter, kept in the Workflow's status (etcd):
    2,000 unknown targets with their reasons would approach a megabyte. The counts output keeps
    every target; the rows left out are named by count in reconcile's ``reason``.
    """
    if limit is None or len(report) <= limit:
        return list(report), 0
    return worst_first(report)[:limit], len(report) - limit


def render_table(report: Sequence[TargetState]) -> str:
    """The human view (stderr): one line per target, worst first, then a count per state.

    Every cell is what Git, ECR or a person wrote: shown through :func:`for_terminal`.
    """
    rows = worst_first(report)
    head = ("STATE", "ENV", "OVERLAY", "CURRENT", "NEWEST", "REASON")
    lines = [
        tuple(
            for_terminal(cell)
            for cell in (
                t.state,
                t.env or "-",
                f"{t.repo_url}/{t.path}",
                short_ref(t.current) or "-",
                short_ref(t.newest) or "-",
                t.reason,
            )
        )
        for t in rows
    ]
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(5)]
    out = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in [head, *lines]]
    totals = Counter(t.state for t in report)
    out.append(
        f"{len(report)} target(s): " + ", ".join(f"{totals.get(s, 0)} {s}" for s in summary_states(totals))
    )
    return "\n".join(line.rstrip() for line in out) + "\n"
