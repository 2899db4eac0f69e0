"""A retried step says what its last attempt did, whatever order Argo lists the nodes in (issue 36).

On a cluster the exit handler reads the Workflow from the API. Its ``status.nodes`` has Argo's shape,
which is less kind than one node per step (argo-workflows v4.1):
- A template with a ``retryStrategy`` (all four of ours) runs under a ``Retry`` node. That node
  carries its last attempt's phase and outputs (``operator.go``, ``processNodeRetries``). Its children
  are the attempts, ``NAME(0)``, ``NAME(1)``, ….
- An attempt that failed still has outputs: the wait container saves the parameters whatever the exit
  code, so a file the step never wrote takes the template's ``default``. That is ``targets: []``,
  ``decision: error``, ``action: error`` (``executor/postmain.go``).
- The nodes are a Go map, written with their keys (hashes of the names) sorted. Which attempt comes
  first says nothing of which ran last.

The property: for any targets, any outcome per target and any number of failed attempts before each
step's last one, in any order of the nodes, the outcomes are those of the same run without retries.
Before this was fixed, a failed attempt of resolve-image listed first meant no message at all, and a
failed attempt of edit-kustomize listed last meant ``failed`` for a target that was committed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from steps.notify.workflow_outcomes import image_outcomes, nodes_of
from workflows import names

TEMPLATE = Path(__file__).resolve().parents[3] / names.MANIFESTS_DIR / names.rendered(names.IMAGE_UPDATE)
IMAGE = json.dumps(
    {"registry": "1.dkr.ecr.eu-west-1.amazonaws.com", "repository": "team/api", "tag": "1.4.2"}
)
ROLLBACK = "rollback abc1234 by Alice <a@x> (1.5.0 → 1.4.1, committed 2026-12-03T10:00:00Z)"
APPS = json.dumps([{"namespace": "argocd", "name": "api", "state": "mismatch", "revision": "c0ffee"}])
#: what each target's run ended in: (step, phase, outputs) per step that ran
STORIES = {
    "committed": [
        ("edit-kustomize", "Succeeded", {"decision": "update", "changed": "true"}),
        ("commit-pr", "Succeeded", {"action": "committed", "commit-sha": "c0ffee"}),
    ],
    "held": [("edit-kustomize", "Succeeded", {"decision": "held", "reason": ROLLBACK})],
    "edit-failed": [("edit-kustomize", "Failed", {})],
    "commit-failed": [
        ("edit-kustomize", "Succeeded", {"decision": "update", "changed": "true"}),
        ("commit-pr", "Failed", {}),
    ],
    "mismatch": [
        ("edit-kustomize", "Succeeded", {"decision": "update", "changed": "true"}),
        ("commit-pr", "Succeeded", {"action": "committed", "commit-sha": "c0ffee"}),
        ("verify-live", "Failed", {"result": "mismatch", "image": "x:1.4.2", "applications": APPS}),
    ],
}
PLACE = {"edit-kustomize": "[0].update[0]", "commit-pr": "[0].update[1]", "verify-live": "[1]"}


def _defaults() -> dict[str, dict[str, str]]:
    """Each template's output defaults, as the rendered WorkflowTemplate declares them."""
    doc = yaml.safe_load(TEMPLATE.read_text())
    return {
        t["name"]: {
            p["name"]: str(p["valueFrom"]["default"])
            for p in (t.get("outputs") or {}).get("parameters") or []
            if "default" in (p.get("valueFrom") or {})
        }
        for t in doc["spec"]["templates"]
    }


DEFAULTS = _defaults()


def _node(name: str, template: str, phase: str, outputs: dict[str, str], kind: str = "Pod") -> dict:
    params = [{"name": k, "value": v} for k, v in {**DEFAULTS[template], **outputs}.items()]
    return {
        "name": name,
        "type": kind,
        "templateName": template,
        "phase": phase,
        "outputs": {"parameters": params},
    }


def _step(
    name: str, template: str, phase: str, outputs: dict[str, str], failed_before: int | None
) -> list[dict]:
    """One step's nodes: a single node (``failed_before`` None), or Argo's Retry node with its attempts."""
    if failed_before is None:
        return [_node(name, template, phase, outputs)]
    attempts = [_node(f"{name}({i})", template, "Failed", {}) for i in range(failed_before)]
    last = _node(f"{name}({failed_before})", template, phase, outputs)
    return [_node(name, template, phase, outputs, kind="Retry"), *attempts, last]


def _workflow(stories: list[str], retries: list[int] | None) -> list[dict]:
    """The nodes of a run whose targets end in ``stories``; ``retries`` (one count per step, cycled)
    makes it Argo's shape with that many failed attempts before each step's last, None one node each."""
    counts = iter((retries or [0]) * 64)
    at = (lambda: next(counts)) if retries is not None else (lambda: None)
    targets = [
        {"env": f"e{i}", "path": f"overlays/e{i}", "repo_url": "https://github.com/o/r"}
        for i in range(len(stories))
    ]
    resolve = {"targets": json.dumps(targets), "image": IMAGE}
    nodes = _step("wf[0].resolve-image", "resolve-image", "Succeeded", resolve, at())
    for i, story in enumerate(stories):
        for template, phase, outputs in STORIES[story]:
            name = f'wf[1].update-target({i}:{{"env":"e{i}"}}){PLACE[template]}.{template}'
            nodes += _step(name, template, phase, outputs, at())
    return nodes


def _said(nodes: list[dict]) -> list[tuple[str, str, str]]:
    wf = {"status": {"nodes": {f"wf-{i}": n for i, n in enumerate(nodes)}}}
    return [
        (o.kind, o.target, o.fields.get("commit", ""))
        for o in image_outcomes(nodes_of(wf), "ev-1", "https://argo/wf")
    ]


@settings(max_examples=200, deadline=None)
@given(
    stories=st.lists(st.sampled_from(sorted(STORIES)), min_size=1, max_size=3),
    retries=st.lists(st.integers(0, 3), min_size=1, max_size=8),
    data=st.data(),
)
def test_retries_in_any_node_order_say_what_the_last_attempts_did(stories, retries, data) -> None:
    expected = _said(_workflow(stories, None))
    argo = data.draw(st.permutations(_workflow(stories, retries)), label="nodes in the API's order")
    assert _said(argo) == expected
    assert len(expected) >= len(stories)  # every target says something: no story here is a no-op


def test_a_failed_first_attempt_of_resolve_image_listed_first_still_notifies() -> None:
    nodes = _workflow(["committed"], [1, 0, 0])
    resolve = [n for n in nodes if n["templateName"] == "resolve-image"]
    failed = next(n for n in resolve if n["phase"] == "Failed")
    ordered = [failed] + [n for n in nodes if n is not failed]
    assert _said(ordered) == [("committed", "https://github.com/o/r/overlays/e0", "c0ffee")]


def _failures(failed_before: int) -> list[dict]:
    """``{{workflow.failures}}`` of a run whose resolve-image failed once and was retried, and whose
    edit-kustomize failed for good on attempt ``failed_before``: every failed node, groups too."""
    at = lambda s: f"2026-12-07T10:00:{s:02d}Z"  # noqa: E731 - whole seconds, as Argo writes them
    entries = [
        {
            "displayName": "resolve-image(0)",
            "templateName": "resolve-image",
            "message": "exit code 75: ECR throttled",
            "finishedAt": at(1),
        }
    ]
    entries += [
        {
            "displayName": f"edit-kustomize({i})",
            "templateName": "edit-kustomize",
            "message": "exit code 75: the remote hung up",
            "finishedAt": at(10 + i),
        }
        for i in range(failed_before)
    ]
    last = 10 + failed_before
    entries += [
        {
            "displayName": f"edit-kustomize({failed_before})",
            "templateName": "edit-kustomize",
            "message": "exit code 2: bad overlay",
            "finishedAt": at(last),
        },
        {
            "displayName": "edit-kustomize",
            "templateName": "edit-kustomize",
            "message": "No more retries left",
            "finishedAt": at(last),
        },
        {
            "displayName": "update[0]",
            "templateName": "update",
            "message": "child 'wf-1234' failed",
            "finishedAt": at(last),
        },
        {
            "displayName": "update-target(0:{})",
            "templateName": "update-target",
            "message": "child 'wf-99' failed",
            "finishedAt": at(last),
        },
        {
            "displayName": "wf",
            "templateName": "main",
            "message": "child 'wf-5' failed",
            "finishedAt": at(last),
        },
    ]
    return [{**e, "phase": "Failed"} for e in entries]


@settings(max_examples=100, deadline=None)
@given(failed_before=st.integers(0, 4), data=st.data())
def test_a_failed_workflow_names_the_step_that_failed_for_good_in_any_order(failed_before, data) -> None:
    from steps.notify.step import with_workflow_failure

    failures = data.draw(st.permutations(_failures(failed_before)), label="Argo's map order")
    (failed,) = with_workflow_failure([], "Failed", json.dumps(failures), "ev-1", "https://argo/wf")
    assert failed.kind == "failed"
    assert (failed.fields["step"], failed.fields["error"]) == (
        f"edit-kustomize({failed_before})",
        "exit code 2: bad overlay",
    )


def _compressed(nodes: list[dict]) -> str:
    """``status.compressedNodes`` as Argo writes it: base64 of gzip of the nodes' JSON (a map by id)."""
    import base64
    import gzip

    return base64.b64encode(
        gzip.compress(json.dumps({f"wf-{i}": n for i, n in enumerate(nodes)}).encode())
    ).decode()


@settings(max_examples=50, deadline=None)
@given(stories=st.lists(st.sampled_from(sorted(STORIES)), min_size=1, max_size=3))
def test_a_large_workflows_compressed_nodes_say_the_same(stories) -> None:
    """Over MAX_WORKFLOW_SIZE the controller keeps the nodes in status.compressedNodes, not status.nodes."""
    from steps.notify.workflow_outcomes import unreadable_nodes

    nodes = _workflow(stories, [1])
    wf = {"metadata": {"name": "wf"}, "status": {"compressedNodes": _compressed(nodes)}}
    said = [(o.kind, o.target, o.fields.get("commit", "")) for o in image_outcomes(nodes_of(wf), "ev-1")]
    assert said == _said(nodes)
    assert unreadable_nodes(wf) == ""


def test_nodes_that_cannot_be_read_say_why_and_a_bomb_is_not_inflated(monkeypatch) -> None:
    import base64
    import gzip

    from steps.notify import workflow_outcomes
    from steps.notify.workflow_outcomes import unreadable_nodes

    offloaded = {"metadata": {"name": "wf"}, "status": {"offloadNodeStatusVersion": "fnv:123"}}
    zstd = base64.b64encode(b"\x28\xb5\x2f\xfd" + b"\0" * 16).decode()
    other = {"metadata": {"name": "wf"}, "status": {"compressedNodes": zstd}}
    assert nodes_of(offloaded) == nodes_of(other) == []
    assert "ALWAYS_OFFLOAD_NODE_STATUS" in unreadable_nodes(offloaded)
    assert "gzip" in unreadable_nodes(other)
    node = json.dumps({"wf-1": {"name": "wf[0].resolve-image", "templateName": "resolve-image"}}).encode()
    small, bomb = (base64.b64encode(gzip.compress(node + b" " * n)).decode() for n in (0, 4096))
    monkeypatch.setattr(workflow_outcomes, "MAX_NODES_BYTES", 1024)
    assert len(nodes_of({"status": {"compressedNodes": small}})) == 1
    assert nodes_of({"status": {"compressedNodes": bomb}}) == []  # never inflated past the bound


def test_an_offloaded_workflow_that_failed_still_says_so_and_warns_why_nothing_more(
    tmp_path, monkeypatch, caplog
):
    from steps.notify import step as notify_step
    from tests.steps.notify.receivers import Receiver

    workflow = {
        "metadata": {"name": "wf"},
        "status": {"phase": "Failed", "offloadNodeStatusVersion": "fnv:9"},
    }
    path = tmp_path / "wf.json"
    path.write_text(json.dumps(workflow))
    failures = json.dumps(_failures(1))
    with Receiver("webhook") as hook, caplog.at_level("WARNING"):
        monkeypatch.setenv("IMAGEBUMP_WORKFLOW_FILE", str(path))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_WEBHOOK_URL", hook.url)
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_WEBHOOK_SECRET", "whsec-" + "q" * 20)
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_FILE", str(tmp_path / "absent"))
        monkeypatch.setenv("IMAGEBUMP_NOTIFY_LEDGER_DIR", str(tmp_path / "ledger"))
        out = notify_step.run.__wrapped__(
            workflow_name="wf",
            event=json.dumps({"id": "ev-9"}),
            workflow_status="Failed",
            workflow_failures=failures,
        )
    assert out == {"sent": 1, "duplicate": 0, "failed": 0}
    (message,) = [json.loads(r.body) for r in hook.received]
    assert message["outcome"] == "failed"
    assert any(
        "offloadNodeStatusVersion" in r.getMessage() for r in caplog.records if r.levelname == "WARNING"
    )


@pytest.mark.parametrize("wire", ["argo", "argo-go-escapes", "once"])
def test_workflow_failures_are_read_in_argos_wire_format(wire: str) -> None:
    """Argo passes ``{{workflow.failures}}`` as strconv.Quote of the JSON list (decode twice), and the
    quoted "null" when nothing failed (argo-workflows docs/variable-flow/variables.md)."""
    from steps.notify.step import with_workflow_failure
    from steps.notify.workflow_outcomes import decode_failures

    failures = _failures(0)
    failures[0]["message"] = "exit code 75: a DEL \x7f in it"  # JSON leaves DEL raw, Go's Quote does not
    text = json.dumps(failures, ensure_ascii=False)  # as Go's json.Marshal: DEL stays raw
    if wire == "argo":
        text = json.dumps(text)
    elif wire == "argo-go-escapes":  # strconv.Quote: \\ and \" escaped, DEL as \x7f (not JSON)
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\x7f", "\\x7f") + '"'
        assert "\\x7f" in text
    assert decode_failures(text) == failures
    assert decode_failures('"null"') == decode_failures("") == decode_failures("null") == []
    (failed,) = with_workflow_failure([], "Failed", text, "ev-1", "https://argo/wf")
    assert (failed.fields["step"], failed.fields["error"]) == (
        "edit-kustomize(0)",
        "exit code 2: bad overlay",
    )


def test_a_target_that_failed_for_good_quotes_its_last_attempts_cause_not_the_retry_nodes() -> None:
    """A failed Retry node says only "retryStrategy.expression evaluated to false" or "No more retries
    left"; the cause is on its last attempt: ``main: Error (exit code 2): <termination message>``."""
    name = 'wf[1].update-target(0:{"env":"e0"})[0].update[0].edit-kustomize'
    targets = [{"env": "e0", "path": "overlays/e0", "repo_url": "https://github.com/o/r"}]
    nodes = [
        _node("wf[0].resolve-image", "resolve-image", "Succeeded", {"targets": json.dumps(targets)}),
        {
            **_node(name, "edit-kustomize", "Failed", {}, kind="Retry"),
            "message": "retryStrategy.expression evaluated to false",
        },
        {
            **_node(f"{name}(1)", "edit-kustomize", "Failed", {}),
            "message": "main: Error (exit code 2): ConfigError: bad overlay",
        },
        {**_node(f"{name}(0)", "edit-kustomize", "Failed", {}), "message": "main: Error (exit code 75)"},
    ]
    (failed,) = image_outcomes(nodes, "ev-1", "https://argo/wf")
    assert failed.kind == "failed"
    assert failed.fields["error"] == "main: Error (exit code 2): ConfigError: bad overlay"


def test_a_failing_step_writes_why_where_kubernetes_reads_a_termination_message(
    tmp_path, monkeypatch
) -> None:
    from steps.domain.errors import ConfigError
    from steps.runtime import harness

    log = tmp_path / "termination-log"
    log.write_text("")  # kubelet mounts the file; the step only writes into it
    monkeypatch.setattr(harness, "TERMINATION_LOG", log)
    monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", "ghp_" + "s" * 36)

    @harness.step_entry
    def run() -> None:
        raise ConfigError("overlay apps/x has no kustomization.yaml; token ghp_" + "s" * 36)

    with pytest.raises(SystemExit) as stopped:
        run()
    assert stopped.value.code == 2
    said = log.read_text()
    assert said.startswith("ConfigError: overlay apps/x has no kustomization.yaml")
    assert "s" * 36 not in said  # redacted, as every log record is
