"""No alarm unless the wrong image runs (issue 35), through the moments of a sync Argo CD really shows.

Argo CD writes a sync's ``status.history`` entry before the sync operation ends (argo-cd
``controller/sync.go`` ``SyncAppState``: ``persistRevisionHistory``), and compares the live state
again only after it (``appcontroller.go`` ``processRequestedAppOperation``: ``requestAppRefresh``).
Until then ``status.sync`` still reads ``OutOfSync`` at the new revision and ``summary.images``
the Pods of before. A spec or project error sets ``sync`` and ``health`` to ``Unknown`` and keeps
the revision. None of these says the wrong image runs, so none may block the promotion (a
``blocked`` message is sent once and never taken back); a comparison made after the deploy that
shows another image running does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from steps.gate.decide import decide
from steps.gate.facts import application_facts

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SOAK = timedelta(minutes=30)
OLD, NEW = f"{1:040x}", f"{2:040x}"
IMAGES = {OLD: "team/api:1.0.0", NEW: "team/api:2.0.0"}
WANTED = "team/api:2.0.0"


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _app(moment: str, deployed: datetime, health: str, running: str) -> dict:
    """An Application whose newest deploy (``deployed``) is NEW, at ``moment`` of its sync."""
    history = [
        {"id": 1, "revision": OLD, "deployedAt": _stamp(T0)},
        {"id": 2, "revision": NEW, "deployedAt": _stamp(deployed)},
    ]
    status: dict = {"history": history, "health": {"status": health}, "summary": {"images": [running]}}
    before = deployed - timedelta(seconds=20)  # the comparison that started the sync
    if moment == "operation-running":
        status |= {
            "sync": {"status": "OutOfSync", "revision": NEW},
            "operationState": {"phase": "Running", "startedAt": _stamp(before)},
            "reconciledAt": _stamp(before),
        }
    elif moment == "not-compared-since":
        status |= {
            "sync": {"status": "OutOfSync", "revision": NEW},
            "operationState": {"phase": "Succeeded", "finishedAt": _stamp(deployed)},
            "reconciledAt": _stamp(before),
        }
    elif moment == "spec-error":
        status |= {
            "sync": {"status": "Unknown", "revision": NEW},
            "health": {"status": "Unknown"},
            "conditions": [{"type": "InvalidSpecError", "message": "project not found"}],
            "reconciledAt": _stamp(deployed + timedelta(minutes=1)),
        }
    else:  # compared after the deploy: what it says is what runs
        synced = "Synced" if running == WANTED else "OutOfSync"
        status |= {
            "sync": {"status": synced, "revision": NEW},
            "operationState": {"phase": "Succeeded", "finishedAt": _stamp(deployed)},
            "reconciledAt": _stamp(deployed + timedelta(seconds=5)),
        }
    return {"status": status}


@settings(max_examples=200, deadline=None)
@given(
    moment=st.sampled_from(["operation-running", "not-compared-since", "spec-error"]),
    minutes=st.integers(1, 90),
    health=st.sampled_from(["Healthy", "Progressing", "Degraded", "Unknown"]),
    running=st.sampled_from(["team/api:1.0.0", WANTED]),
    seconds_later=st.integers(0, 600),
)
def test_a_sync_in_flight_or_an_argo_cd_error_never_blocks(moment, minutes, health, running, seconds_later):
    deployed = T0 + timedelta(minutes=minutes)
    if moment == "spec-error":
        running = WANTED  # what the last comparison before the error saw: the right image runs
    app = _app(moment, deployed, health, running)
    now = deployed + timedelta(seconds=seconds_later)
    got = decide("api:2", WANTED, "staging", SOAK, application_facts(app, None, IMAGES.get, now=now), now)
    assert got.state == "waiting", got


@given(minutes=st.integers(1, 90), health=st.sampled_from(["Healthy", "Progressing"]))
def test_a_comparison_after_the_deploy_that_shows_another_image_blocks(minutes, health):
    deployed = T0 + timedelta(minutes=minutes)
    app = _app("compared", deployed, health, "team/api:1.0.0")
    now = deployed + timedelta(minutes=1)
    got = decide("api:2", WANTED, "staging", SOAK, application_facts(app, None, IMAGES.get, now=now), now)
    assert (got.state, got.reason) == ("blocked", "mismatch")
