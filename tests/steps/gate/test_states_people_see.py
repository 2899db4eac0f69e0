"""The gate's states for shapes Argo CD and people produce that are not failures, or are a person's
decision (an audit of issue 35's gate): each says what holds, never "not live yet" for ever, and
never ``promoted`` on a proof it does not have. Applications are written as Argo CD records them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from steps.gate.evaluate import EnvTarget, combine

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SOAK = timedelta(minutes=30)
REPO = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
OLD, NEW = f"{REPO}:1.0.0", f"{REPO}:2.0.0"
IMAGES = {"r0": OLD, "r1": NEW, "r2": NEW}


def _at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def _stamp(minute: float) -> str:
    return _at(minute).strftime("%Y-%m-%dT%H:%M:%SZ")


def app(history, health="Healthy", changed=None, *, sync="Synced", sync_rev=None, images=None, **extra):
    """``history``: (minute, revision) oldest first; ``changed``: lastTransitionTime's minute (None:
    absent, Argo CD before 2.14); ``images``: summary.images (default: what the newest revision sets)."""
    status = {
        "history": [
            {"id": i, "revision": r, "deployedAt": _stamp(m), "deployStartedAt": _stamp(m - 0.1)}
            for i, (m, r) in enumerate(history)
        ],
        "sync": {"status": sync, "revision": sync_rev or history[-1][1]},
        "health": {"status": health},
        "summary": {"images": [IMAGES[history[-1][1]]] if images is None else images},
        **extra,
    }
    if changed is not None:
        status["health"]["lastTransitionTime"] = _stamp(changed)
    return {"status": status}


def gate(application, minute, person=None):
    staging = EnvTarget("staging", [("argocd/api-staging", None, application)], IMAGES.get, person)
    return combine("api:2.0.0", NEW, "staging", SOAK, [staging], _at(minute))


@pytest.mark.parametrize("changed", [1, None], ids=["lastTransitionTime", "none"])
def test_suspended_waits_saying_suspended(changed) -> None:
    got = gate(app([(0, "r0"), (1, "r1")], "Suspended", changed), 600)
    assert (got.state, got.wait) == ("waiting", "suspended")


@pytest.mark.parametrize("person", ["held", "rolled-back"])
def test_a_hold_or_rollback_before_the_image_arrived_blocks_as_the_persons(person) -> None:
    """Staging held (or rolled back) at 1.0.0: 2.0.0 never arrives there; a person decided, so it is
    ``blocked`` with their reason, not "not live yet" for ever."""
    got = gate(app([(0, "r0")]), 600, person=person)
    assert (got.state, got.reason) == ("blocked", person)


def test_an_argo_cd_rollback_is_a_persons_rollback_not_a_newer_image() -> None:
    """``argocd app rollback`` to r0: Argo CD appends a new history entry with the old revision
    (controller/state.go persistRevisionHistory) and compares OutOfSync with Git's r1."""
    rolled = app([(0, "r0"), (1, "r1"), (12, "r0")], "Healthy", 13, sync="OutOfSync", sync_rev="r1")
    got = gate(rolled, 14)
    assert (got.state, got.reason) == ("blocked", "rolled-back")


def test_a_newer_commit_whose_sync_retries_does_not_hide_what_runs() -> None:
    """A later commit r2 fails to apply and Argo CD retries without limit (``phase: Running`` between
    attempts): the deployed r1 keeps being compared, so its soak counts (before: "not live" for ever)."""
    retrying = app(
        [(0, "r0"), (1, "r1")],
        "Healthy",
        2,
        sync="OutOfSync",
        sync_rev="r2",
        reconciledAt=_stamp(300),
        operationState={"phase": "Running", "retryCount": 40, "operation": {"sync": {"revision": "r2"}}},
    )
    assert gate(retrying, 300).state == "promoted"


def test_a_sync_of_the_deployed_revision_still_running_waits() -> None:
    running = app(
        [(0, "r0"), (1, "r1")],
        "Healthy",
        2,
        operationState={"phase": "Running", "operation": {"sync": {"revision": "r1"}}},
    )
    assert gate(running, 300).state == "waiting"


@pytest.mark.parametrize("images", [[], ["docker.io/envoyproxy/envoy:v1.30"]], ids=["no-pods", "sidecar"])
def test_no_pod_running_the_image_waits_idle(images) -> None:
    got = gate(app([(0, "r0"), (1, "r1")], "Healthy", 2, images=images), 600)
    assert (got.state, got.wait) == ("waiting", "idle")


def test_out_of_sync_drift_while_the_pods_run_the_image_is_not_a_mismatch() -> None:
    """Replicas an HPA changed (no ignoreDifferences): OutOfSync at the deployed revision, Healthy,
    every Pod running 2.0.0. The image ran live; blocking it for good (a block now sticks) would block
    on what is not a failure (before: blocked mismatch for ever)."""
    drift = app([(0, "r0"), (1, "r1")], "Healthy", 2, sync="OutOfSync", reconciledAt=_stamp(500))
    assert gate(drift, 500).state == "promoted"


def test_out_of_sync_while_pods_run_another_image_is_a_mismatch() -> None:
    wrong = app(
        [(0, "r0"), (1, "r1")], "Progressing", 2, sync="OutOfSync", images=[OLD], reconciledAt=_stamp(5)
    )
    assert (gate(wrong, 5).state, gate(wrong, 5).reason) == ("blocked", "mismatch")
