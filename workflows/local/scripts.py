"""A script template's node: its attempts in the sandbox, retried by its ``retryStrategy``.

Each attempt's stderr is forwarded to the run's log; a failed attempt logs ``attempt-failed``,
a retry ``retry-scheduled`` after a backoff scaled by the executor's ``backoff_scale``
(``maxDuration`` is counted as if unscaled); the node ends with the last attempt's outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workflows.local.recorder import RunRecorder
from workflows.local.results import SUCCEEDED, NodeResult
from workflows.local.retry import RetryPolicy
from workflows.local.sandbox import Sandbox


def run_script(
    rec: RunRecorder,
    sandbox: Sandbox,
    tpl: dict[str, Any],
    render: Callable[[Any], str],
    node_name: str,
    deadline: float | None,
    backoff_scale: float,
    extra_env: dict[str, str] | None = None,
) -> NodeResult:
    policy = RetryPolicy.of(tpl)
    started = time.monotonic()
    attempt = 0
    waited = nominal_waited = 0.0
    while True:
        attempt += 1
        a_start = time.monotonic()

        def report(event: str, message: str, n: int = attempt) -> None:
            rec.log(event=event, node=node_name, attempt=n, message=message)

        outcome = sandbox.attempt(
            tpl,
            render,
            _attempt_deadline(tpl, policy, attempt, deadline, (started, a_start), waited, nominal_waited),
            report,
            extra_env,
        )
        rec.forward(outcome.step_log, tpl["name"], node_name, attempt)
        message = outcome.message
        if outcome.phase != SUCCEEDED:
            rec.log(
                event="attempt-failed",
                node=node_name,
                template=tpl["name"],
                step=tpl["name"],
                phase=outcome.phase,
                attempt=attempt,
                exit_code=outcome.exit_code,
                duration=round(time.monotonic() - a_start, 3),
                message=message or None,
                stderr_tail=outcome.stderr_tail or None,
            )
        stop = policy.refusal(outcome.phase, outcome.exit_code, attempt)
        if stop is not None:
            message += stop
            break
        nominal = policy.backoff(attempt)
        wait = nominal * backoff_scale
        # maxDuration counts time since the first attempt as if the backoffs had been unscaled
        elapsed = time.monotonic() - started - waited + nominal_waited
        too_late = policy.out_of_time(elapsed, nominal)
        if too_late is not None:
            message += too_late
            break
        if deadline is not None and time.monotonic() + wait >= deadline:
            break
        rec.log(
            event="retry-scheduled",
            node=node_name,
            template=tpl["name"],
            step=tpl["name"],
            attempt=attempt + 1,
            delay=round(wait, 3),
        )
        time.sleep(wait)
        waited += wait
        nominal_waited += nominal
    phase, tail = outcome.phase, outcome.stderr_tail
    node = NodeResult(
        node_name,
        tpl["name"],
        phase,
        outcome.exit_code,
        outcome.outputs,
        time.monotonic() - started,
        attempt,
        message,
        result=outcome.result,
    )
    return rec.finished(
        node,
        step=tpl["name"],
        exit_code=outcome.exit_code,
        attempts=attempt,
        stderr_tail=tail if phase != SUCCEEDED and tail else None,
    )


def _attempt_deadline(
    tpl: dict[str, Any],
    policy: RetryPolicy,
    attempt: int,
    deadline: float | None,
    starts: tuple[float, float],
    waited: float,
    nominal: float,
) -> float | None:
    """When attempt ``attempt`` must end, as Argo ends a pod: the parent's ``deadline``; the
    template's ``activeDeadlineSeconds`` from this attempt's start (Argo puts it on each pod); and for
    a retry (attempt 2 on) the first attempt's start + ``backoff.maxDuration``, Argo's execution
    deadline for retries (``operator.go`` ``processNodeRetries``). Backoffs run scaled here;
    ``maxDuration`` counts them unscaled (``nominal`` waited against ``waited``), as the retry
    decision does. ``starts``: the first attempt's start and this one's."""
    first, this = starts
    ends = [deadline] if deadline is not None else []
    if tpl.get("activeDeadlineSeconds") is not None:
        ends.append(this + int(str(tpl["activeDeadlineSeconds"])))
    if attempt >= 2 and policy.max_duration is not None:
        ends.append(first + policy.max_duration - (nominal - waited))
    return min(ends) if ends else None


__all__ = ["run_script"]
