"""verify-live's pure judgement (:func:`steps.verify_live.decide.judge`), table-tested, and its
promise as a property (issue 30 item 7): no ``mismatch`` unless, after the post-sync comparison, a
Pod runs another image of the overlay's repository (and none the image Git holds) in an Application
that keeps Pods running. Statuses are shaped as Argo CD writes them: ``summary.images`` lists the
images of Pods only (argo-cd ``controller/cache/info.go`` ``populatePodInfo``), so a Deployment
scaled to zero lists none and a CronJob lists its last run's completed Pod.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from steps.verify_live import decide
from steps.verify_live import step as verify_live
from steps.verify_live.decide import RevisionFacts

REPO = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
NEW, OLD = f"{REPO}:1.1.0", f"{REPO}:1.0.0"
SIDECAR = "docker.io/library/busybox:1.36"
COMMIT, BEFORE = "a" * 40, "b" * 40
SYNCED_AT, COMPARED_AT = "2026-12-03T10:00:00Z", "2026-12-03T10:00:05Z"


def facts(revision: str) -> RevisionFacts:
    return RevisionFacts(revision == COMMIT, NEW if revision == COMMIT else None)


def resources(*kinds: str) -> list[dict[str, Any]]:
    return [
        {"group": "apps", "version": "v1", "kind": k, "namespace": "prod", "name": k.lower()} for k in kinds
    ]


def app(
    images: list[str] | None = None,
    *,
    kinds: tuple[str, ...] = ("Deployment",),
    health: str = "Healthy",
    revision: str = COMMIT,
    compared: str = COMPARED_AT,
    multi: bool = False,
    **status: Any,
) -> dict[str, Any]:
    sync: dict[str, Any] = {"status": "Synced"}
    result: dict[str, Any] = {}
    if multi:
        sync["revisions"] = ["18.0.0", revision]
        result["revisions"] = ["18.0.0", revision]
    else:
        sync["revision"] = revision
        result["revision"] = revision
    body = {
        "sync": sync,
        "operationState": {"phase": "Succeeded", "finishedAt": SYNCED_AT, "syncResult": result},
        "reconciledAt": compared,
        "health": {"status": health},
        "resources": resources(*kinds),
        "summary": {"images": [NEW, SIDECAR] if images is None else images},
    }
    body.update(status)
    return {
        "metadata": {"namespace": "argocd", "name": "api-prod"},
        "spec": {"syncPolicy": {"automated": {"prune": True}}},
        "status": body,
    }


def _no_sync_since(images: list[str], **status: Any) -> dict[str, Any]:
    """Synced at the commit, the last sync operation at a revision before it (no sync since)."""
    operation = {"phase": "Succeeded", "finishedAt": SYNCED_AT, "syncResult": {"revision": BEFORE}}
    return app(images, operationState=operation, **status)


def judge(application: dict[str, Any], multi: bool = False) -> decide.Judgement:
    return decide.decide(application, 1 if multi else None, NEW, facts)


@pytest.mark.parametrize(
    ("application", "state"),
    [
        pytest.param(app(), "live", id="running-the-new-image"),
        pytest.param(app([f"{REPO}:1.1.0@sha256:" + "c" * 64]), "live", id="tag-and-digest"),
        pytest.param(app([OLD, SIDECAR]), "mismatch", id="deployment-runs-the-old-image"),
        pytest.param(app([OLD], health="Degraded"), "mismatch", id="degraded-running-the-old-image"),
        pytest.param(app([OLD, NEW], health="Progressing"), "syncing", id="rolling-update"),
        pytest.param(app([OLD], health="Progressing"), "syncing", id="rollout-not-started"),
        pytest.param(app([]), "idle", id="scaled-to-zero"),
        pytest.param(app([SIDECAR]), "idle", id="only-other-repositories-run"),
        pytest.param(app([OLD], kinds=("CronJob",)), "idle", id="cronjob-last-run-before-the-sync"),
        pytest.param(app([OLD], kinds=("Job", "ConfigMap")), "idle", id="job-completed-before"),
        pytest.param(app([], kinds=("CronJob",)), "idle", id="cronjob-never-ran"),
        pytest.param(app([OLD], kinds=()), "mismatch", id="resources-unknown-a-running-pod"),
        pytest.param(app([OLD], kinds=("CronJob", "StatefulSet")), "mismatch", id="statefulset-and-cronjob"),
        pytest.param(app([], health="Progressing"), "syncing", id="scaling-up"),
        pytest.param(app([], health="Missing"), "syncing", id="idle-but-missing"),
        pytest.param(app([OLD], compared="2026-12-03T09:59:00Z"), "syncing", id="not-compared-after-sync"),
        pytest.param(app([OLD], revision=BEFORE), "syncing", id="synced-before-the-commit"),
        pytest.param(app([OLD], multi=True), "mismatch", id="multi-source-old-image"),
        # a commit Argo CD renders the same (a comment, a hold marker): Synced at it with no sync
        # operation since (appcontroller.go autoSync skips an app already Synced): judged as is
        pytest.param(_no_sync_since([NEW, SIDECAR]), "live", id="synced-without-an-operation"),
        pytest.param(_no_sync_since([OLD, SIDECAR]), "mismatch", id="synced-without-an-operation-old-pods"),
        pytest.param(
            _no_sync_since([NEW], sync={"status": "OutOfSync", "revision": COMMIT}),
            "syncing",
            id="out-of-sync-waits-for-the-operation",
        ),
        pytest.param(app([], multi=True), "idle", id="multi-source-scaled-to-zero"),
        pytest.param(
            app([OLD], conditions=[{"type": "ComparisonError", "message": "x"}]),
            "syncing",
            id="error-condition",
        ),
    ],
)
def test_judgement_table(application: dict[str, Any], state: str) -> None:
    multi = "revisions" in application["status"]["sync"]
    judgement = judge(application, multi)
    assert judgement.state == state, judgement.reason
    if state == "idle":
        assert judgement.revision == COMMIT


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("summary",), "images"),
        (("summary", "images"), "a-string"),
        (("summary", "images"), [1, 2]),
        (("sync",), ["Synced"]),
        (("sync", "revision"), 42),
        (("sync", "revision"), "x" * 200_000),
        (("sync", "revision"), "--upload-pack=evil"),
        (("operationState",), "Succeeded"),
        (("health",), "Healthy"),
        (("conditions",), {"type": "SyncError"}),
        (("resources",), "Deployment"),
    ],
    ids=[
        "summary-not-object",
        "images-string",
        "images-numbers",
        "sync-list",
        "revision-number",
        "revision-200kb",
        "revision-option",
        "operation-string",
        "health-string",
        "conditions-object",
        "resources-string",
    ],
)
def test_wrongly_typed_status_fields_give_unknown_with_the_field(path: tuple[str, ...], value: Any) -> None:
    """Issue 31 item 8: never an AttributeError, never a 200 KB revision handed to git."""
    application = app([OLD])
    node = application["status"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    asked: list[str] = []

    def recording(revision: str) -> RevisionFacts:
        asked.append(revision)
        return facts(revision)

    judgement = decide.decide(application, None, NEW, recording)
    assert judgement.state == "unknown"
    assert "status." + path[0] in judgement.reason
    assert len(judgement.reason) < 500
    assert all(len(r) in (40, 64) for r in asked)


def test_a_status_that_is_not_an_object_is_unknown() -> None:
    assert decide.decide({"status": ["x"]}, None, NEW, facts).state == "unknown"
    assert decide.decide({"metadata": "x", "status": None}, None, NEW, facts).state == "manual-sync"


def test_an_idle_outcome_succeeds_and_a_live_one_wins_over_idle() -> None:
    idle = decide.Judgement("idle", "no Pod")
    live = decide.Judgement("live", "running")
    assert verify_live.overall([idle], timed_out=False) == "idle"
    assert verify_live.overall([idle, live], timed_out=False) == "live"
    assert verify_live.overall([idle, decide.Judgement("syncing", "x")], timed_out=True) == "timeout"
    assert verify_live.overall([decide.Judgement("unknown", "x")], timed_out=False) == ""
    assert "idle" in verify_live.RESULTS


def test_bounded_outputs_keep_the_repositorys_images_first() -> None:
    many = [f"docker.io/other/img{i}:1" for i in range(5000)] + [OLD]
    out = verify_live.VerifyLiveOutput(
        result="mismatch",
        message="m" * 100_000,
        applications=[
            verify_live.AppLive(
                namespace="argocd", name=f"a{i}", state="live", reason="r" * 5000, images=many
            )
            for i in range(200)
        ],
    )
    small = verify_live.bounded(out, REPO)
    assert len(json.dumps(small.model_dump())) < 200_000
    assert len(small.applications) == verify_live.MAX_APPLICATIONS
    assert small.applications[0].images[0] == OLD
    assert "150 more Application(s)" in small.message


# --- the promise, as a property -------------------------------------------------------------------

_TAGS = st.sampled_from(["1.0.0", "1.1.0", "0.9.0", "2.0.0-rc1"])
_IMAGE = st.one_of(
    _TAGS.map(lambda t: f"{REPO}:{t}"),
    st.just(f"{REPO}@sha256:" + "d" * 64),
    st.just(SIDECAR),
    st.just("quay.io/other/thing:1"),
)
_KINDS = st.lists(
    st.sampled_from(
        ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job", "Service", "ConfigMap", "Rollout"]
    ),
    max_size=4,
)


@st.composite
def statuses(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    """An Application status as Argo CD may write it: Pods present or not (scaled to zero), a
    rolling update (old and new, Progressing), CronJobs/Jobs only, multi-source, before or after the
    post-sync comparison, at the commit or before it."""
    multi = draw(st.booleans())
    images = draw(st.lists(_IMAGE, max_size=5, unique=True))
    application = app(
        images,
        kinds=tuple(draw(_KINDS)),
        health=draw(st.sampled_from(["Healthy", "Progressing", "Degraded", "Missing", "Suspended", ""])),
        revision=draw(st.sampled_from([COMMIT, BEFORE])),
        compared=draw(st.sampled_from([COMPARED_AT, "2026-12-03T09:59:59Z", ""])),
        multi=multi,
    )
    status = application["status"]
    if draw(st.booleans()):
        status["sync"]["status"] = draw(st.sampled_from(["OutOfSync", "Unknown"]))
    if draw(st.booleans()):
        status["operationState"]["phase"] = draw(st.sampled_from(["Running", "Failed", "Succeeded"]))
    if draw(st.booleans()):
        del status["resources"]
    return application, multi


def _pod_runs_another_image_after_the_comparison(application: dict[str, Any], multi: bool) -> bool:
    status = application["status"]
    revision = status["sync"]["revisions"][1] if multi else status["sync"]["revision"]
    compared_after_sync = bool(status["reconciledAt"]) and status["reconciledAt"] >= SYNCED_AT
    images = status["summary"]["images"]
    others = [i for i in images if decide.repository(i) == REPO and not decide.image_running(NEW, [i])]
    kinds = {r["kind"] for r in status.get("resources") or []}
    keeps_pods = not kinds or bool(kinds & decide.POD_KEEPING_KINDS)
    return (
        revision == COMMIT
        and status["sync"]["status"] == "Synced"
        and status["operationState"]["phase"] == "Succeeded"
        and compared_after_sync
        and not decide.image_running(NEW, images)
        and bool(others)
        and keeps_pods
    )


@settings(max_examples=400, deadline=None)
@given(statuses())
def test_no_mismatch_unless_a_pod_runs_another_image_of_the_repository(
    drawn: tuple[dict[str, Any], bool],
) -> None:
    application, multi = drawn
    judgement = judge(application, multi)
    if judgement.state == "mismatch":
        assert _pod_runs_another_image_after_the_comparison(application, multi), judgement.reason
    if judgement.state in ("idle", "live"):  # both mean: synced and healthy at the commit
        assert application["status"]["health"]["status"] == "Healthy"
        assert (
            application["status"]["sync"]["revisions"][1]
            if multi
            else application["status"]["sync"]["revision"]
        ) == COMMIT
    if judgement.state == "idle":
        assert not decide.image_running(NEW, application["status"]["summary"]["images"])


@settings(max_examples=200, deadline=None)
@given(statuses())
def test_a_status_that_is_a_mismatch_stays_one_when_unrelated_images_are_added(
    drawn: tuple[dict[str, Any], bool],
) -> None:
    """Sidecars of other repositories never turn a mismatch into something else, nor create one."""
    application, multi = drawn
    before = judge(application, multi).state
    application["status"]["summary"]["images"] = [
        *application["status"]["summary"]["images"],
        "ghcr.io/x/y:1",
    ]
    assert (judge(application, multi).state == "mismatch") == (before == "mismatch")
