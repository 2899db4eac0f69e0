"""``--argocd-context`` / ``--live-timeout`` of ``imagebump run --local`` and ``imagebump reconcile``:
bad values are refused before anything starts (exit 2, naming the flag and the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebump.cli import main
from imagebump.local.live import live_environment, live_parameters


def test_off_by_default_and_on_with_a_context(tmp_path: Path) -> None:
    assert live_parameters(None) == {"verify-live": "false"}
    assert live_parameters("prod", "90s") == {"verify-live": "true", "live-timeout": "90s"}
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    env = live_environment("prod", {"KUBECONFIG": str(kubeconfig)})
    assert env == {"IMAGEBUMP_ARGOCD_CONTEXT": "prod", "KUBECONFIG": str(kubeconfig.resolve())}
    assert live_environment(None) == {}


@pytest.mark.parametrize("command", ["run", "reconcile"])
def test_a_bad_live_timeout_exits_2_naming_the_flag(command: str, tmp_path: Path, capsys) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("[]\n")
    argv = [command, "--rules", str(rules), "--live-timeout", "soon"]
    if command == "run":
        argv += ["--local", "--queue-url", "http://127.0.0.1:1/123456789012/q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--live-timeout 'soon'" in err and "15m" in err and "Traceback" not in err


def test_a_context_without_a_kubeconfig_exits_2_naming_the_fix(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    rules = tmp_path / "rules.yaml"
    rules.write_text("[]\n")
    argv = ["run", "--local", "--queue-url", "http://127.0.0.1:1/123456789012/q", "--rules", str(rules)]
    assert main([*argv, "--argocd-context", "prod"]) == 2
    err = capsys.readouterr().err
    assert "--argocd-context prod" in err and "KUBECONFIG" in err
