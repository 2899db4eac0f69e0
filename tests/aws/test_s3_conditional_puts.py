"""Conditional puts (``If-None-Match: *``) as S3 answers them, in front of moto's server: 412 means
the key exists; 409 ``ConditionalRequestConflict`` means a conflicting write was in flight and the
upload is to be tried again (S3 API PutObject, ``If-None-Match``) — moto never answers 409, so a
stub in front of its client does, once."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from steps.aws import s3 as s3_io
from steps.domain.errors import TransientError
from steps.notify.ledger import S3Ledger


class Conflicting:
    """An S3 client whose first ``times`` puts answer 409 ConditionalRequestConflict."""

    def __init__(self, client, times: int) -> None:
        self.client, self.times, self.puts = client, times, 0

    def put_object(self, **kwargs):
        self.puts += 1
        if self.times:
            self.times -= 1
            error = {"Error": {"Code": "ConditionalRequestConflict", "Message": "A conflicting operation"}}
            raise ClientError({**error, "ResponseMetadata": {"HTTPStatusCode": 409}}, "PutObject")
        return self.client.put_object(**kwargs)

    def __getattr__(self, name):
        return getattr(self.client, name)


@pytest.fixture()
def bucket(moto):
    client = moto.client("s3")
    name = f"ledger-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": moto.region})
    return client, name


def test_a_conflict_is_tried_again_and_the_claim_is_made(bucket, monkeypatch) -> None:
    client, name = bucket
    monkeypatch.setattr(s3_io, "_sleep", lambda seconds: None)
    stub = Conflicting(client, times=1)
    assert S3Ledger(stub, name).claim("key-1") is True  # claimed: the message is sent, not dropped
    assert stub.puts == 2
    assert S3Ledger(client, name).claim("key-1") is False  # now it exists: 412, a duplicate


def test_a_conflict_that_lasts_is_transient_not_a_duplicate(bucket, monkeypatch) -> None:
    client, name = bucket
    monkeypatch.setattr(s3_io, "_sleep", lambda seconds: None)
    with pytest.raises(TransientError):
        S3Ledger(Conflicting(client, times=10), name).claim("key-2")
    assert S3Ledger(client, name).claim("key-2") is True  # nothing was written meanwhile
