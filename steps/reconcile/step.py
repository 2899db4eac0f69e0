"""reconcile: every overlay the rules map an ECR repository to, against the newest image it allows.

Events make imagebump fast; this reconcile makes it complete. A push whose event was lost (a queue
purged, a Sensor outage, a Workflow that failed all its retries) leaves its overlays behind; the
CronWorkflow ``image-reconcile`` runs this step every few minutes and hands the overlays that are
behind to the same ``update-target`` steps an event runs, so every push is reflected within one
reconcile interval.

Reads:

* the rules file at ``$IMAGEBUMP_RULES_FILE`` (default ``/etc/imagebump/rules/rules.yaml``);
* ECR, read-only, through botocore's *adaptive* retry mode and at most ``concurrency`` calls at
  once: ``DescribeRepositories`` once per registry (paginated; ECR cannot filter by prefix, so the
  pages are filtered by each rule's fixed prefix — the repository part before its first ``$n`` —
  before ``$n`` is matched), skipped for rules that name one repository; ``DescribeImages`` once
  per matching repository (paginated): every tag with its digest and push time;
* Git, read-only (``IMAGEBUMP_GIT_READ_TOKEN[_FILE]``, else anonymous): ONE partial
  (``blob:none``), depth-1, sparse clone per Git repository per reconcile run whose cone holds every
  overlay of that repository; in ``mode: pr`` the targets' proposal branches
  (:func:`steps.domain.branches.branch_name`), listed with one ``ls-remote`` and fetched together into
  that clone, their files in one batch; for ``provider: github`` the repository's open pull
  requests, one paginated listing through the GitHub API with the same read token (else
  anonymous): a branch whose pull request is closed, or cannot be confirmed open, proposes nothing.

Targets are computed exactly as resolve-image computes them: every tag ECR holds is matched with
:meth:`steps.rules.RuleSet.match`; the targets of one overlay (repository, path, image) are that
overlay's candidates, and the newest is chosen by the rule's ``order`` (push time, or semver
precedence). Only tagged images are candidates: ECR leaves an image untagged when its tag moves to
a newer push, and multi-platform pushes leave their per-platform manifests untagged, so an untagged
image is never "the newest release" (a digest-only push is still handled by its event).

Each target gets a state (:func:`~steps.reconcile.decide.decide`, pure; the never-downgrade verdicts
are :func:`steps.domain.never_downgrade.reconcile_verdict`'s):

* ``behind``: the overlay holds an older image (by the rule's order) than the newest allowed, and
  no living proposal already offers it — handed to update-target;
* ``current``: the overlay holds the newest allowed image;
* ``ahead``: the overlay (or its living proposal branch) holds something newer than the newest
  allowed — never touched;
* ``proposed`` (``mode: pr``): the target's proposal branch already proposes the newest;
* ``held``: what a person decided stands — a ``# imagebump:hold`` marker on the entry, or a
  rollback (the last commit that changed the entry's image, not imagebump's, moved it to an older
  one; read only for targets otherwise behind: :mod:`steps.reconcile.rollbacks`) until the newest
  allowed image was pushed after it — never touched, the reason names the marker or the commit;
* ``pinned``: the entry's ``newName`` names another repository — never touched;
* ``unknown``: with the reason (``order: none`` has no newest; the overlay or its image entry is
  missing; the Git repository, or the ECR repository's images, could not be read). A read that
  failed also sets the report row's ``error``: ``transient`` (failing for now), ``refused`` (a token
  or policy refused it: needs a fix) or ``failed``; ``imagebump reconcile`` exits on it (75, 2, 3).

Writes nothing but its outputs: ``targets`` (the behind ones, in resolve-image's shape, at most
``limit`` of them so a Workflow's status stays small; the rest are left for the next reconcile run and the
reason says so), ``report`` (one line per target; with ``full: false`` only the targets that are
not current, at most :data:`REPORT_LIMIT` of them, worst first, the rest counted in ``reason``), ``counts`` (targets per state and env: the gauge), ``behind``, ``ecr-calls``,
``git-calls``, ``git-clones`` (what reconcile cost), ``reason`` (a summary) and
``current-targets`` (for the live states in Argo CD). It pushes nothing:
the update-target steps do, under the same per-overlay mutex as events.

Layout (gather → decide → act): :mod:`steps.reconcile.model` holds the types the phases pass on,
:mod:`steps.reconcile.ecr_scan` gathers from ECR,
:mod:`steps.reconcile.overlay_read` reads Git (one partial sparse clone per repository),
:mod:`steps.reconcile.decide` is the pure core (:func:`pick_newest`, :func:`~steps.reconcile.decide.decide`, table-tested
without ECR or git), :mod:`steps.reconcile.report` renders the report and the counts; this module is
the step (its typed input :class:`ReconcileInput`, :class:`ReconcileOutput`, :func:`scan_targets` and
:func:`run`). It acts by its outputs only.

Errors: a bad rules file or a refused ECR listing (no ``ecr:DescribeRepositories``) is a
:class:`~steps.domain.errors.ConfigError`; ECR failing for now is a :class:`~steps.domain.errors.TransientError`.
A Git repository that cannot be read, or an ECR repository whose images cannot be listed,
makes its targets ``unknown`` (with the reason and ``error``) and reconcile goes on with the others.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from msgspec import Meta, field

from steps.domain.contract import Contract
from steps.domain.errors import ConfigError, ContractError
from steps.domain.models import Target, short_ref
from steps.gate.apply import GateOutcome, apply_gates, gate_fields, gated_rules, open_gate_reader, outcomes
from steps.reconcile.decide import STATES, State, Verdict, pick_newest, summary_states
from steps.reconcile.ecr_scan import make_clients, pool, scan_ecr
from steps.reconcile.model import Calls
from steps.reconcile.overlay_read import Item, isolate_failure, overlay_dir, reconcile_repository
from steps.reconcile.report import (
    ERROR_KINDS,
    StateCount,
    TargetState,
    cap_report,
    count_states,
    render_table,
)
from steps.runtime.harness import step_entry
from steps.runtime.settings import github_app_configured, rules_file

log = logging.getLogger(__name__)
#: The name in this step's log records (its module is ``step``).
STEP_NAME = "reconcile"

#: Modules this step imports only when it runs (a local executor's warm interpreter imports them ahead).
LAZY_IMPORTS = (
    "steps.aws.ecr",
    "steps.git",
    "steps.kustomize",
    "steps.domain.version_order",
    "steps.rules",
    "yaml",
    "botocore.session",
    "botocore.config",
    "botocore.exceptions",
)

DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 64
#: Behind targets handed over per reconcile run: the list is a Workflow output parameter (etcd-sized).
DEFAULT_LIMIT = 500
#: Rows of the ``report`` output without ``full`` (worst first; the counts keep every target).
REPORT_LIMIT = 300

# The pure core, the report and the gatherers live in their own modules (see the docstring);
# these names stay importable from the step's module, where Hera and the CLI find them.
__all__ = [
    "STATES",
    "ReconcileInput",
    "ReconcileOutput",
    "State",
    "StateCount",
    "TargetState",
    "Verdict",
    "count_states",
    "pick_newest",
    "render_table",
    "run",
    "scan_targets",
]


class ReconcileInput(Contract, kw_only=True):
    """The step's input (the CronWorkflow's parameters ``concurrency``, ``limit``, ``full``), declared
    once and checked before any I/O by :meth:`of`; :func:`run` keeps them as its parameters because
    Hera renders the template's inputs from that signature."""

    #: ECR calls and Git repositories worked on at once
    concurrency: Annotated[int, Meta(ge=1, le=MAX_CONCURRENCY)] = DEFAULT_CONCURRENCY
    #: at most this many behind targets per reconcile run (the rest wait)
    limit: Annotated[int, Meta(ge=0)] = DEFAULT_LIMIT
    #: list the current targets in the report too
    full: bool = False

    @classmethod
    def of(
        cls, concurrency: int = DEFAULT_CONCURRENCY, limit: int = DEFAULT_LIMIT, full: bool = False
    ) -> "ReconcileInput":
        """Validate. Raises ConfigError naming the parameter, its value and the allowed range."""
        values = {"concurrency": concurrency, "limit": limit, "full": full}
        try:
            return cls.model_validate(values)
        except ContractError as exc:
            name = exc.field.partition("[")[0]
            ranges = {"concurrency": f"must be between 1 and {MAX_CONCURRENCY}", "limit": "must be 0 or more"}
            raise ConfigError(
                f"{name} {values[name]!s:.80}: {ranges.get(name, 'must be true or false')}"
            ) from None


class ReconcileOutput(Contract, kw_only=True):
    """Reconcile's outputs (Argo output parameters): see the module docstring."""

    targets: list[Target] = field(default_factory=list)
    report: list[TargetState] = field(default_factory=list)
    counts: list[StateCount] = field(default_factory=list)
    behind: int = 0
    ecr_calls: int = 0
    git_calls: int = 0
    git_clones: int = 0
    reason: str = ""
    #: the current targets (all up to REPORT_LIMIT; beyond it a window that moves every reconcile),
    #: whose live state in Argo CD the live-states step reports (steps.live_states)
    current_targets: list[Target] = field(default_factory=list)
    #: promoteAfter: the gates promoted or blocked this reconcile (the promotion metrics)
    gates: list[GateOutcome] = field(default_factory=list)


# ============================================================================ reconcile


def scan_targets(
    rules: Any,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    limit: int = DEFAULT_LIMIT,
    client_for: Callable[[str], Any] | None = None,
    auth: Any = None,
    full: bool = True,
    report_limit: int | None = None,
    gate_reader: Any = None,
    now: Any = None,
) -> ReconcileOutput:
    """Compare every target overlay of ``rules`` with the newest image ECR holds that its rule allows.

    Args:
        rules: a :class:`steps.rules.RuleSet`.
        concurrency: ECR calls and Git repositories worked on at once.
        limit: at most this many behind targets in ``targets`` (the rest wait for the next reconcile run).
        client_for: ``region → ECR client`` (default: :func:`steps.aws.ecr.make_listing_client`).
        auth: Git read token (:class:`steps.git.GitAuth`) or None for anonymous.
        full: list current targets in ``report`` too.
        report_limit: at most this many rows in ``report``, worst first (None: all).
        gate_reader: Argo CD and Git reads for the promotion gate (:class:`steps.gate.read.ArgoGitReader`;
            None: gated targets wait); now: the gate's clock (default: the time now).

    Raises:
        ConfigError: ECR refused to list (permissions) or a bad argument.
        TransientError: ECR failed for now.
    """
    ReconcileInput.of(concurrency=concurrency, limit=limit, full=full)
    calls = Calls()
    # gather: ECR (every overlay and its candidates), then decide what is the newest of each
    overlays, notes, unreadable = scan_ecr(
        rules, concurrency=concurrency, calls=calls, client_for=client_for or make_clients(concurrency)
    )
    items = _items(overlays)
    # gather from Git and decide, one repository at a time (one clone each)
    _read_repositories(items, concurrency=concurrency, auth=auth, calls=calls)
    now = now or datetime.now(UTC)
    gates = apply_gates(items, gate_reader, now)  # issue 35: promoteAfter
    # the outputs
    report, behind, deferred = _rows(items, gates, limit)
    report += [
        TargetState(
            repo_url=u.repo_url, path=u.path, env=u.env, state="unknown", reason=u.reason, error=u.error
        )
        for u in unreadable
    ]
    totals = Counter(t.state for t in report)
    rows, left_out = cap_report(report if full else [t for t in report if t.state != "current"], report_limit)
    return ReconcileOutput(
        targets=behind,
        report=rows,
        counts=count_states(report),
        behind=totals.get("behind", 0),
        ecr_calls=calls.ecr,
        git_calls=calls.git,
        git_clones=calls.clones,
        reason=_summary(
            report, calls, deferred=deferred, limit=limit, shown=len(rows), left_out=left_out, notes=notes
        ),
        gates=outcomes(gates, now),
        current_targets=_live_window(
            [i.sample for i in items if i.verdict is not None and i.verdict.state == "current"]
        ),
    )


def _items(overlays: dict[Any, Any]) -> list[Item]:
    """One item per overlay, with the newest image its rules allow (and the reason when none)."""
    items: list[Item] = []
    for key in sorted(overlays):
        overlay = overlays[key]
        best, why = overlay.newest()
        same = overlay.same_image_tags(best)
        items.append(Item(overlay, best, why, same, path=overlay_dir(overlay.candidates[0].path)))
    return items


def _read_repositories(items: list[Item], *, concurrency: int, auth: Any, calls: Calls) -> None:
    """Read and decide every item from Git: one clone per repository, however the rules spell it;
    one bad repository costs only its own rows."""
    by_repo: dict[str, list[Item]] = {}
    for item in items:
        by_repo.setdefault(item.sample.repo_id, []).append(item)

    def one(repo: str) -> None:
        repo_url = by_repo[repo][0].sample.repo_url  # the first spelling clones for all
        try:
            with tempfile.TemporaryDirectory(prefix="reconcile-") as scratch:
                reconcile_repository(repo_url, by_repo[repo], auth=auth, calls=calls, scratch=Path(scratch))
        except Exception as exc:  # noqa: BLE001 - one bad repository costs only its own rows
            isolate_failure(repo_url, by_repo[repo], exc)

    pool(concurrency, sorted(by_repo), one)


def _rows(
    items: list[Item], gates: dict[int, Any], limit: int
) -> tuple[list[TargetState], list[Target], int]:
    """The report's row of each item, the behind targets handed on (at most ``limit``) and how many
    more were deferred to the next reconcile run."""
    report: list[TargetState] = []
    behind: list[Target] = []
    deferred = 0
    for item in items:
        v = item.verdict or Verdict("unknown", "not decided")
        reason = v.reason
        if v.state in ("behind", "promoted") and v.update is not None:
            if len(behind) < limit:
                behind.append(v.update)
            else:
                deferred += 1
                reason += f"; deferred to the next reconcile run (at most {limit} updates per reconcile run)"
        s = item.sample
        report.append(
            TargetState(
                repo_url=s.repo_url,
                path=s.path,
                env=s.env,
                file=(item.file or s.edited) if s.edits_values else "",
                current=v.current,
                newest=v.newest,
                state=v.state,
                reason=reason,
                error=item.failure if v.state == "unknown" else "",
                **gate_fields(gates.get(id(item))),
            )
        )
    return report, behind, deferred


def _summary(
    report: list[TargetState],
    calls: Calls,
    *,
    deferred: int,
    limit: int,
    shown: int,
    left_out: int,
    notes: list[str],
) -> str:
    """The one-line ``reason``: targets per state, read errors, what the run cost, what was left."""
    totals = Counter(t.state for t in report)
    summary = f"{len(report)} target(s): " + ", ".join(
        f"{totals.get(s, 0)} {s}" for s in summary_states(totals)
    )
    errors = Counter(t.error for t in report if t.error)
    if errors:
        summary += " (" + ", ".join(f"{errors[k]} {k}" for k in ERROR_KINDS if errors[k]) + " read error(s))"
    summary += f"; {calls.ecr} ECR call(s), {calls.clones} clone(s), {calls.git} Git call(s)"
    if deferred:
        summary += f"; {deferred} behind target(s) deferred to the next reconcile run (limit {limit})"
    if left_out:
        summary += f"; the report lists {shown} target(s), worst first, and {left_out} more are left out"
    if notes:
        summary += "; " + "; ".join(notes)
    return summary


def _live_window(current: list[Target], now: float | None = None) -> list[Target]:
    """The current targets whose live state this reconcile asks Argo CD for: all of them up to
    :data:`REPORT_LIMIT` (what one output parameter carries); beyond it, a window that moves by
    :data:`REPORT_LIMIT` every 10-minute reconcile slot, so every target is looked at within
    ``ceil(n / REPORT_LIMIT)`` reconcile runs."""
    if len(current) <= REPORT_LIMIT:
        return current
    slot = int((time.time() if now is None else now) // 600)
    start = (slot * REPORT_LIMIT) % len(current)
    return (current[start:] + current[:start])[:REPORT_LIMIT]


@step_entry
def run(
    concurrency: int = DEFAULT_CONCURRENCY,
    limit: int = DEFAULT_LIMIT,
    full: bool = False,
    gated: bool = False,
) -> ReconcileOutput:
    """Reconcile every rule's overlays; output the behind ones for update-target, and the report."""
    from steps import git
    from steps.rules import load_rules_file

    given = ReconcileInput.of(concurrency=concurrency, limit=limit, full=full)  # before any I/O
    rules = load_rules_file(rules_file())
    if gated:  # issue 35: the short evaluation (CronWorkflow image-gate): the gated rules only
        rules = gated_rules(rules)
    auth = git.GitAuth.from_env(write=False)
    if auth is None and github_app_configured():  # only the App's settings: read as the App
        from steps.forge.github import read_auth

        auth = read_auth()
    gate_reader = open_gate_reader(rules)  # issue 35: None without gated rules or without Argo CD
    try:
        out = scan_targets(
            rules,
            concurrency=given.concurrency,
            limit=given.limit,
            auth=auth,
            full=given.full,
            report_limit=None if given.full else REPORT_LIMIT,
            gate_reader=gate_reader,
        )
    finally:
        if gate_reader is not None:
            gate_reader.close()
    for t in out.report:  # the pod's log: what needs a look (the current ones are only counted)
        if t.state != "current":
            log.info(
                "%s %s/%s (%s): current %s, newest %s: %s",
                t.state,
                t.repo_url,
                t.path,
                t.env or "-",
                short_ref(t.current) or "-",
                short_ref(t.newest) or "-",
                t.reason,
            )
    log.info("reconcile: %s", out.reason)
    return out
