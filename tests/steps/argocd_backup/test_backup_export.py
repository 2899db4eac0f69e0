"""backup-export against moto's S3 server and a FAKE Kubernetes API served over HTTP.

The Kubernetes side is :mod:`tests.fakes.kube` — an in-memory fake of the narrow surface we use
(paged list, get, server-side apply), served on 127.0.0.1 so the real adapter
(:class:`steps.kube.client.KubernetesApi`, the official client loaded from a kubeconfig) does the
talking. A fake because no API server runs here and kmock 0.8 lacks paging, label selectors and
server-side apply. S3 is moto's real server (conditional puts, SSE headers, listing, deletes).
"""

from __future__ import annotations

import base64
import gzip
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from botocore.exceptions import ClientError

from imagebump import __version__
from steps.argocd_backup import (
    archive,
    decide,
    retention,
)
from steps.argocd_backup import (
    export as backup_export,
)
from steps.argocd_backup.settings import BackupSettings
from steps.aws import s3 as s3io
from steps.domain.errors import ConfigError, PermissionDeniedError, TransientError
from steps.kube import api as kube
from steps.kube import argocd_namespaces
from steps.kube import client as kube_client
from tests.fakes.kube import (
    BACKED_UP_SECRETS,
    NOT_BACKED_UP_SECRETS,
    PROJECT_TOKEN,
    SECRET_VALUES,
    FakeKube,
    FakeKubeServer,
    seeded,
)

ROOT = Path(__file__).resolve().parents[3]
EXPECTED_COUNTS = {
    "ConfigMap": 7,
    "Secret": len(BACKED_UP_SECRETS),
    "AppProject": 4,
    "ApplicationSet": 3,
    "Application": 60,
}
TOTAL = sum(EXPECTED_COUNTS.values())
FROZEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def frozen(at: datetime = FROZEN):
    return lambda: at


@pytest.fixture()
def s3(moto):
    return moto.client("s3")


@pytest.fixture()
def bucket(s3) -> str:
    name = f"backups-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    return name


@pytest.fixture()
def argocd() -> FakeKube:
    return seeded("argocd", apps=60)


@pytest.fixture()
def kube_server(argocd: FakeKube) -> Iterator[FakeKubeServer]:
    with FakeKubeServer(argocd) as server:
        yield server


@pytest.fixture()
def kubeconfig(kube_server: FakeKubeServer, tmp_path: Path) -> Path:
    return kube_server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture()
def api(kubeconfig: Path) -> kube_client.KubernetesApi:
    return kube_client.KubernetesApi.from_config(kubeconfig=str(kubeconfig))


def _objects(s3, bucket: str, key: str) -> list[dict]:
    return list(yaml.safe_load_all(gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read())))


def _keys(s3, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))


def test_backup_writes_sanitised_archive_and_index(api, argocd, s3, bucket):
    # the bucket's default encryption is SSE-KMS: a backup without its own key keeps to it (S3 applies
    # a bucket default only to puts that name no encryption)
    s3.put_bucket_encryption(
        Bucket=bucket,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {
                        "SSEAlgorithm": "aws:kms",
                        "KMSMasterKeyID": "alias/backups",
                    }
                }
            ]
        },
    )
    out = backup_export.export_backup(
        api=api, s3=s3, bucket=bucket, cluster="prod-eu", now=frozen(), page_size=7
    )

    key = "argocd-backups/prod-eu/2026/01/02/030405Z.yaml.gz"
    assert out.url == f"s3://{bucket}/{key}"
    assert out.counts == EXPECTED_COUNTS
    assert out.deleted == []
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert archive.sha256(data) == out.sha256
    head = s3.head_object(Bucket=bucket, Key=key)
    assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alias/backups")

    index = json.loads(
        s3.get_object(Bucket=bucket, Key="argocd-backups/prod-eu/2026/01/02/030405Z.index.json")[
            "Body"
        ].read()
    )
    assert index == {
        "format": archive.FORMAT,
        "archive": "030405Z.yaml.gz",
        "sha256": out.sha256,
        "size": len(data),
        "counts": EXPECTED_COUNTS,
        "created": "2026-01-02T03:04:05Z",
        "cluster": "prod-eu",
        "namespace": "argocd",
        "tool": "imagebump",
        "version": __version__,
    }

    docs = _objects(s3, bucket, key)
    assert [archive.key(d) for d in docs] == sorted(
        (archive.key(d) for d in docs), key=lambda k: (list(kube.RESOURCES).index(k[0]), *k)
    )
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ConfigMap", "unrelated-cm") not in names
    assert {n for k, n in names if k == "ConfigMap"} == set(archive.CONFIG_MAPS)
    assert {n for k, n in names if k == "Secret"} == set(BACKED_UP_SECRETS)
    assert not {n for k, n in names if k == "Secret"} & set(NOT_BACKED_UP_SECRETS)
    assert {d["metadata"]["namespace"] for d in docs} == {"argocd"}, "every object names its namespace"
    for doc in docs:
        meta = doc["metadata"]
        assert "operation" not in doc and "stringData" not in doc
        if (doc["kind"], meta["name"]) != ("AppProject", PROJECT_TOKEN["project"]):
            assert "status" not in doc, doc["kind"]
        assert not set(meta) & {
            "uid",
            "resourceVersion",
            "managedFields",
            "creationTimestamp",
            "generation",
            "selfLink",
            "ownerReferences",
        }, meta
        assert archive.LAST_APPLIED not in meta.get("annotations", {})
    project = next(d for d in docs if (d["kind"], d["metadata"]["name"]) == ("AppProject", "team-a"))
    token = {"iat": PROJECT_TOKEN["iat"], "id": PROJECT_TOKEN["id"]}
    assert project["status"] == {"jwtTokensByRole": {"ci": {"items": [token]}}}, (
        "what project token checks read"
    )
    app = next(d for d in docs if d["metadata"]["name"] == "app-000")
    assert app["metadata"]["finalizers"] == ["resources-finalizer.argocd.argoproj.io"]
    assert app["metadata"]["annotations"] == {
        "notifications.argoproj.io/subscribe.on-sync-failed.slack": "alerts"
    }

    # Lists are paged: 60 Applications in pages of 7 means 9 list calls following continue tokens.
    app_lists = [c for c in argocd.calls if c[:2] == ("list", "applications")]
    assert len(app_lists) == 9
    assert app_lists[0][3]["continue"] is None and all(c[3]["continue"] for c in app_lists[1:])
    # Secrets are selected by label OR annotation OR name: one full (paged) list, filtered here.
    secret_lists = [c for c in argocd.calls if c[:2] == ("list", "secrets")]
    assert secret_lists and all(c[3]["labelSelector"] is None for c in secret_lists)


#: Which Secrets of Argo CD's namespace a backup takes. Upstream's rule is
#: cmd/argocd/commands/admin/admin.go isArgoCDSecret (argo-cd v3.5.1; the same in v2.14.21 less the
#: argocd-cm `repositories` references v3 dropped): the name argocd-secret, ANY value of the label
#: argocd.argoproj.io/secret-type (values in common/common.go: cluster, repository, repo-creds,
#: repository-write — util/db/repository_secrets.go getSecretType — repo-write-creds, scm-creds),
#: or the annotation managed-by: argocd.argoproj.io (util/db/secrets.go addSecretMetadata). Ours
#: adds app.kubernetes.io/part-of: argocd and argocd-notifications-secret.
LEGACY_REPOS = """\
- url: https://git.example.com/org/legacy
  usernameSecret: {name: legacy-repo, key: username}
  passwordSecret: {name: legacy-repo, key: password}
- url: https://git.example.com/org/tls
  tlsClientCertDataSecret: {name: legacy-tls, key: cert}
  tlsClientCertKeySecret: {name: legacy-tls, key: key}
"""
LEGACY_CREDS = """\
- url: git@git.example.com:org
  sshPrivateKeySecret: {name: legacy-creds, key: sshPrivateKey}
- url: https://github.com/org
  githubAppPrivateKeySecret: {name: legacy-app-key, key: githubAppPrivateKey}
"""
SECRET_SELECTION = [
    ({"name": "argocd-secret"}, True, "upstream: by name"),
    ({"labels": {"argocd.argoproj.io/secret-type": "repository"}}, True, "upstream: label"),
    ({"labels": {"argocd.argoproj.io/secret-type": "repo-creds"}}, True, "upstream: label"),
    ({"labels": {"argocd.argoproj.io/secret-type": "cluster"}}, True, "upstream: label"),
    (
        {"labels": {"argocd.argoproj.io/secret-type": "repository-write"}},
        True,
        "upstream: label (not repo-write)",
    ),
    ({"labels": {"argocd.argoproj.io/secret-type": "repo-write-creds"}}, True, "upstream: label"),
    ({"labels": {"argocd.argoproj.io/secret-type": "scm-creds"}}, True, "upstream: label"),
    ({"labels": {"argocd.argoproj.io/secret-type": "a-future-type"}}, True, "upstream: any label value"),
    ({"labels": {"argocd.argoproj.io/secret-type": ""}}, True, "upstream: label present, empty value"),
    ({"annotations": {"managed-by": "argocd.argoproj.io"}}, True, "upstream: annotation"),
    ({"annotations": {"managed-by": "someone-else"}}, False, "upstream: other managers are not Argo CD's"),
    ({"labels": {"app.kubernetes.io/part-of": "argocd"}}, True, "ours: $name:key references need this label"),
    ({"labels": {"app.kubernetes.io/part-of": "other"}}, False, "ours: part of something else"),
    ({"name": "argocd-notifications-secret"}, True, "ours: notifications"),
    ({"name": "argocd-redis"}, False, "neither: redis password, unlabelled"),
    ({}, False, "neither"),
    # argocd-cm's legacy repository keys: upstream's export takes the Secrets they name
    # (cmd/argocd/commands/admin/admin.go getReferencedSecrets, v2.14.21: usernameSecret,
    # passwordSecret, sshPrivateKeySecret, tlsClientCertDataSecret, tlsClientCertKeySecret).
    (
        {"name": "legacy-repo", "argocd_cm": {"repositories": LEGACY_REPOS}},
        True,
        "upstream v2.14: argocd-cm repositories passwordSecret",
    ),
    (
        {"name": "legacy-tls", "argocd_cm": {"repositories": LEGACY_REPOS}},
        True,
        "upstream v2.14: argocd-cm repositories tlsClientCertKeySecret",
    ),
    (
        {"name": "legacy-creds", "argocd_cm": {"repository.credentials": LEGACY_CREDS}},
        True,
        "upstream v2.14: argocd-cm repository.credentials sshPrivateKeySecret",
    ),
    (
        {"name": "legacy-app-key", "argocd_cm": {"repository.credentials": LEGACY_CREDS}},
        True,
        "ours: githubAppPrivateKeySecret, which Argo CD 2.x reads too (util/db/repository_legacy.go)",
    ),
    (
        {"name": "unreferenced", "argocd_cm": {"repositories": LEGACY_REPOS}},
        False,
        "a Secret argocd-cm does not name",
    ),
    (
        {"name": "legacy-repo", "argocd_cm": {"repositories": "url: [unclosed"}},
        False,
        "unreadable repositories reference nothing",
    ),
]


@pytest.mark.parametrize(("meta", "taken", "why"), SECRET_SELECTION, ids=[w for _, _, w in SECRET_SELECTION])
def test_secret_selection_follows_upstream_and_more(meta, taken, why):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": meta.get("name", "s"),
            "namespace": "argocd",
            "labels": meta.get("labels", {}),
            "annotations": meta.get("annotations", {}),
        },
    }
    referenced = archive.referenced_secrets({"data": meta["argocd_cm"]} if "argocd_cm" in meta else None)
    assert archive.is_argocd_secret(secret, referenced) is taken, why
    assert "repository-write" in archive.SECRET_TYPES and "repo-write" not in archive.SECRET_TYPES


#: Argo CD's namespace matching: util/security/application_namespaces.go IsNamespaceEnabled →
#: util/glob/list.go MatchStringInList(REGEXP): "/…/" is a regexp2 regular expression found anywhere
#: in the name, anything else a gobwas glob. Cases from util/security/application_namespaces_test.go
#: and util/glob/glob_test.go (v3.5.1), plus glob syntax gobwas documents.
NAMESPACE_MATCHING = [
    ("argocd", [], True, "the server namespace is always enabled"),
    ("allowed", ["allowed"], True, "a name"),
    ("disallowed", ["allowed"], False, "another name"),
    ("test-ns", ["test-*"], True, "a glob"),
    ("hello", ["e*"], False, "globs match the whole name"),
    (
        "e[[a*",
        ["e[[a*"],
        False,
        "a pattern that does not compile matches nothing (upstream: Invalid pattern)",
    ),
    ("disallowed", ["/^((?!disallowed).)*$/"], False, "regexp with a lookahead: fail"),
    ("allowed", ["/^((?!disallowed).)*$/"], True, "regexp with a lookahead: pass"),
    ("team-a-prod", ["/team-a/"], True, "regexp is a search, unanchored"),
    ("team-b", ["team-[ab]"], True, "character class"),
    ("team-c", ["team-[!ab]"], True, "negated class"),
    ("team-a", ["team-[!ab]"], False, "negated class"),
    ("dev-x", ["{dev,stg}-?"], True, "alternatives and ?"),
    ("prod-x", ["{dev,stg}-?"], False, "alternatives"),
    ("x", ["", "other", "*"], True, "blank entries dropped, * matches all"),
]


@pytest.mark.parametrize(
    ("namespace", "patterns", "enabled", "why"), NAMESPACE_MATCHING, ids=[w for *_, w in NAMESPACE_MATCHING]
)
def test_namespace_matching_follows_argo_cd(namespace, patterns, enabled, why):
    assert argocd_namespaces.namespace_enabled(namespace, "argocd", patterns) is enabled, why


def test_namespace_patterns_are_read_as_argo_cd_reads_them():
    # admin.go getAdditionalNamespaces: split on ",", blanks dropped, each trimmed.
    cm = {
        "data": {
            "application.namespaces": " team-a, team-* ,,/^x/ ",
            "applicationsetcontroller.namespaces": "",
        }
    }
    assert argocd_namespaces.namespace_patterns(cm, "application.namespaces") == ["team-a", "team-*", "/^x/"]
    assert argocd_namespaces.namespace_patterns(cm, "applicationsetcontroller.namespaces") == []
    assert argocd_namespaces.namespace_patterns(None, "application.namespaces") == []


def test_a_catastrophic_namespace_regex_is_refused_not_left_to_hang():
    with pytest.raises(ConfigError, match=r"application.namespaces pattern /\^\(a\|aa\)\+\$/ .*simplify it"):
        argocd_namespaces.namespace_enabled(
            "a" * 55 + "!", "argocd", ["/^(a|aa)+$/"], setting="application.namespaces"
        )


def test_archive_bytes_are_deterministic(api, s3, bucket):
    first = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    second = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    assert first.sha256 == second.sha256, "same state → same bytes, whatever the paging or time"


def test_kms_key_is_used_when_given(api, s3, bucket, moto):
    key_id = moto.client("kms").create_key(Description="argocd backups")["KeyMetadata"]["KeyId"]
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, kms_key_id=key_id, now=frozen())
    for key in (out.url.split("/", 3)[3], out.index_url.split("/", 3)[3]):
        head = s3.head_object(Bucket=bucket, Key=key)
        assert head["ServerSideEncryption"] == "aws:kms"
        assert key_id in head["SSEKMSKeyId"]


def test_moto_refuses_a_conditional_put_over_an_existing_key(s3, bucket):
    """The never-overwrite guarantee rests on S3's If-None-Match; prove moto enforces it too."""
    s3.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"1"


def test_second_backup_in_the_same_second_does_not_overwrite_the_first(api, argocd, s3, bucket):
    first = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    argocd.seed(
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "late-app", "namespace": "argocd"},
            "spec": {"project": "default"},
        }
    )
    second = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    third = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())

    base = f"s3://{bucket}/argocd-backups/in-cluster/2026/01/02/030405Z"
    assert [first.url, second.url, third.url] == [f"{base}.yaml.gz", f"{base}-1.yaml.gz", f"{base}-2.yaml.gz"]
    assert first.counts["Application"] == 60 and second.counts["Application"] == 61
    first_key = first.url.split("/", 3)[3]
    assert archive.sha256(s3.get_object(Bucket=bucket, Key=first_key)["Body"].read()) == first.sha256
    assert len(_objects(s3, bucket, first_key)) == TOTAL
    index_1 = json.loads(s3.get_object(Bucket=bucket, Key=second.index_url.split("/", 3)[3])["Body"].read())
    assert index_1["sha256"] == second.sha256 and index_1["archive"] == "030405Z-1.yaml.gz"


def test_retention_keeps_the_newest_n_and_their_indexes(api, s3, bucket):
    urls = [
        backup_export.export_backup(
            api=api, s3=s3, bucket=bucket, keep=0, now=frozen(datetime(2026, 1, day, 3, 0, 0, tzinfo=UTC))
        ).url
        for day in (1, 2, 3, 4)
    ]
    out = backup_export.export_backup(
        api=api, s3=s3, bucket=bucket, keep=2, now=frozen(datetime(2026, 1, 5, 3, 0, 0, tzinfo=UTC))
    )
    assert out.deleted == urls[:3]
    keys = _keys(s3, bucket)
    assert keys == [
        "argocd-backups/in-cluster/2026/01/04/030000Z.index.json",
        "argocd-backups/in-cluster/2026/01/04/030000Z.yaml.gz",
        "argocd-backups/in-cluster/2026/01/05/030000Z.index.json",
        "argocd-backups/in-cluster/2026/01/05/030000Z.yaml.gz",
    ]


def test_retention_never_deletes_the_archive_just_written(api, s3, bucket):
    """A clock that went backwards makes the new archive the 'oldest'; it still stays."""
    later = backup_export.export_backup(
        api=api, s3=s3, bucket=bucket, now=frozen(datetime(2026, 3, 1, tzinfo=UTC))
    )
    out = backup_export.export_backup(
        api=api, s3=s3, bucket=bucket, keep=1, now=frozen(datetime(2026, 1, 1, tzinfo=UTC))
    )
    assert out.deleted == []
    assert {later.url.split("/", 3)[3], out.url.split("/", 3)[3]} <= set(_keys(s3, bucket))


def test_retention_leaves_other_clusters_alone(api, s3, bucket):
    other = backup_export.export_backup(api=api, s3=s3, bucket=bucket, cluster="other", now=frozen())
    backup_export.export_backup(
        api=api, s3=s3, bucket=bucket, keep=1, now=frozen(datetime(2026, 2, 1, tzinfo=UTC))
    )
    assert other.url.split("/", 3)[3] in _keys(s3, bucket)


NOW = datetime(2026, 1, 31, 12, 0, 0, tzinfo=UTC)
KEYS = [f"p/c/2026/01/{d:02d}/120000Z.yaml.gz" for d in (1, 10, 20, 30)] + [
    "p/c/2026/01/30/120000Z-1.yaml.gz",
    "p/c/2026/01/30/120000Z-2.yaml.gz",
    "p/c/notes.txt",
    "p/c/2026/01/30/120000Z.index.json",
]


@pytest.mark.parametrize(
    ("keep", "keep_days", "protect", "expected"),
    [
        pytest.param(0, 0, "", [], id="both-off-keeps-all"),
        pytest.param(2, 0, "", KEYS[:4], id="count-orders-same-second-by-suffix"),
        pytest.param(0, 15, "", KEYS[:2], id="days-only"),
        pytest.param(1, 15, "", KEYS[:2], id="either-rule-keeps"),
        pytest.param(1, 0, KEYS[0], KEYS[1:5], id="protected-is-never-expired"),
    ],
)
def test_select_expired(keep, keep_days, protect, expected):
    got = retention.select_expired(KEYS, keep=keep, keep_days=keep_days, now=NOW, protect=protect)
    assert sorted(got) == sorted(expected)


@pytest.mark.parametrize(
    ("settings", "listing", "written", "key", "expired"),
    [
        pytest.param({}, [], "", "argocd-backups/in-cluster/2026/01/31/120000Z", [], id="before-the-write"),
        pytest.param(
            {"prefix": "/p/", "cluster": "c", "keep": 2},
            KEYS,
            KEYS[5],
            "p/c/2026/01/31/120000Z",
            KEYS[:4],
            id="keep-newest-two",
        ),
        pytest.param(
            {"prefix": "p", "cluster": "c", "keep": 0, "keep_days": 15},
            KEYS,
            KEYS[5],
            "p/c/2026/01/31/120000Z",
            KEYS[:2],
            id="keep-days",
        ),
        pytest.param(
            {"prefix": "p", "cluster": "c", "keep": 1},
            KEYS,
            KEYS[0],
            "p/c/2026/01/31/120000Z",
            KEYS[1:5],
            id="the-written-one-never-expires",
        ),
        pytest.param(
            {"prefix": "p", "cluster": "c", "keep": 0},
            KEYS,
            KEYS[5],
            "p/c/2026/01/31/120000Z",
            [],
            id="retention-off",
        ),
    ],
)
def test_decide_where_the_archive_goes_and_what_expires(settings, listing, written, key, expired):
    """backup-export's pure core, without S3 or Kubernetes: the key before the write; after it, the
    archives retention deletes given the listing (the one just written is never among them)."""
    decision = decide.decide(BackupSettings(bucket="b-1", **settings), NOW, listing=listing, written=written)
    assert decision.key == key
    assert sorted(decision.expired) == sorted(expired)


def test_secret_values_never_in_logs_or_outputs(api, s3, bucket, caplog, outputs_dir):
    caplog.set_level(logging.DEBUG)
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    text = caplog.text + out.model_dump_json()
    assert "wrote s3://" in caplog.text
    for value in SECRET_VALUES:
        assert value not in text
    # ...but they are in the (encrypted) archive, or a restore would be useless.
    docs = _objects(s3, bucket, out.url.split("/", 3)[3])
    decoded = " ".join(
        base64.b64decode(v).decode() for d in docs if d["kind"] == "Secret" for v in d["data"].values()
    )
    missing = [i for i, value in enumerate(SECRET_VALUES) if value not in decoded]
    assert missing == [], "every planted Secret value is in the archive (as data)"


def test_forbidden_list_names_verb_resource_namespace_and_grantee(api, argocd, s3, bucket):
    argocd.forbid("list", "secrets")
    with pytest.raises(PermissionDeniedError) as info:
        backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    assert str(info.value) == (
        "cannot list secrets in namespace argocd: forbidden; grant get/list on secrets in namespace argocd "
        "to 'system:serviceaccount:argocd:imagebump' (a Role + RoleBinding)"
    )
    assert _keys(s3, bucket) == [], "nothing written when the export is incomplete"


def test_forbidden_custom_resource_names_its_group(api, argocd, s3, bucket):
    argocd.forbid("list", "applicationsets")
    with pytest.raises(
        PermissionDeniedError, match=r"cannot list applicationsets\.argoproj\.io in namespace argocd"
    ):
        backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())


def test_missing_bucket_is_named(api, s3):
    with pytest.raises(ConfigError, match=r"bucket 'no-such-bucket-f6' does not exist \(NoSuchBucket\)"):
        backup_export.export_backup(api=api, s3=s3, bucket="no-such-bucket-f6", now=frozen())


def _client_error(code: str, message: str = "", status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )


@pytest.mark.parametrize(
    ("error", "kms", "kind", "text"),
    [
        pytest.param(
            _client_error("NoSuchBucket", status=404),
            "",
            ConfigError,
            "bucket 'b' does not exist",
            id="no-bucket",
        ),
        pytest.param(
            _client_error("AccessDenied", "Access Denied", 403),
            "",
            PermissionDeniedError,
            "grant s3:PutObject on bucket 'b'",
            id="access-denied",
        ),
        pytest.param(
            _client_error("KMS.NotFoundException", "Invalid keyId k1"),
            "k1",
            PermissionDeniedError,
            "KMS key 'k1' is not usable (KMS.NotFoundException)",
            id="kms-not-found",
        ),
        pytest.param(
            _client_error("AccessDenied", "User is not authorized to perform kms:GenerateDataKey", 403),
            "k1",
            PermissionDeniedError,
            "KMS key 'k1' is not usable",
            id="kms-access-denied",
        ),
        pytest.param(
            _client_error("SlowDown", status=503), "", TransientError, "retry later", id="slow-down"
        ),
    ],
)
def test_s3_errors_name_bucket_or_key(error, kms, kind, text):
    exc = s3io.s3_error(error, bucket="b", key="x/y.yaml.gz", action="write", kms_key_id=kms)
    assert type(exc) is kind
    assert text in str(exc)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"bucket": "B!"}, id="bucket"),
        pytest.param({"namespace": "Argo CD"}, id="namespace"),
        pytest.param({"cluster": "../x"}, id="cluster"),
        pytest.param({"keep": -1}, id="keep"),
    ],
)
def test_bad_input_is_refused_before_any_io(kwargs):
    params = {"bucket": "ok-bucket", **kwargs}
    with pytest.raises(ConfigError) as info:
        backup_export.export_backup(api=None, s3=None, **params)  # type: ignore[arg-type]
    assert info.value.field == next(iter(kwargs))  # the setting at fault


def test_runs_under_heras_runner(kubeconfig, moto, bucket, tmp_path):
    """The step as its pod runs it: `python -m hera.workflows.runner -e steps.argocd_backup.export:run`."""
    args = tmp_path / "args.json"
    args.write_text(
        json.dumps(
            [
                {"name": "bucket", "value": bucket},
                {"name": "prefix", "value": "argocd-backups"},
                {"name": "cluster", "value": "ci"},
                {"name": "namespace", "value": "argocd"},
                {"name": "kms_key_id", "value": ""},
                {"name": "keep", "value": "30"},
                {"name": "keep_days", "value": "0"},
            ]
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "AWS_PROFILE"))}
    env.update(
        PYTHONPATH=str(ROOT),
        KUBECONFIG=str(kubeconfig),
        AWS_ENDPOINT_URL=moto.endpoint_url,
        AWS_REGION="us-west-2",
        hera__outputs_directory=str(tmp_path / "out"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "hera.workflows.runner", "-e", "steps.argocd_backup.export:run", str(args)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    params = tmp_path / "out" / "parameters"
    url = (params / "url").read_text()
    assert url.startswith(f"s3://{bucket}/argocd-backups/ci/") and url.endswith("Z.yaml.gz")
    assert json.loads((params / "counts").read_text()) == EXPECTED_COUNTS
    assert json.loads((params / "deleted").read_text()) == []
    assert len((params / "sha256").read_text()) == 64
    for value in SECRET_VALUES:
        assert value not in proc.stdout + proc.stderr


def test_step_exit_code_on_forbidden(kubeconfig, argocd, moto, bucket, monkeypatch, outputs_dir, capsys):
    argocd.forbid("get", "configmaps")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    with pytest.raises(SystemExit) as info:
        backup_export.run(bucket=bucket)
    assert info.value.code == 2
    assert "cannot get configmaps 'argocd-cm' in namespace argocd: forbidden" in capsys.readouterr().err


def test_secrets_argocd_cm_references_in_its_legacy_repository_keys_are_backed_up(s3, bucket):
    """An Argo CD 2.x with repositories in argocd-cm: their Secrets carry no label, yet Argo CD reads
    them, and upstream's v2.14 export takes them (admin.go getReferencedSecrets)."""
    fake = seeded("argocd", apps=1)
    fake.objects[("configmaps", "argocd", "argocd-cm")]["data"].update(
        repositories=LEGACY_REPOS, **{"repository.credentials": LEGACY_CREDS}
    )
    for name in ("legacy-repo", "legacy-tls", "legacy-creds", "legacy-app-key", "unreferenced"):
        fake.seed(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": "argocd"},
                "data": {"password": "cGFzcw=="},
            }
        )
    secrets = {name for kind, _, name in _backup_keys(fake, s3, bucket) if kind == "Secret"}
    assert {"legacy-repo", "legacy-tls", "legacy-creds", "legacy-app-key"} <= secrets
    assert "unreferenced" not in secrets and "argocd-redis" not in secrets


# --- Applications and ApplicationSets in other namespaces --------------------------------------
def _with_params(fake: FakeKube, **data: str) -> FakeKube:
    cm = fake.objects[("configmaps", "argocd", "argocd-cmd-params-cm")]
    cm["data"] = {"server.insecure": "true", **data}
    return fake


def _backup_keys(api, s3, bucket) -> list[tuple[str, str, str]]:
    out = backup_export.export_backup(api=api, s3=s3, bucket=bucket, now=frozen())
    return [archive.key(d) for d in _objects(s3, bucket, out.url.split("/", 3)[3])]


def test_applications_in_other_namespaces_are_backed_up_keyed_by_namespace(s3, bucket):
    fake = seeded("argocd", apps=3, app_namespaces=("team-a", "team-b"))
    same_name = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": "app-000", "namespace": "team-b"},
        "spec": {"project": "team-b"},
    }
    fake.seed(same_name)  # the same name as an Application of argocd: a different object

    keys = _backup_keys(fake, s3, bucket)

    apps = {(ns, name) for kind, ns, name in keys if kind == "Application"}
    assert apps == {
        ("argocd", "app-000"),
        ("argocd", "app-001"),
        ("argocd", "app-002"),
        ("team-a", "team-a-app-0"),
        ("team-a", "team-a-app-1"),
        ("team-b", "team-b-app-0"),
        ("team-b", "team-b-app-1"),
        ("team-b", "app-000"),
    }
    assert ("Application", "not-managed", "stray") not in keys, "Argo CD does not manage that namespace"
    sets = {ns for kind, ns, _ in keys if kind == "ApplicationSet"}
    assert sets == {"argocd", "team-a"}, "applicationsetcontroller.namespaces is team-a only"
    # Names, not patterns: one list per namespace, never across the cluster.
    lists = {(c[1], c[2]) for c in fake.calls if c[0] == "list"}
    assert ("applications", "*") not in lists and ("applications", "team-b") in lists
    assert ("applicationsets", "team-b") not in lists


def test_patterns_list_across_the_cluster_and_keep_what_argo_cd_manages(s3, bucket):
    fake = _with_params(
        seeded("argocd", apps=2, app_namespaces=("team-a", "team-b")),
        **{"application.namespaces": "team-*", "applicationsetcontroller.namespaces": "/^team-a$/"},
    )
    keys = _backup_keys(fake, s3, bucket)
    assert {ns for kind, ns, _ in keys if kind == "Application"} == {"argocd", "team-a", "team-b"}
    assert {ns for kind, ns, _ in keys if kind == "ApplicationSet"} == {"argocd", "team-a"}
    assert ("applications", "*") in {(c[1], c[2]) for c in fake.calls if c[0] == "list"}


# --- RBAC: the grants docs/backup-restore.md documents, enforced by the fake -----------------------
DOCUMENT = ROOT / "docs" / "backup-restore.md"
BACKUP_SA = "system:serviceaccount:imagebump:imagebump-backup"


def _readme_block(marker: str) -> str:
    text = DOCUMENT.read_text()
    start = text.index(f"<!-- backup-rbac: {marker} -->")
    fence = text.index("```yaml\n", start) + len("```yaml\n")
    return text[fence : text.index("```", fence)]


def _backup_grants(tmp_path: Path, overlay: str | None) -> set[tuple[str, str, str, str, str]]:
    """imagebump-backup's effective grants from `kubectl kustomize` of manifests/ (+ the README overlay)."""
    from tests.test_rbac import effective_permissions

    shutil.copytree(ROOT / "manifests", tmp_path / "base", ignore=shutil.ignore_patterns("aws"))
    resources = ["../base"]
    (tmp_path / "overlay").mkdir()
    if overlay is not None:
        (tmp_path / "overlay" / "backup-app-namespaces.yaml").write_text(overlay)
        resources.append("backup-app-namespaces.yaml")
    (tmp_path / "overlay" / "kustomization.yaml").write_text(yaml.safe_dump({"resources": resources}))
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path / "overlay")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    return effective_permissions(docs)["imagebump/imagebump-backup"]


@pytest.mark.parametrize(
    ("setting", "overlay", "error"),
    [
        pytest.param("team-a, team-b", "namespaces", None, id="names+rolebindings"),
        pytest.param(
            "team-a, team-b",
            None,
            "bind ClusterRole imagebump-backup-app-reader there with a RoleBinding",
            id="names-without-grant",
        ),
        pytest.param("team-*", "patterns", None, id="patterns+clusterrolebinding"),
        pytest.param(
            "team-*",
            "namespaces",
            "holds patterns (team-*), which RBAC cannot grant namespace by "
            "namespace: bind ClusterRole imagebump-backup-app-reader",
            id="patterns-with-rolebindings",
        ),
    ],
)
def test_the_documented_grants_are_what_the_backup_needs(tmp_path, s3, bucket, setting, overlay, error):
    """The README's overlay, rendered by kubectl kustomize, enforced by the FAKE API server's RBAC."""
    grants = _backup_grants(tmp_path, _readme_block(overlay) if overlay else None)
    fake = _with_params(
        seeded("argocd", apps=2, app_namespaces=("team-a", "team-b")),
        **{"application.namespaces": setting, "applicationsetcontroller.namespaces": "team-a"},
    )
    fake.grants, fake.user = grants, BACKUP_SA
    if error is None:
        keys = _backup_keys(fake, s3, bucket)
        assert {ns for kind, ns, _ in keys if kind == "Application"} == {"argocd", "team-a", "team-b"}
    else:
        with pytest.raises(PermissionDeniedError, match=re.escape(error)) as info:
            _backup_keys(fake, s3, bucket)
        assert BACKUP_SA in str(info.value)
        assert _keys(s3, bucket) == [], "no partial archive"


def test_the_documented_grants_add_only_reading_applications_and_sets(tmp_path):
    base = _backup_grants(tmp_path / "a", None)
    for marker in ("namespaces", "patterns"):
        added = _backup_grants(tmp_path / marker, _readme_block(marker)) - base
        assert added and {(group, resource, name, verb) for _, group, resource, name, verb in added} <= {
            ("argoproj.io", resource, "*", verb)
            for resource in ("applications", "applicationsets")
            for verb in ("get", "list")
        }, marker


# --- The bucket's error names where it is set (audit of issue 16, item 1) ---------------------
def _backup_step_pod(arguments: dict[str, str], env: dict[str, str], tmp_path: Path):
    """backup-export as its pod runs it (the rendered template's args), with ``arguments``."""
    from workflows import names as n

    manifest = yaml.safe_load((ROOT / "manifests" / "workflows" / "argocd-backup.yaml").read_text())
    (template,) = [t for t in manifest["spec"]["workflowSpec"]["templates"] if t["name"] == "backup-export"]
    # The pod learns its namespace (where the ConfigMap is) from the downward API.
    fields = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}) for e in template["script"]["env"]}
    assert fields[backup_export.NAMESPACE_ENV] == {"fieldPath": "metadata.namespace"}
    args = tmp_path / "args.json"
    args.write_text(json.dumps([{"name": k, "value": v} for k, v in arguments.items()]))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "AWS_PROFILE"))}
    return subprocess.run(
        [sys.executable, *template["script"]["args"], str(args)],
        cwd=tmp_path,
        env={**clean, "PYTHONPATH": str(ROOT), backup_export.NAMESPACE_ENV: n.NAMESPACE, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("bucket", "problem"),
    [
        pytest.param(None, "bucket is not set: 'CHANGE-ME-imagebump-backups' is the example", id="shipped"),
        pytest.param("", "bucket is not set;", id="empty"),
        pytest.param("My_Backups", "bucket 'My_Backups' is not a valid S3 bucket name;", id="invalid"),
    ],
)
def test_a_bad_bucket_names_the_configmap_key_in_the_cronworkflow_and_the_flag_on_the_cli(
    tmp_path, capsys, bucket, problem
):
    """The shipped ConfigMap's values, as the controller passes them, through the step's own entry
    point: exit 2 (not retried) naming key `bucket` of ConfigMap imagebump-backup and its namespace,
    never a `--bucket` flag the CronWorkflow has not got. The CLI names its flag."""
    from imagebump.cli import main
    from workflows import argocd_backup
    from workflows import names as n

    values = argocd_backup.settings_configmap()["data"]
    if bucket is not None:
        values = {**values, "bucket": bucket}
    pod = _backup_step_pod(values, {}, tmp_path)
    assert pod.returncode == 2, pod.stderr
    (record,) = [json.loads(line) for line in pod.stderr.splitlines() if line.startswith("{")]
    message = record["message"]
    assert problem in message
    assert f"set key `bucket` of ConfigMap {n.BACKUP_CONFIGMAP} in namespace {n.NAMESPACE}" in message
    assert "--bucket" not in message

    cli_bucket = values["bucket"]
    assert main(["backup", "--bucket", cli_bucket, "--context", "none"]) == 2
    err = capsys.readouterr().err
    assert problem in err and "pass --bucket NAME" in err
    assert "ConfigMap" not in err


def test_the_step_names_the_configmap_key_of_any_bad_setting(tmp_path):
    from workflows import argocd_backup

    values = {**argocd_backup.settings_configmap()["data"], "bucket": "ok-bucket", "keep_days": "-1"}
    pod = _backup_step_pod(values, {}, tmp_path)
    assert pod.returncode == 2, pod.stderr
    assert "must be 0 (off) or positive; set key `keep_days` of ConfigMap imagebump-backup" in pod.stderr
    assert "--keep" not in pod.stderr
