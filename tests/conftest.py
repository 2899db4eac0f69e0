"""Fixtures shared by the whole suite: real local services, never mocks of them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from imagebump.local.moto import FAKE_CREDENTIALS, MotoServer, moto_server

TESTDATA = Path(__file__).parent / "testdata"

# No test may reach real AWS, whatever the developer's shell holds.
for _key, _value in FAKE_CREDENTIALS.items():
    os.environ[_key] = _value
os.environ.pop("AWS_PROFILE", None)


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    """moto's server on 127.0.0.1 (SQS, S3, ECR, EventBridge, CloudFormation) for the session."""
    with moto_server() as server:
        yield server


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Fail any test whose captured output, logs or exception text carry a registered secret."""
    from tests.secret_scan import find_leaks

    outcome = yield
    report = outcome.get_result()
    # Captured sections accumulate over a test's phases: read them once, at teardown.
    sections = [("exception text", report.longreprtext or "")]
    if report.when == "teardown":
        sections += report.sections
    leaks = find_leaks(sections)
    if leaks:
        from tests.secret_scan import redact

        original = report.longreprtext or ""
        report.outcome = "failed"
        # The original failure stays readable, with every registered secret masked. (A failing
        # test that takes ``git_token`` as an argument lands here too: pytest's long traceback
        # prints the test's arguments.)
        report.longrepr = f"a registered secret appeared in: {', '.join(leaks)} (never print tokens)" + (
            f"\n\n--- the report, secrets masked ---\n{redact(original)}" if original else ""
        )


@pytest.fixture()
def outputs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``hera__outputs_directory`` for steps called in-process."""
    path = tmp_path / "hera-outputs"
    monkeypatch.setenv("hera__outputs_directory", str(path))
    return path


@pytest.fixture()
def thread_starts(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[str]]:
    """``watch()`` starts recording the name of every thread started from then on (in this process)
    and returns the list it fills: for the tests whose promise is that a path starts no thread."""

    def watch() -> list[str]:
        started: list[str] = []
        original = threading.Thread.start

        def counting_start(thread: threading.Thread) -> None:
            started.append(thread.name)
            original(thread)

        monkeypatch.setattr(threading.Thread, "start", counting_start)
        return started

    return watch


# Fixture modules owned by their areas (git remote + token, GitHub API fake).
pytest_plugins = ["tests.fixtures.git", "tests.fixtures.github"]


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Print what tests left as a ``("summary", text)`` user property (the chaos test's counts),
    passed or failed: worker output is not shown under pytest-xdist, the summary is."""
    for key in ("passed", "failed"):
        for report in terminalreporter.stats.get(key, []):
            for name, value in getattr(report, "user_properties", ()):
                if name == "summary":
                    terminalreporter.write_sep("-", f"{report.nodeid} ({key})")
                    terminalreporter.write_line(str(value))
