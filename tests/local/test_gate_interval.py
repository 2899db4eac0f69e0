"""``imagebump run --local`` evaluates the promotion gate every IMAGEBUMP_GATE_INTERVAL (issue 35)."""

from __future__ import annotations

import pytest

from imagebump.local import gate
from steps.domain.errors import ConfigError

REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
RULES = f"""
- registryURI: {REGISTRY}/team/api
  githubRepository: https://github.com/o/r/stg
  env: staging
- registryURI: {REGISTRY}/team/api
  githubRepository: https://github.com/o/r/prd
  env: production
"""


@pytest.mark.parametrize(("value", "seconds"), [(None, 60.0), ("30s", 30.0), ("1m", 60.0), ("45", 45.0)])
def test_the_interval_defaults_to_a_minute_and_reads_durations(value, seconds) -> None:
    environ = {} if value is None else {"IMAGEBUMP_GATE_INTERVAL": value}
    assert gate.interval(environ) == seconds


@pytest.mark.parametrize("value", ["soon", "0", "2m", "-5s"])
def test_a_bad_interval_is_refused_naming_the_setting(value) -> None:
    with pytest.raises(ConfigError, match="IMAGEBUMP_GATE_INTERVAL"):
        gate.interval({"IMAGEBUMP_GATE_INTERVAL": value})


def test_only_gated_rules_start_the_gate_sweeper() -> None:
    made = []
    log = lambda _record: None  # noqa: E731
    assert gate.gate_reconciler(RULES, lambda: made.append(1), log=log, environ={}) is None and not made
    gated = RULES + "  promoteAfter: {env: staging, soak: 30m}\n"
    sweeper = gate.gate_reconciler(
        gated, lambda: "executor", log=log, environ={"IMAGEBUMP_GATE_INTERVAL": "20s"}
    )
    assert sweeper is not None and sweeper.interval == 20.0 and sweeper.executor == "executor"
