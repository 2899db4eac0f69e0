"""verify-live: after commit-pr committed, watch Argo CD until the commit runs — or raise the alarm.

Reads: the Argo CD Applications deploying the target's overlay (:mod:`steps.verify_live.argocd`),
the base branch's history (:mod:`steps.verify_live.revisions`, optional read token). Writes nothing:
with ``IMAGEBUMP_ARGOCD_REFRESH=api`` it asks Argo CD's API server to refresh those Applications
(a ``get`` with ``refresh=normal``), else Argo CD's webhook or poll does. Runs outside the overlay's mutex, so the
next push to the overlay never queues behind it; stops ``superseded`` when Git at the revision Argo
CD synced holds a newer image for the overlay (a newer imagebump commit, verified by its own run).
Outcomes: ``live``, ``idle`` (synced and healthy at the commit, but no Pod runs the image now:
scaled to zero, or only a CronJob/Job uses it), ``mismatch`` (exit 2: the Workflow fails naming the
Application, the revision, what Git holds and what runs), ``timeout``, ``no-application``,
``manual-sync``, ``superseded``. Outputs are bounded (:func:`bounded`), whatever the status holds.
Safe to run twice: a second run refreshes and watches again.
"""

# No `from __future__ import annotations`: Hera's runner reads real annotation objects.

import logging
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from msgspec import field

from steps.domain.contract import Contract
from steps.domain.errors import ConfigError, LiveMismatch
from steps.domain.models import Plan, Target
from steps.runtime.harness import emit_outputs, step_entry
from steps.verify_live import decide
from steps.verify_live.decide import Judgement, RevisionFacts

log = logging.getLogger(__name__)
#: The name in this step's log records (as its template is named).
STEP_NAME = "verify-live"

DEFAULT_TIMEOUT = "15m"
#: The longest one verify-live pod waits, whatever ``live-timeout`` asks: its pod's deadline
#: (workflows.verify_live, one minute more) must end the wait with an outcome (``timeout``), never
#: kill it mid-wait.
MAX_WAIT_SECONDS = 1140.0
#: The watch's time when the step runs (tests replace both: a clock that sleeping moves on).
CLOCK: Callable[[], float] = time.monotonic
SLEEP: Callable[[float], None] = time.sleep
#: Seconds between two reads of each Application (``IMAGEBUMP_LIVE_POLL_SECONDS`` overrides).
POLL_SECONDS = 5.0
#: An Application still at a revision without the commit is asked to refresh again this often.
REFRESH_AGAIN_SECONDS = 60.0

LIVE, MISMATCH, TIMEOUT, NO_APPLICATION, MANUAL_SYNC, SUPERSEDED, IDLE = (
    "live",
    "mismatch",
    "timeout",
    "no-application",
    "manual-sync",
    "superseded",
    "idle",
)
RESULTS = (LIVE, IDLE, MISMATCH, TIMEOUT, NO_APPLICATION, MANUAL_SYNC, SUPERSEDED)
#: Output bounds (Argo keeps outputs in the Workflow's status and refuses them near 1 MB): at most
#: this many Applications listed (not-live first; the rest counted in ``message``), images per
#: Application (those of the overlay's repository first) and characters per reason and message.
MAX_APPLICATIONS = 50
MAX_IMAGES = 20
MAX_REASON = 1000
MAX_MESSAGE = 4000
#: Only on one machine without ``--argocd-context`` (a local executor that left verify-live on).
OFF = "off"

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}


class AppLive(Contract, kw_only=True):
    """One Application's last judgement."""

    namespace: str
    name: str
    state: str
    reason: str = ""
    revision: str = ""
    images: list[str] = field(default_factory=list)


class VerifyLiveOutput(Contract, kw_only=True):
    #: live, idle, mismatch, timeout, no-application, manual-sync or superseded
    result: str
    message: str = ""
    #: the image Git holds, as the cluster should run it
    image: str = ""
    applications: list[AppLive] = field(default_factory=list)
    seconds_push_to_committed: str = ""
    seconds_push_to_synced: str = ""
    seconds_push_to_healthy: str = ""


def parse_duration(text: str, what: str = "live-timeout") -> float:
    """``15m``, ``30s``, ``1h30m``, ``90`` (seconds) → seconds."""
    value = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", value):
        return float(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise ConfigError(
            f"{what} {text!r}: expected a duration like 15m, 90s or 1h", reason="invalid-duration", field=what
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _seconds(later: datetime | None, pushed: datetime | None) -> str:
    if later is None or pushed is None:
        return ""
    return f"{max((later - pushed).total_seconds(), 0.0):.3f}"


def not_before(seconds: str, earlier: str) -> str:
    """``seconds``, or ``earlier`` when it is later (both as the outputs carry them; "" unknown)."""
    if not seconds or not earlier:
        return seconds
    return earlier if float(earlier) > float(seconds) else seconds


def overall(judgements: list[Judgement], timed_out: bool) -> str:
    """The outcome of a set of Applications: mismatch > superseded > timeout > manual-sync > live >
    idle (``idle`` only when no Application runs the image: every one is idle)."""
    states = {j.state for j in judgements}
    if not judgements:
        return NO_APPLICATION
    for state in (MISMATCH, SUPERSEDED):
        if state in states:
            return state
    if decide.SYNCING in states or decide.UNKNOWN in states:
        return TIMEOUT if timed_out else ""
    if MANUAL_SYNC in states:
        return MANUAL_SYNC
    return LIVE if LIVE in states else IDLE


def watch(
    names: list[str],
    read: Callable[[int], Judgement],
    refresh: Callable[[int], None],
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll: float = POLL_SECONDS,
) -> tuple[str, list[Judgement], float | None]:
    """Judge each Application until the outcome is known or ``timeout`` passes.

    Returns (outcome, last judgement of each, clock time all were live or None). An Application
    once ``live``, ``idle``, ``manual-sync``, ``mismatch`` or ``superseded`` is not read again
    (``unknown``, an unreadable status, is read again like ``syncing``).
    """
    start = clock()
    last_refresh = {i: start for i in range(len(names))}
    judged: dict[int, Judgement] = {}
    live_at: float | None = None
    while True:
        for i in range(len(names)):
            if i in judged and judged[i].state not in (decide.SYNCING, decide.UNKNOWN):
                continue
            judged[i] = read(i)
            if judged[i].state == decide.LIVE:
                live_at = clock()
            elif (
                judged[i].state == decide.SYNCING
                and "does not contain the commit" in judged[i].reason
                and clock() - last_refresh[i] >= REFRESH_AGAIN_SECONDS
            ):
                refresh(i)
                last_refresh[i] = clock()
        ordered = [judged[i] for i in range(len(names))]
        timed_out = clock() - start >= timeout
        outcome = overall(ordered, timed_out)
        if outcome:
            return outcome, ordered, live_at if outcome == LIVE else None
        sleep(min(poll, max(timeout - (clock() - start), 0.0)) or poll)


def _pushed(target: Target) -> datetime | None:
    if target.pushed_at is None:
        return None
    return target.pushed_at if target.pushed_at.tzinfo else target.pushed_at.replace(tzinfo=UTC)


def verify(
    target: Target,
    plan: Plan,
    commit_sha: str,
    seconds_to_commit: str,
    timeout: float,
    api: Any,
    history_factory: Callable[[str], Any],
    refresher: Any = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> VerifyLiveOutput:
    """The step without its runtime: find, refresh, watch, and the outcome with its timings.
    ``refresher``: :class:`~steps.verify_live.argocd.Refresher` (default: from the settings);
    ``clock`` and ``sleep``: the watch's time (tests inject them)."""
    from steps import git
    from steps.verify_live import argocd

    expected = decide.expected_image(plan.new.newName or plan.new.name, plan.new.newTag, plan.new.digest)
    branch = plan.base_branch or target.settings.base_branch or ""
    if target.settings.base_branch is None:
        default = True
    else:
        default = branch == git.default_branch(target.repo_url, git.GitAuth.from_env(write=False))
    namespace = argocd.argocd_namespace()
    refresher = refresher if refresher is not None else argocd.Refresher.from_env()
    deployed_file = _deployed_file(target, plan)  # a Helm values file (issue 34), else the overlay
    found = argocd.find(api, namespace, target.repo_url, target.path, branch, default, file=deployed_file)
    out = VerifyLiveOutput(result=NO_APPLICATION, image=expected, seconds_push_to_committed=seconds_to_commit)
    if not found:
        out.message = (
            f"no Argo CD Application (in {namespace} or the namespaces application.namespaces enables) "
            f"deploys {target.repo_url} path {target.path or '.'} at branch {branch}"
        )
        return out
    for deployment, _ in found:
        refresher.refresh(deployment)
    history = history_factory(branch)
    facts: Callable[[str], RevisionFacts] = history.facts
    deployments = [d for d, _ in found]

    def read(i: int) -> Judgement:
        app = argocd.get(api, deployments[i])
        if app is None:
            return Judgement(decide.SYNCING, "the Application was deleted meanwhile")
        return decide.decide(app, deployments[i].source_index, expected, facts)

    poll = float(os.environ.get("IMAGEBUMP_LIVE_POLL_SECONDS") or POLL_SECONDS)
    started = clock()
    outcome, judged, live_at = watch(
        [d.display for d in deployments],
        read,
        lambda i: refresher.refresh(deployments[i]),
        timeout,
        clock=clock,
        sleep=sleep,
        poll=poll,
    )
    out.result = outcome
    out.applications = [
        AppLive(
            namespace=d.namespace,
            name=d.name,
            state=j.state,
            reason=j.reason,
            revision=j.revision,
            images=j.images,
        )
        for d, j in zip(deployments, judged, strict=True)
    ]
    pushed = _pushed(target)
    if outcome == IDLE:  # synced at the commit; no Pod to be healthy in
        synced = [j.synced_at for j in judged if j.synced_at is not None]
        out.seconds_push_to_synced = not_before(
            _seconds(max(synced) if synced else None, pushed), out.seconds_push_to_committed
        )
    if outcome == LIVE:
        synced = [j.synced_at for j in judged if j.synced_at is not None]
        out.seconds_push_to_synced = _seconds(max(synced) if synced else None, pushed)
        healthy_at = datetime.now(UTC) - timedelta(seconds=clock() - (live_at or started))
        out.seconds_push_to_healthy = _seconds(healthy_at, pushed)
        # Kubernetes timestamps (finishedAt) have whole seconds: a sync of a revision holding the
        # commit cannot end before the commit, nor health before the sync, so the figures never
        # go backwards along push → committed → synced → healthy.
        out.seconds_push_to_synced = not_before(out.seconds_push_to_synced, out.seconds_push_to_committed)
        out.seconds_push_to_healthy = not_before(out.seconds_push_to_healthy, out.seconds_push_to_synced)
    interesting = [a for a in out.applications if a.state != decide.LIVE] or out.applications
    if outcome == MISMATCH:
        out.message = "; ".join(a.reason for a in out.applications if a.state == MISMATCH)
    elif outcome == TIMEOUT:
        out.message = f"not live after {timeout:g} s: " + "; ".join(
            f"{a.namespace}/{a.name}: {a.reason}" for a in interesting
        )
    else:
        out.message = "; ".join(f"{a.namespace}/{a.name}: {a.reason}" for a in interesting)
    return bounded(out, decide.repository(expected))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[: limit - 40]}… ({len(text) - limit + 40} more chars)"


def bounded(out: VerifyLiveOutput, repository: str = "") -> VerifyLiveOutput:
    """``out`` within the output bounds, whatever Argo CD reported: at most :data:`MAX_APPLICATIONS`
    Applications (not-live first), :data:`MAX_IMAGES` images each (``repository``'s first, the rest
    counted), reasons and the message clipped. Argo refuses outputs near 1 MB; the alarm must reach
    the Workflow, not an Argo error."""
    rank = {MISMATCH: 0, decide.UNKNOWN: 1, decide.SYNCING: 2, SUPERSEDED: 3, MANUAL_SYNC: 4}
    apps = sorted(out.applications, key=lambda a: rank.get(a.state, 9))
    kept = []
    for app in apps[:MAX_APPLICATIONS]:
        images = sorted(app.images, key=lambda i: decide.repository(i) != repository)
        shown = images[:MAX_IMAGES]
        if len(images) > MAX_IMAGES:
            shown.append(f"… {len(images) - MAX_IMAGES} more images")
        kept.append(
            app.model_copy(
                update={
                    "images": [_clip(i, 300) for i in shown],
                    "reason": _clip(app.reason, MAX_REASON),
                    "namespace": _clip(app.namespace, 253),
                    "name": _clip(app.name, 253),
                    "revision": _clip(app.revision, 64),
                }
            )
        )
    message = _clip(out.message, MAX_MESSAGE)
    if len(apps) > MAX_APPLICATIONS:
        message += f" ({len(apps) - MAX_APPLICATIONS} more Application(s) not listed)"
    return out.model_copy(update={"applications": kept, "message": message})


@step_entry
def run(
    target: Target,
    plan: Plan,
    commit_sha: str,
    seconds_to_commit: str = "",
    live_timeout: str = DEFAULT_TIMEOUT,
) -> VerifyLiveOutput:
    """Find the Applications deploying the overlay, refresh them and wait until the commit is live."""
    from steps.verify_live import argocd

    asked = parse_duration(live_timeout)  # before any I/O
    refresher = argocd.Refresher.from_env()
    timeout = min(asked, MAX_WAIT_SECONDS)
    if asked > timeout:
        log.warning(
            "live-timeout %s is longer than one verify-live pod may wait; waiting %g s", live_timeout, timeout
        )
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit_sha or ""):
        raise ConfigError(f"commit_sha {commit_sha!r}: expected the full commit id commit-pr pushed")
    from steps.runtime.scratch_dir import scratch
    from steps.verify_live.revisions import History

    if not argocd.configured():  # a local executor run without --argocd-context
        return VerifyLiveOutput(
            result=OFF, message=argocd.NOT_CONFIGURED, seconds_push_to_committed=seconds_to_commit
        )
    api = argocd.connect()
    with scratch("verify-live-") as workdir:
        out = verify(
            target,
            plan,
            commit_sha,
            seconds_to_commit,
            timeout,
            api,
            lambda branch: History(
                target.repo_url,
                branch,
                commit_sha,
                plan.file,
                plan.image_name,
                workdir / "history",
                values=plan.values,
            ),
            refresher,
            clock=CLOCK,
            sleep=SLEEP,
        )
    log.info("%s: %s %s", target.key, out.result, out.message)
    if out.result == MISMATCH:
        emit_outputs(out)  # the metric and the UI read them though the step fails
        raise LiveMismatch(out.message + f" (commit {commit_sha[:12]})")
    return out


def _deployed_file(target: Target, plan: Plan) -> str | None:
    """The file an Application must deploy for a values-file target: the helmfile for a release, else
    the values file; None for a kustomization (the overlay's directory is what is deployed)."""
    if plan.values is None:
        return None
    return target.helmfile.file if target.helmfile is not None else plan.file
