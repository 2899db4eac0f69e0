"""The gate's facts (issue 35) as properties: whatever Argo CD's recorded history and health, an
image is never promoted unless the environment ran it, synced and Healthy, for the whole soak since
its own deploy, and never after another image replaced it or the environment went Degraded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from steps.gate.decide import decide
from steps.gate.facts import application_facts

T0 = datetime(2026, 12, 1, tzinfo=UTC)
SOAK = timedelta(minutes=30)
IMAGES = ("wanted", ":1.0.0", ":3.0.0")


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@st.composite
def applications(draw):
    steps = draw(st.lists(st.tuples(st.sampled_from(IMAGES), st.integers(1, 40)), min_size=1, max_size=6))
    at, history, images = T0, [], {}
    for i, (image, minutes) in enumerate(steps):
        at += timedelta(minutes=minutes)
        revision = f"{i:040x}"
        images[revision] = image
        history.append({"id": i, "revision": revision, "deployedAt": _stamp(at)})
    health = draw(st.sampled_from(("Healthy", "Degraded", "Progressing")))
    changed = at + timedelta(minutes=draw(st.integers(0, 40)))
    app = {
        "status": {
            "history": history,
            "sync": {"status": "Synced", "revision": history[-1]["revision"]},
            "health": {"status": health, "lastTransitionTime": _stamp(changed)},
            "summary": {"images": [images[history[-1]["revision"]]]},  # Pods run what was synced
        }
    }
    now = changed + timedelta(minutes=draw(st.integers(0, 120)))
    return app, images, now


@settings(max_examples=300, deadline=None)
@given(applications())
def test_promoted_only_after_the_whole_soak_of_the_image_as_last_deployed(case) -> None:
    app, images, now = case
    facts = application_facts(app, None, images.get, now=now)
    got = decide("api:2", "wanted", "staging", SOAK, facts, now)
    history = app["status"]["history"]
    wanted_at = [
        datetime.fromisoformat(h["deployedAt"].replace("Z", "+00:00"))
        for h in history
        if images[h["revision"]] == "wanted"
    ]
    if got.state == "promoted":
        assert wanted_at and got.live_since is not None
        assert now - got.live_since >= SOAK and got.live_since >= min(wanted_at)
        first = min(wanted_at)
        replaced = [
            datetime.fromisoformat(h["deployedAt"].replace("Z", "+00:00"))
            for h in history
            if images[h["revision"]] != "wanted"
            and datetime.fromisoformat(h["deployedAt"].replace("Z", "+00:00")) > first
        ]
        # another image deployed after it arrived: only if the soak had already passed by then
        assert all(r - got.live_since >= SOAK for r in replaced)
    if images[history[-1]["revision"]] == "wanted" and app["status"]["health"]["status"] == "Degraded":
        assert got.state != "promoted" or got.live_since + SOAK <= datetime.fromisoformat(
            app["status"]["health"]["lastTransitionTime"].replace("Z", "+00:00")
        )


@settings(max_examples=200, deadline=None)
@given(applications())
def test_a_persons_hold_or_rollback_during_the_soak_blocks_it(case) -> None:
    app, images, now = case
    alone = decide("api:2", "wanted", "staging", SOAK, application_facts(app, None, images.get, now=now), now)
    if alone.state != "waiting" or alone.live_since is None:
        return  # not in the middle of its soak
    if images[app["status"]["history"][-1]["revision"]] != "wanted":
        return
    for person in ("held", "rolled-back"):
        facts = application_facts(app, None, images.get, person=person, now=now, wanted="wanted")
        got = decide("api:2", "wanted", "staging", SOAK, facts, now)
        assert (got.state, got.reason) == ("blocked", person)
