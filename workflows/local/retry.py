"""A template's ``retryStrategy`` as a policy: whether a failed attempt is retried, and after how long.

Pure: the interpreter runs the attempts and sleeps; this decides. Argo's semantics: ``limit``
retries after the first attempt, ``retryPolicy`` (``OnFailure`` never retries an Error, ``OnError``
never a Failure), ``expression`` over ``lastRetry.exitCode`` / ``lastRetry.status``, and a backoff
of ``duration * factor**(n-1)``, capped by ``cap``, stopped once ``maxDuration`` would pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workflows.local.expressions import evaluate_condition, parse_duration, retry_operand
from workflows.local.results import ERROR, FAILED, SUCCEEDED, Phase


@dataclass(frozen=True)
class RetryPolicy:
    limit: int = 0
    policy: str | None = None
    expression: str | None = None
    delay: float = 0.0
    factor: float = 1.0
    max_duration: float | None = None
    max_duration_text: str = ""
    cap: float | None = None

    @classmethod
    def of(cls, template: dict[str, Any]) -> RetryPolicy:
        """The policy of a (validated) script template; no ``retryStrategy`` means one attempt."""
        retry = template.get("retryStrategy") or {}
        backoff = retry.get("backoff") or {}
        return cls(
            limit=int(str(retry.get("limit", 0))) if retry else 0,
            policy=retry.get("retryPolicy"),
            expression=retry.get("expression") or None,
            delay=parse_duration(backoff["duration"], "backoff.duration") if backoff.get("duration") else 0.0,
            factor=float(str(backoff.get("factor", 1) or 1)),
            max_duration=(
                parse_duration(backoff["maxDuration"], "backoff.maxDuration")
                if backoff.get("maxDuration")
                else None
            ),
            max_duration_text=str(backoff.get("maxDuration") or ""),
            cap=parse_duration(backoff["cap"], "backoff.cap") if backoff.get("cap") else None,
        )

    def refusal(self, phase: Phase, exit_code: int | None, attempt: int) -> str | None:
        """Why attempt ``attempt`` (which ended in ``phase``) is the last: ``""`` for a plain stop,
        a message suffix when the expression says no, None when it may be retried (backoff allowing)."""
        if phase == SUCCEEDED or attempt > self.limit:
            return ""
        if phase == ERROR and self.policy == "OnFailure":
            return ""
        if phase == FAILED and self.policy == "OnError":
            return ""
        if self.expression and not evaluate_condition(
            self.expression, lambda t, c=exit_code, s=phase: retry_operand(t, c, s)
        ):
            return f" (not retried: retryStrategy.expression {self.expression!r} is false)"
        return None

    def backoff(self, attempt: int) -> float:
        """The unscaled wait after failed attempt ``attempt`` (1-based)."""
        nominal = self.delay * (self.factor ** (attempt - 1))
        return min(nominal, self.cap) if self.cap is not None else nominal

    def out_of_time(self, elapsed: float, nominal: float) -> str | None:
        """The message suffix when waiting ``nominal`` more after ``elapsed`` unscaled seconds passes
        ``maxDuration``; None otherwise."""
        if self.max_duration is not None and elapsed + nominal > self.max_duration:
            return f" (not retried: backoff.maxDuration {self.max_duration_text} reached)"
        return None


__all__ = ["RetryPolicy"]
