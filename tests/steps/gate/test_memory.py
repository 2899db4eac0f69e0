"""The gate's record of what earlier evaluations saw (:mod:`steps.gate.memory`): what one evaluation
keeps, the next reads back, on a directory and on S3 (moto's server), and a record written by hand
or broken reads as nothing rather than as a block."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from steps.gate.decide import Seen
from steps.gate.memory import FileMemory, S3Memory, memory_from_env, record_key

AT = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
SEEN = {
    "staging (argocd/api-staging)": Seen(blocked="degraded", blocked_at=AT),
    "staging (argocd/api-staging-eu)": Seen(live_from=AT, live_entry=7, live_revision="r1", unwell_at=AT),
}


def test_a_directory_keeps_what_was_seen(tmp_path) -> None:
    memory = FileMemory(tmp_path / "gate")
    key = record_key("https://git.example/deploy", "overlays/production", "sha256:" + "a" * 64)
    assert memory.load(key) == {}
    memory.save(key, SEEN)
    assert FileMemory(tmp_path / "gate").load(key) == SEEN  # another evaluation, after a restart


def test_s3_keeps_what_was_seen(moto) -> None:
    client = moto.client("s3")
    bucket = f"ledger-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": moto.region})
    memory = S3Memory(client, bucket)
    assert memory.load("k") == {}
    memory.save("k", SEEN)
    assert S3Memory(client, bucket).load("k") == SEEN
    assert client.list_objects_v2(Bucket=bucket)["Contents"][0]["Key"] == "imagebump/gate/k"


@pytest.mark.parametrize(
    "data", [b"", b"not json", b"[]", b'{"x": {"blocked": "approved", "live_from": "yesterday"}}']
)
def test_a_broken_record_blocks_nothing(tmp_path, data) -> None:
    (tmp_path / "k").write_bytes(data)
    assert all(s.blocked is None and s.live_from is None for s in FileMemory(tmp_path).load("k").values())


def test_the_record_lives_beside_the_notifications_ledger(tmp_path) -> None:
    memory = memory_from_env({"IMAGEBUMP_NOTIFY_LEDGER_DIR": str(tmp_path)})
    assert isinstance(memory, FileMemory) and memory.directory == tmp_path / "gate"
