"""A file larger than its limit is refused by its size, before it is read (issue: files read whole).

A kustomization (1 MiB) or a values file or helmfile's values (4 MiB) of tens of MiB was read
whole — ``git cat-file blob`` captured, decoded — before the size check in the parser: the step's
memory grew with whatever the repository's writer committed. Memory is measured with
tracemalloc, and the blob is never read whole.
"""

from __future__ import annotations

import tracemalloc

import pytest

from steps.domain.errors import KustomizationError, ValuesError
from steps.domain.models import HelmfileRef, Target
from steps.edit_kustomize import step as edit_kustomize
from steps.git.repo import ClonedRepo
from tests.hostile import cases
from tests.hostile.cases import KUSTOMIZATION, OVERLAY, REGISTRY

edit_step = edit_kustomize.run.__wrapped__
IMAGE = f"{REGISTRY}/team/api"
VALUES = f"image:\n  repository: {IMAGE}\n  tag: '1.0'\n"
#: 24 MiB of comment lines: larger than either limit, harmless to YAML.
PAD = ("# " + "x" * 1021 + "\n") * (24 * 1024)


@pytest.fixture()
def step_env(git_env, outputs_dir, monkeypatch, moto):
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_REGION", cases.REGION)
    return git_env


@pytest.fixture()
def blobs_read(monkeypatch) -> list:
    """What each ``git cat-file blob`` the clone runs reads (``reading FILE at REV of URL``), and the
    most of it it takes (``max_stdout``; None: the whole blob)."""
    read: list = []
    git = ClonedRepo.git

    def recorded(self, *args, **kwargs):
        if args[:2] == ("cat-file", "blob"):
            read.append((kwargs.get("what", ""), kwargs.get("max_stdout")))
        return git(self, *args, **kwargs)

    monkeypatch.setattr(ClonedRepo, "git", recorded)
    return read


def _target(remote, **extra) -> Target:
    fields = {"order": "none", "mode": "commit", "provider": "local", "path": OVERLAY, **extra}
    return Target(rule=0, repo_url=remote.url, env="prod", image=IMAGE, tag="2.0", **fields)


def _run_traced(target):
    tracemalloc.start()
    try:
        with pytest.raises(KustomizationError) as info:
            edit_step(target)
        return info.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


CASES = [
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION + PAD},
        {},
        KustomizationError,
        f"{OVERLAY}/kustomization.yaml: 25",
        id="kustomization",
    ),
    pytest.param(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION, f"{OVERLAY}/values.yaml": VALUES + PAD},
        {"values_file": f"{OVERLAY}/values.yaml"},
        ValuesError,
        f"{OVERLAY}/values.yaml: 25",
        id="valuesFile",
    ),
    pytest.param(
        {
            "helmfile.yaml": "releases:\n- name: api\n  chart: ./c\n  values:\n  - big.yaml\n  - small.yaml\n",
            "big.yaml": VALUES + PAD,
            "small.yaml": "x: 1\n",
        },
        {"path": ".", "helmfile": HelmfileRef(file="helmfile.yaml", release="api", environment="")},
        ValuesError,
        "big.yaml: 25",
        id="helmfile-values",
    ),
]


@pytest.mark.parametrize(("files", "extra", "error", "message"), CASES)
def test_a_file_over_its_limit_is_refused_before_it_is_read(
    files, extra, error, message, make_remote, step_env, blobs_read
) -> None:
    remote = make_remote({"README.md": "# gitops\n", **files})

    refused, peak = _run_traced(_target(remote, **extra))

    assert type(refused) is error
    assert refused.reason == "too-large"
    assert str(refused).startswith(message)  # 25,165,8xx bytes
    assert "it was not" in str(refused)
    big = message.split(":")[0]
    assert all(limit is not None for what, limit in blobs_read if f"reading {big} " in what)  # never whole
    assert peak < 8 << 20  # was 3 × 24 MiB and more: the blob, its text, the parser's copy


def test_the_limits_let_a_file_of_the_limit_through(make_remote, step_env) -> None:
    """4 MiB less a little is read (and then refused only for what it says, not its size)."""
    fill = ("# " + "x" * 1021 + "\n") * (4 * 1024 - 1)
    remote = make_remote(
        {f"{OVERLAY}/kustomization.yaml": KUSTOMIZATION, f"{OVERLAY}/values.yaml": VALUES + fill}
    )
    out = edit_step(_target(remote, values_file=f"{OVERLAY}/values.yaml"))
    assert out.decision == "update"
