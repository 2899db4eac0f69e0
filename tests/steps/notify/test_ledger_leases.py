"""The notification ledger as a property: whatever runs claim, send, give back, die mid-send or fail
to give a claim back, in whatever order and time, a key that was sent is never sent again, no two
living runs send one key at once, and a key whose sender died is sent after all once its claim's
lease ends — never lost. On the file ledger and on S3 (moto's server, its conditional writes:
``If-None-Match: *`` to claim, ``If-Match`` on the ETag to take a stale claim over)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from steps.notify.ledger import LEASE_SECONDS, FileLedger, S3Ledger

KEYS = st.sampled_from(["k1", "k2"])


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def ledger_machine(make):
    """A state machine over two runs sharing one ledger made by ``make(clock)``."""

    class Ledgers(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.clock = Clock()
            self.ledgers = [make(self.clock), make(self.clock)]  # two runs (pods), one store
            self.sent: set[str] = set()
            self.live: dict[str, tuple[int, float]] = {}  # key -> (run, claimed at): sending now
            self.dead: dict[str, float] = {}  # key -> when a claim was left behind (died/unreleased)

        @rule(run=st.integers(0, 1), key=KEYS)
        def claim(self, run: int, key: str) -> None:
            got = self.ledgers[run].claim(key)
            if key in self.sent:
                assert not got, "a key that was sent was claimed again"
            if key in self.live:
                assert not got, "two runs hold one key's claim at once"
            if key not in self.sent and key not in self.live:
                left = self.dead.get(key)
                if left is None or self.clock.now - left > LEASE_SECONDS:
                    assert got, "a key nobody is sending could not be claimed: it would never be sent"
            if got:
                self.live[key] = (run, self.clock.now)
                self.dead.pop(key, None)

        @rule(key=KEYS, outcome=st.sampled_from(["sent", "released", "died"]))
        def finish(self, key: str, outcome: str) -> None:
            if key not in self.live:
                return
            run, since = self.live.pop(key)
            if outcome == "sent":
                self.ledgers[run].sent(key)
                self.sent.add(key)
            elif outcome == "released":
                self.ledgers[run].release(key)
            else:  # killed mid-send, or its release failed: the claim stays behind
                self.dead[key] = since

        @rule(seconds=st.sampled_from([1.0, 60.0, LEASE_SECONDS / 2, LEASE_SECONDS + 1]))
        def wait(self, seconds: float) -> None:
            self.clock.now += seconds
            # a run lives less than the lease: one still sending by now has died
            for key, (_run, since) in list(self.live.items()):
                if self.clock.now - since >= LEASE_SECONDS:
                    self.dead[key] = since
                    del self.live[key]

        @invariant()
        def sent_keys_stay_sent(self) -> None:
            assert not (self.sent & set(self.live))

    return Ledgers


def test_file_ledger_never_sends_twice_and_never_loses_a_key(tmp_path_factory) -> None:
    where: dict[str, object] = {}
    machine = ledger_machine(lambda clock: FileLedger(where["root"], clock=clock))

    class Fresh(machine):
        def __init__(self) -> None:
            where["root"] = tmp_path_factory.mktemp("ledger")
            super().__init__()

    Fresh.TestCase.settings = settings(
        max_examples=60, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck)
    )
    Fresh.TestCase().runTest()


@pytest.fixture()
def s3(moto):
    return moto.client("s3")


def test_s3_ledger_never_sends_twice_and_never_loses_a_key(s3, moto) -> None:
    made: dict[str, str] = {}

    def make(clock):
        return S3Ledger(s3, made["bucket"], clock=clock)

    machine = ledger_machine(make)

    class Fresh(machine):
        def __init__(self) -> None:
            made["bucket"] = f"ledger-{uuid.uuid4().hex[:12]}"
            s3.create_bucket(
                Bucket=made["bucket"], CreateBucketConfiguration={"LocationConstraint": moto.region}
            )
            super().__init__()

    Fresh.TestCase.settings = settings(
        max_examples=15, stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck)
    )
    Fresh.TestCase().runTest()


def test_an_earlier_versions_record_counts_as_sent(tmp_path) -> None:
    """Before leases a record was an empty file (or object): it means sent, whatever its age."""
    clock = Clock()
    (tmp_path / "k").write_bytes(b"")
    clock.now += 10 * LEASE_SECONDS
    assert FileLedger(tmp_path, clock=clock).claim("k") is False
