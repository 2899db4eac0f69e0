"""The reconcile step's pure core: which image is the newest, and what state each target is in.

No ECR, no Git: tables of facts in, verdicts out. The sweep against moto's ECR and a real
``git http-backend`` is in ``tests/steps/reconcile/test_reconcile_sweep.py``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from steps.domain.errors import ConfigError
from steps.domain.models import ImagesEntry, Target
from steps.reconcile.decide import decide
from steps.reconcile.step import (
    STATES,
    ReconcileInput,
    TargetState,
    count_states,
    pick_newest,
    render_table,
    run,
    scan_targets,
)

IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
D1, D2, D3 = ("sha256:" + c * 64 for c in "123")


def target(tag: str | None = "1.4.2", digest: str | None = D2, pushed: datetime | None = T0, **kw) -> Target:
    base = {
        "rule": 0,
        "repo_url": "https://github.com/org/gitops",
        "path": "apps/api/overlays/staging",
        "env": "staging",
        "image": IMAGE,
        "tag": tag,
        "digest": digest,
        "pushed_at": pushed,
        "mode": "commit",
        "provider": "local",
    }
    base.update(kw)
    return Target(**base)


def entry(tag: str | None = None, digest: str | None = None, **kw) -> ImagesEntry:
    return ImagesEntry(name=IMAGE, newTag=tag, digest=digest, **kw)


# --- the newest allowed image ----------------------------------------------------------------


def test_push_time_picks_the_latest_push() -> None:
    older, newer = target("1.9.0", D1, T0), target("1.4.2", D2, T0 + timedelta(minutes=5))
    assert pick_newest([older, newer])[0] is newer


def test_push_time_ties_are_broken_by_version_then_natural_order() -> None:
    # one image with several tags, or two pushes in the same instant: a stable choice
    a, b, c = target("1.4.9", D1), target("1.4.10", D2), target("abc1234", D3)
    assert pick_newest([a, c, b])[0] is b
    assert pick_newest([a, c])[0] is a  # a version beats a plain tag


def test_semver_picks_the_highest_version_and_ignores_other_tags() -> None:
    late_junk = target("latest-build", D3, T0 + timedelta(hours=1), order="semver")
    rc, release = (
        target("2.0.0-rc.1", D1, T0 + timedelta(minutes=9), order="semver"),
        target("1.10.0", D2, T0, order="semver"),
    )
    final = target("v2.0.0", D3, T0, order="semver")
    assert pick_newest([late_junk, rc, release])[0] is rc
    assert pick_newest([rc, release, final])[0] is final  # a release sorts above its pre-release


@pytest.mark.parametrize(
    ("candidates", "why"),
    [
        pytest.param([], "no tag in ECR", id="nothing-allowed"),
        pytest.param([target(order="none")], "order: none", id="order-none-is-never-guessed"),
        pytest.param([target("main", order="semver")], "semantic version", id="semver-without-versions"),
        pytest.param(
            [target(order="semver"), target(rule=1, order="push-time")],
            "different orders",
            id="conflicting-orders",
        ),
    ],
)
def test_no_newest(candidates: list[Target], why: str) -> None:
    best, reason = pick_newest(candidates)
    assert best is None and why in reason


# --- the state of one target ----------------------------------------------------------------

NEWEST = target("1.4.2", D2, T0)
PR = {"mode": "pr"}

CASES = [
    pytest.param({"current": entry("1.4.2")}, "current", id="holds-the-newest"),
    pytest.param(
        {"current": entry("1.4.1"), "current_pushed_at": T0 - timedelta(days=1)}, "behind", id="older"
    ),
    pytest.param(
        {"current": entry("hotfix-7"), "current_pushed_at": T0 + timedelta(hours=1)},
        "ahead",
        id="pinned-ahead",
    ),
    pytest.param({"current": entry("gone")}, "behind", id="current-not-in-ecr-is-replaced-as-events-do"),
    pytest.param(
        {"current": None, "current_error": "no kustomization in apps/api"}, "unknown", id="unreadable"
    ),
    pytest.param(
        {"current": entry("abc1234"), "same_image_tags": {"1.4.2", "abc1234"}},
        "current",
        id="same-image-under-another-allowed-tag",
    ),
    pytest.param({"current": entry("1.4.0", D2)}, "current", id="same-digest-already-deployed"),
    pytest.param({"current": entry(None, None)}, "behind", id="nothing-set-yet"),
]


@pytest.mark.parametrize(("facts", "state"), CASES)
def test_decide(facts: dict, state: str) -> None:
    verdict = decide(newest=NEWEST, **facts)
    assert verdict.state == state, verdict.reason
    assert (verdict.update is not None) == (state == "behind")
    if state == "behind":
        assert verdict.update.tag == "1.4.2" and verdict.update.digest == D2


def test_ahead_names_both_images() -> None:
    verdict = decide(newest=NEWEST, current=entry("hotfix-7"), current_pushed_at=T0 + timedelta(hours=1))
    assert "hotfix-7" in verdict.reason and "1.4.2" in verdict.reason and "never touched" in verdict.reason
    assert (verdict.current, verdict.newest) == ("hotfix-7", "1.4.2")


def test_order_none_is_reported_with_what_the_overlay_holds() -> None:
    best, why = pick_newest([target(order="none")])
    verdict = decide(newest=best, why_no_newest=why, current=entry("1.4.1"))
    assert (verdict.state, verdict.current, verdict.newest) == ("unknown", "1.4.1", "")
    assert "order: none" in verdict.reason


def test_write_digest_pins_the_digest_of_the_tag_already_held() -> None:
    newest = target(write_digest=True)
    verdict = decide(newest=newest, current=entry("1.4.2"), current_pushed_at=T0)
    assert verdict.state == "behind" and verdict.newest == f"1.4.2@{D2}"
    assert decide(newest=newest, current=entry("1.4.2", D2)).state == "current"


def test_the_file_keeps_its_own_tag_for_the_same_image() -> None:
    newest = target(write_digest=True)
    verdict = decide(
        newest=newest, current=entry("abc1234"), same_image_tags={"1.4.2", "abc1234"}, current_pushed_at=T0
    )
    assert verdict.state == "behind" and verdict.update.tag == "abc1234" and verdict.newest == f"abc1234@{D2}"


def test_semver_order() -> None:
    newest = target("1.9.0", order="semver")
    assert decide(newest=newest, current=entry("1.10.0")).state == "ahead"
    assert decide(newest=newest, current=entry("1.2.0")).state == "behind"
    assert decide(newest=newest, current=entry("main")).state == "behind"  # not a version: replaced


PR_CASES = [
    pytest.param(None, None, "behind", id="no-living-proposal"),
    pytest.param(entry("1.4.2"), None, "proposed", id="branch-proposes-the-newest"),
    pytest.param(entry("1.4.1"), T0 - timedelta(days=1), "behind", id="branch-proposes-an-older-one"),
    pytest.param(entry("1.5.0-manual"), T0 + timedelta(hours=2), "ahead", id="branch-proposes-a-newer-one"),
]


@pytest.mark.parametrize(("proposed", "proposed_at", "state"), PR_CASES)
def test_pr_mode_compares_with_the_living_branch(proposed, proposed_at, state: str) -> None:
    verdict = decide(
        newest=target(**PR),
        current=entry("1.4.0"),
        current_pushed_at=T0 - timedelta(days=2),
        branch="imagebump/staging/x",
        proposed=proposed,
        proposed_pushed_at=proposed_at,
    )
    assert verdict.state == state, verdict.reason
    if proposed is not None:
        assert "imagebump/staging/x" in verdict.reason


def test_commit_mode_ignores_any_branch() -> None:
    verdict = decide(
        newest=NEWEST,
        current=entry("1.4.0"),
        current_pushed_at=T0 - timedelta(days=2),
        branch="imagebump/staging/x",
        proposed=entry("1.4.2"),
    )
    assert verdict.state == "behind"


# --- what the sweep prints ----------------------------------------------------------------


def _state(state: str, env: str = "staging", path: str = "apps/api") -> TargetState:
    return TargetState(
        repo_url="https://github.com/org/gitops",
        path=path,
        env=env,
        current="1.4.1",
        newest=f"1.4.2@{D2}",
        state=state,
        reason=f"because {state}",
    )


def test_counts_list_every_state_for_every_env() -> None:
    counts = count_states([_state("behind"), _state("behind", path="b"), _state("current", env="")])
    table = {(c.state, c.env): c.count for c in counts}
    assert table[("behind", "staging")] == 2 and table[("current", "none")] == 1
    assert len(counts) == 2 * len(STATES) and table[("ahead", "staging")] == 0  # zeros reset a gauge


def test_table_lists_worst_first_and_totals() -> None:
    text = render_table(
        [_state("current", path="a"), _state("behind", path="b"), _state("unknown", path="c")]
    )
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["STATE", "ENV", "OVERLAY"]
    assert [line.split()[0] for line in lines[1:4]] == ["behind", "unknown", "current"]
    assert "1.4.2@sha256:222222222222…" in text and D2 not in text  # digests shortened for people
    assert lines[-1] == (
        "3 target(s): 1 behind, 1 current, 0 ahead, 0 proposed, 1 unknown, 0 held, 0 pinned, 0 branch-taken"
    )


def test_a_branch_taken_target_is_a_state_of_the_table_and_the_counts() -> None:
    rows = [_state("current", path="a"), _state("branch-taken", path="b"), _state("behind", path="c")]
    lines = render_table(rows).splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["behind", "branch-taken", "current"]
    assert lines[-1].endswith("1 branch-taken")
    table = {(c.state, c.env): c.count for c in count_states(rows)}
    assert table[("branch-taken", "staging")] == 1
    assert TargetState.model_validate_json(rows[1].model_dump_json()).state == "branch-taken"


def test_the_pure_core_reads_neither_ecr_nor_git() -> None:
    """decide and pick_newest live in steps.reconcile.decide, which imports no I/O module (issue 14)."""
    import subprocess
    import sys
    from pathlib import Path

    program = (
        "import sys, steps.reconcile.decide\n"
        "io = ('boto3', 'botocore', 'steps.aws.ecr', 'steps.git', 'steps.kustomize', 'steps.rules')\n"
        "print(sorted(m for m in io if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", program], check=False, capture_output=True, text=True, cwd=root, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("given", "error"),
    [
        pytest.param({}, "", id="defaults"),
        pytest.param({"concurrency": 64, "limit": 0, "full": True}, "", id="bounds"),
        pytest.param({"concurrency": 0}, "concurrency 0: must be between 1 and 64", id="concurrency-0"),
        pytest.param({"concurrency": 65}, "concurrency 65: must be between 1 and 64", id="concurrency-65"),
        pytest.param({"limit": -1}, "limit -1: must be 0 or more", id="limit-negative"),
    ],
)
def test_the_input_model_checks_the_parameters(given: dict, error: str) -> None:
    """The sweep's typed input: one declaration of its parameters and their ranges, a ConfigError
    (exit 2, never retried) naming the parameter, checked before any I/O."""
    if error:
        with pytest.raises(ConfigError, match=re.escape(error)):
            ReconcileInput.of(**given)
        with pytest.raises(ConfigError, match=re.escape(error)):
            scan_targets(None, **given)  # refused before the rules or ECR are looked at
        return
    model = ReconcileInput.of(**given)
    assert (model.concurrency, model.limit, model.full) == (
        given.get("concurrency", 8),
        given.get("limit", 500),
        given.get("full", False),
    )


def test_run_refuses_a_bad_parameter_before_reading_the_rules(
    tmp_path, monkeypatch, outputs_dir, capfd
) -> None:
    monkeypatch.setenv("IMAGEBUMP_RULES_FILE", str(tmp_path / "absent.yaml"))
    with pytest.raises(SystemExit) as exited:
        run(concurrency=8, limit=-3, full=False)
    assert exited.value.code == 2  # bad input, never retried
    err = capfd.readouterr().err
    assert "limit -3: must be 0 or more" in err and "absent.yaml" not in err  # the rules were not read


def test_reliability_guarantee_1_states_the_bound_in_the_issues_words() -> None:
    """Issue 13: guarantee 1 carries the bound "every push is reflected within one reconcile interval"
    (issue 13 said "sweep"; issue 32 made "reconcile" the one word), on one line (so it can be found
    as written), for both runtimes."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "RELIABILITY.md").read_text(encoding="utf-8")
    section = text.split("### 1.", 1)[1].split("\n### 2.", 1)[0]
    lines = section.splitlines()
    body = [line for line in lines[1:] if "every push is reflected within one reconcile interval" in line]
    assert body, "guarantee 1 must state the bound in the issue's words on one line"
    assert "runtime" in lines[0] and "imagebump run --local" in section and "CronWorkflow" in section


def test_the_report_output_of_a_cluster_sweep_stays_small() -> None:
    """2,000 unknown targets with long reasons: the report a cluster sweep outputs (a Workflow
    output parameter, kept in etcd) is capped, worst first, far below Argo's ~1 MB budget."""
    import json

    from steps.reconcile.report import cap_report
    from steps.reconcile.step import REPORT_LIMIT

    reason = "cannot read https://git.example/o/r: " + "x" * 300
    report = [_state("unknown", path=f"apps/a{i:04}") for i in range(2000)]
    report = [t.model_copy(update={"reason": reason}) for t in report] + [_state("behind", path="apps/zz")]

    rows, left_out = cap_report(report, REPORT_LIMIT)

    assert len(rows) == REPORT_LIMIT and left_out == 2001 - REPORT_LIMIT
    assert rows[0].state == "behind"  # worst first: what needs a look is kept
    assert len(json.dumps([r.model_dump() for r in rows])) < 256_000
    assert cap_report(report[:5], REPORT_LIMIT) == (report[:5], 0)
    assert cap_report(report, None) == (report, 0)


def test_beyond_the_report_limit_the_live_window_moves_so_every_current_target_is_looked_at() -> None:
    """A sweep asks Argo CD about at most REPORT_LIMIT current targets (one output parameter); with
    more, the window moves each 10-minute sweep slot, so within ceil(n / limit) sweeps every target
    has had its live state read."""
    from steps.reconcile.step import REPORT_LIMIT, _live_window

    few = [f"t{i}" for i in range(5)]
    assert _live_window(few, now=0) == few  # type: ignore[arg-type]
    many = [f"t{i}" for i in range(2 * REPORT_LIMIT + 7)]
    seen: set[str] = set()
    sweeps = -(-len(many) // REPORT_LIMIT)
    for slot in range(sweeps):
        window = _live_window(many, now=slot * 600.0)  # type: ignore[arg-type]
        assert len(window) == REPORT_LIMIT
        seen.update(window)
    assert seen == set(many)
