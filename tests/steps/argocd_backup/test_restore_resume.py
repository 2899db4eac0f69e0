"""A restore that fails part-way says how far it got, and the same command finishes it.

Kubernetes is the FAKE API server of :mod:`tests.fakes.kube` (no real one runs here), reached over
HTTP through the real adapter (:class:`steps.kube.client.KubernetesApi`); it fails the Nth write
on request (:meth:`tests.fakes.kube.FakeKube.fail_write`: a status, or the connection cut). S3 is
moto's server.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from steps.argocd_backup import archive, restore
from steps.argocd_backup import export as backup_export
from steps.domain.errors import EXIT_CONFIG, EXIT_TRANSIENT, ImagebumpError
from steps.kube import api as kube
from steps.kube import client as kube_client
from tests.fakes.kube import APP_FINALIZER, SECRET_VALUES, FakeKube, FakeKubeServer, seeded


@pytest.fixture()
def s3(moto):
    return moto.client("s3")


@pytest.fixture()
def archive_url(s3) -> str:
    bucket = f"resume-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return backup_export.export_backup(api=seeded("argocd", apps=6), s3=s3, bucket=bucket).url


def _drifted() -> FakeKube:
    """The same Argo CD, drifted from the archive: two Applications gone (created back), argocd-cm,
    argocd-secret and an AppProject changed (replaced), an Application the archive lacks (pruned:
    its finalizer removed, then deleted — two API writes)."""
    fake = seeded("argocd", apps=6)
    for name in ("app-001", "app-002"):
        fake.objects.pop(("applications", "argocd", name))
    cm = fake.objects[("configmaps", "argocd", "argocd-cm")]
    cm["data"] = {**cm.get("data", {}), "url": "https://drifted.example.com"}
    secret = fake.objects[("secrets", "argocd", "argocd-secret")]
    secret["data"] = {**secret.get("data", {}), "drift": "ZHJpZnQ="}
    project = fake.objects[("appprojects", "argocd", "team-a")]
    project["spec"]["description"] = "drifted"
    fake.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "late", "namespace": "argocd", "finalizers": [APP_FINALIZER]},
            "spec": {"project": "default"},
        }
    )
    return fake


#: The writes the restore of the archive into :func:`_drifted` makes, in order (7 API writes: the
#: prune of ``late`` removes its finalizer first).
WRITES = [
    "replaced ConfigMap/argocd-cm -n argocd",
    "replaced Secret/argocd-secret -n argocd",
    "replaced AppProject/team-a -n argocd",
    "created Application/app-001 -n argocd",
    "created Application/app-002 -n argocd",
    "deleted Application/late -n argocd",
]


@pytest.fixture()
def target(tmp_path: Path) -> Iterator[tuple[FakeKube, kube_client.KubernetesApi]]:
    fake = _drifted()
    with FakeKubeServer(fake) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        yield fake, api


def _restore(url: str, s3, api, lines: list[str]):
    return restore.restore(
        url, api_factory=lambda: api, s3=s3, do_apply=True, prune=True, progress=lines.append
    )


def test_every_write_is_reported_as_it_is_done(archive_url, s3, target):
    fake, api = target
    seen: list[tuple[str, int]] = []  # each line, with how many writes the API server had received
    restore.restore(
        archive_url,
        api_factory=lambda: api,
        s3=s3,
        do_apply=True,
        prune=True,
        progress=lambda line: seen.append((line, len(fake.writes()))),
    )
    # each line right after its write, before the next one (the prune of `late` is two writes)
    assert seen == [(line, i + 1) for i, line in enumerate(WRITES[:-1])] + [(WRITES[-1], 7)]


@pytest.mark.parametrize(
    ("write", "code", "done", "failed", "exit_code", "reason"),
    [
        pytest.param(1, 503, 0, "replace ConfigMap/argocd-cm -n argocd", EXIT_TRANSIENT, "unable to handle", id="first-503"),
        pytest.param(2, 422, 1, "replace Secret/argocd-secret -n argocd", EXIT_CONFIG, "(422): Invalid", id="secret-422"),
        pytest.param(4, 0, 3, "create Application/app-001 -n argocd", EXIT_TRANSIENT, "API server unreachable", id="middle-connection-lost"),
        pytest.param(5, 422, 4, "create Application/app-002 -n argocd", EXIT_CONFIG, 'admission webhook "validate.policy.example.com" denied', id="middle-422"),
        pytest.param(7, 429, 5, "delete Application/late -n argocd", EXIT_TRANSIENT, "answered 429", id="last-429"),
    ],
)  # fmt: skip
def test_a_restore_failing_at_any_write_says_how_far_it_got_and_a_rerun_finishes_it(
    archive_url, s3, target, write, code, done, failed, exit_code, reason
):
    fake, api = target
    fake.fail_write(write, code)
    lines: list[str] = []
    with pytest.raises(ImagebumpError) as info:
        _restore(archive_url, s3, api, lines)
    message = str(info.value)
    assert info.value.exit_code == exit_code
    assert message.startswith(f"{done} of {len(WRITES)} writes done; re-run the same command to finish.")
    assert f"Could not {failed}: " in message and reason in message
    assert lines == WRITES[:done], "each write done was printed, and only those"
    for value in SECRET_VALUES:
        assert value not in message

    # the same command again finishes the restore: the cluster equals the archive
    lines.clear()
    _restore(archive_url, s3, api, lines)
    assert lines == WRITES[done:]
    check, _ = restore.restore(archive_url, api_factory=lambda: api, s3=s3, prune=True)
    assert check.count(restore.UNCHANGED) == len(check.entries)
    archived = restore.load(archive_url, s3=s3).objects
    for obj in archived:
        if obj["kind"] != "AppProject":  # its status gets project tokens; the plan above compares it
            live = fake.stored(obj["kind"], "argocd", obj["metadata"]["name"])
            assert live is not None and archive.sanitise(live) == obj, archive.show(archive.key(obj))
    assert fake.stored("Application", "argocd", "late") is None
    assert fake.cascaded == [], "the pruned Application's finalizer was removed before it was deleted"


def test_nothing_is_written_after_the_failed_write(archive_url, s3, target):
    fake, api = target
    fake.fail_write(1, 422)
    with pytest.raises(ImagebumpError) as info:
        _restore(archive_url, s3, api, [])
    assert info.value.exit_code == EXIT_CONFIG
    assert [verb for verb, *_ in fake.writes()] == ["update"], "the failed write was the last one tried"
    assert fake.stored("Application", "argocd", "app-001") is None


def test_a_write_that_times_out_is_transient_and_a_rerun_finishes(archive_url, s3, tmp_path):
    """The API server takes the 4th write (a create) and never answers: the client gives up after
    its timeout (0.5 s here), the restore exits 75, and the same command then finishes."""
    fake = _drifted()
    with FakeKubeServer(fake) as server:
        kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
        api = kube_client.KubernetesApi.from_config(kubeconfig=kubeconfig, timeout=0.5)
        fake.fail_write(4, -1)
        lines: list[str] = []
        try:
            with pytest.raises(ImagebumpError) as info:
                _restore(archive_url, s3, api, lines)
        finally:
            fake.hung.set()  # let the held request go
        assert info.value.exit_code == EXIT_TRANSIENT
        assert str(info.value).startswith(
            f"3 of {len(WRITES)} writes done; re-run the same command to finish."
        )
        assert f"API server {server.url} (context fake) did not answer within 0.5s" in str(info.value)
        lines.clear()
        _restore(archive_url, s3, api, lines)
        assert lines == WRITES[3:]


def _terminating(fake: FakeKube, name: str) -> None:
    """A person deleted Application ``name``; Argo CD's resources-finalizer keeps it (Terminating)
    while Argo CD deletes what it deployed."""
    key = ("applications", "argocd", name)
    fake.objects[key]["metadata"]["finalizers"] = [APP_FINALIZER]
    fake.delete(kube.APPLICATION, "argocd", name)
    assert fake.objects[key]["metadata"].get("deletionTimestamp")  # still there, going away


def test_an_application_being_deleted_is_created_again_once_it_is_gone(
    archive_url, s3, tmp_path, monkeypatch
):
    """Its deletionTimestamp is server metadata, so it compares equal to the archive; yet it will be
    gone: the plan creates it again, and the apply waits for Argo CD to finish deleting it first."""
    fake = seeded("argocd", apps=6)
    _terminating(fake, "app-003")
    waited: list[float] = []

    def argo_cd_finishes(seconds: float) -> None:  # the finalizer's work done: the object goes
        waited.append(seconds)
        fake.objects.pop(("applications", "argocd", "app-003"), None)

    monkeypatch.setattr(restore, "_sleep", argo_cd_finishes)
    lines: list[str] = []
    with FakeKubeServer(fake) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        plan, report = restore.restore(archive_url, api_factory=lambda: api, s3=s3)
        (entry,) = [e for e in plan.entries if e.name == "app-003"]
        assert entry.action == restore.CREATE and "being deleted now" in report
        restore.restore(archive_url, api_factory=lambda: api, s3=s3, do_apply=True, progress=lines.append)
    assert lines == ["created Application/app-003 -n argocd"] and len(waited) == 1
    again = fake.objects[("applications", "argocd", "app-003")]
    assert not again["metadata"].get("deletionTimestamp")


def test_an_application_that_stays_terminating_is_left_to_a_rerun(archive_url, s3, tmp_path, monkeypatch):
    fake = seeded("argocd", apps=6)
    _terminating(fake, "app-003")
    clock = iter(range(0, 10_000, 30))
    monkeypatch.setattr(restore, "_now", lambda: float(next(clock)))
    monkeypatch.setattr(restore, "_sleep", lambda seconds: None)
    with FakeKubeServer(fake) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        with pytest.raises(ImagebumpError) as failed:
            restore.restore(archive_url, api_factory=lambda: api, s3=s3, do_apply=True)
    assert failed.value.exit_code == EXIT_TRANSIENT
    assert "re-run the same command" in str(failed.value) and "still being deleted" in str(failed.value)


def test_an_immutable_secret_that_drifted_is_deleted_and_created_as_archived(archive_url, s3, tmp_path):
    """Kubernetes refuses to change an immutable Secret's data (422: field is immutable when
    `immutable` is set), so a replace could never finish the restore, re-run or not."""
    fake = seeded("argocd", apps=6)
    secret = fake.objects[("secrets", "argocd", "argocd-secret")]
    secret["immutable"] = True
    secret["data"] = {**secret.get("data", {}), "drift": "ZHJpZnQ="}
    lines: list[str] = []
    with FakeKubeServer(fake) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        _plan, report = restore.restore(archive_url, api_factory=lambda: api, s3=s3)
        assert "Secret/argocd-secret -n argocd (it is immutable: deleted, then created as archived)" in report
        restore.restore(archive_url, api_factory=lambda: api, s3=s3, do_apply=True, progress=lines.append)
        after, _ = restore.restore(archive_url, api_factory=lambda: api, s3=s3)
    assert lines == ["replaced Secret/argocd-secret -n argocd"]
    restored = fake.objects[("secrets", "argocd", "argocd-secret")]
    assert "drift" not in restored.get("data", {}) and not restored.get("immutable")
    assert {e.action for e in after.entries} == {restore.UNCHANGED}


def test_a_namespace_being_deleted_is_refused_before_any_write(archive_url, s3, tmp_path):
    """The API server refuses new objects in a Terminating namespace (NamespaceLifecycle, 403): the
    plan says so, and --apply refuses before the first write instead of failing part-way."""
    fake = _drifted()
    fake.terminating.add("argocd")
    with FakeKubeServer(fake) as server:
        api = kube_client.KubernetesApi.from_config(kubeconfig=str(server.write_kubeconfig(tmp_path / "kc")))
        plan, report = restore.restore(archive_url, api_factory=lambda: api, s3=s3)
        assert plan.terminating_namespaces == ["argocd"] and "namespace argocd is being deleted" in report
        before = len(fake.writes())
        with pytest.raises(ImagebumpError) as refused:
            restore.restore(archive_url, api_factory=lambda: api, s3=s3, do_apply=True)
    assert refused.value.exit_code == EXIT_TRANSIENT and refused.value.reason == "namespace-terminating"
    assert len(fake.writes()) == before  # nothing written
