"""``imagebump demo``: exits 0, prints both diffs, cleans up after itself, and runs twice in a row.

Runs the real demo in-process (``imagebump.cli.main``): moto's server, the CloudFormation stack,
the git http-backend remote, the local sensor and executor with each step as a subprocess.
"""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from imagebump.cli import main

pytestmark = pytest.mark.slow


def _refuses_connections(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=1):
            return False
    except OSError:
        return True


def test_demo_runs_twice_in_a_row_prints_both_diffs_and_cleans_up(
    capsys, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the demo's temp dir lands here

    first = main(["demo"])
    out, err = capsys.readouterr()

    assert first == 0, out + err
    # staging: the commit on main (git show) changes the newTag line, comment kept
    assert '-  newTag: "1.4.1"  # set by imagebump' in out
    assert '+  newTag: "1.4.2"  # set by imagebump' in out
    # production: the PR branch's diff against main sets the tag and pins the digest
    assert "-    newTag: 1.4.0" in out
    assert "+    newTag: 1.4.2" in out
    assert "+    digest: sha256:" in out
    assert "end to end: ECR push → Git change" in out
    assert "OK: one ECR push became a staging commit" in out
    # push → live against the simulated Argo CD (docs/push-to-live.md): the staging commit runs
    assert "staging: push → committed" in out and "→ live" in out and ":1.4.2)" in out
    # the Helm values commit is live too, through a multi-source `$values` Application
    assert "helm: push → committed" in out
    assert "ibdemo_" not in out + err  # the demo's git token is never shown
    # issue 36: the exit handler's messages, as the demo's webhook receiver on 127.0.0.1 got them
    notified = out.split("== Notifications", 1)[1].split("\n== ", 1)[0]
    kinds = sorted(line.split(" — ")[0] for line in notified.splitlines() if line.startswith("received"))
    # staging and Helm: committed, then live; production: its pull request; each once
    assert kinds == ["received committed"] * 2 + ["received live"] * 2 + ["received pr-opened"]
    assert "alarm" not in notified and ":1.4.2" in notified
    assert list(tmp_path.iterdir()) == []  # temp dir removed

    second = main(["demo", "--json", "--keep"])
    out, err = capsys.readouterr()

    assert second == 0, out + err
    summary = json.loads(out)
    assert summary["ok"] is True
    sent = [(m["outcome"], m["target"].rsplit("/", 1)[-1]) for m in summary["notifications"]]
    assert len(sent) == len(set(sent))  # each outcome of each target once
    assert summary["actions"] == {"staging": "committed", "production": "pr-created", "helm": "committed"}
    # issue 34: a Helm values update next to the kustomize one, only the tag line changed
    assert "-  tag: 1.4.1  # set by imagebump" in summary["helm_diff"]
    assert "+  tag: 1.4.2  # set by imagebump" in summary["helm_diff"]
    assert len(summary["commit_sha"]) == 40
    assert summary["branch"].startswith("imagebump/production/")
    assert '+  newTag: "1.4.2"' in summary["staging_diff"]
    assert "+    newTag: 1.4.2" in summary["production_diff"]
    assert {
        "queue",
        "resolve-image",
        "edit-kustomize[staging]",
        "commit-pr[staging]",
        "edit-kustomize[production]",
        "commit-pr[production]",
        "workflow",
        "end-to-end",
    } <= set(summary["step_seconds"])
    assert summary["total_seconds"] > 0
    # --keep keeps the temporary directory (bare repository, rules), nothing else
    kept = Path(summary["kept"])
    assert [p.name for p in tmp_path.iterdir()] == [kept.name]
    assert (kept / "git" / "demo" / "manifests.git").is_dir()
    assert (kept / "rules.yaml").is_file()
    # what it started is stopped, --keep or not
    assert _refuses_connections(summary["aws_endpoint_url"])
    assert _refuses_connections(summary["git_base_url"])


@pytest.mark.parametrize("gate", ["wait", "check"])
def test_demo_gate_staging_live_then_a_short_soak_then_production(
    capsys, tmp_path: Path, monkeypatch, gate: str
) -> None:
    """issue 35: ``--gate`` (wait): production's pull request branch appears only once staging ran the
    image for the soak; ``--gate check``: the branch is there at once and the commit status
    ``imagebump/soak: staging`` on its head goes from pending to success (a git note: no API)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    code = main(["demo", "--json", "--gate", gate])
    out, err = capsys.readouterr()

    assert code == 0, out + err
    summary = json.loads(out)
    assert summary["ok"] is True
    assert summary["gate"]["state"] == "promoted" and summary["gate"]["env"] == "staging"
    if gate == "check":
        assert summary["actions"]["production"] == "pr-created"  # the pull request opens at once
        assert summary["gate_statuses"] == ["pending", "success"]
    else:
        assert "production" not in summary["actions"]  # no commit or PR from the push itself
        assert summary["gate_statuses"] == []
    assert list(tmp_path.iterdir()) == []
