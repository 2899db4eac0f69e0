"""``imagebump demo --wrong-manifest``: the SIMULATED Argo CD (the Kubernetes API fake and
imagebump.local.argocd_sim, rendering with the real ``kubectl kustomize``) runs the previous image
while reporting the new revision synced; the demo shows verify-live's alarm. And without kubectl the
live part is skipped with a line that says so.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from imagebump.cli import main
from imagebump.local import demo_live


@pytest.mark.slow
def test_wrong_manifest_shows_the_alarm(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = main(["demo", "--wrong-manifest"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    (alarm,) = [line for line in out.splitlines() if "ALARM" in line]
    assert alarm.startswith("staging: ALARM")
    assert "argocd/api-staging" in alarm and "synced at revision" in alarm
    assert ":1.4.2" in alarm and ":1.4.1" in alarm  # what Git holds, what runs
    assert "ibdemo_" not in out + err
    # the alarm arrives at the demo's webhook receiver (issue 36), once
    received = [line for line in out.splitlines() if line.startswith("received alarm")]
    assert len(received) == 1 and received[0].startswith("received alarm: mismatch")
    assert ":1.4.1" in received[0] and "argocd/api-staging" in received[0]


def test_without_kubectl_the_live_part_is_skipped_with_a_line(monkeypatch) -> None:
    monkeypatch.setattr(demo_live, "kubectl_available", lambda: False)
    said: list[str] = []

    class World:  # nothing of it may be touched when the live part is skipped
        def set_live(self, *args, **kwargs):
            raise AssertionError("verify-live turned on without a simulated Argo CD")

    with demo_live.simulated_argocd(World(), say=said.append) as live:
        assert live.sim is None
    assert said == [demo_live.SKIPPED] and "kubectl" in said[0]
    assert demo_live.live_lines([], live.skipped) == [demo_live.SKIPPED]
