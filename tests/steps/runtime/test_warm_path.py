"""The warm path's shortcuts give what the plain path gives (issue 15): scratch directories left to
the runtime that deletes the step's TMPDIR, botocore data parsed once in a warm interpreter (for
botocore's ECR client: the event path's fallback, and reconcile's), the version read once. Real
moto ECR; no timing here (bench/ measures)."""

from __future__ import annotations

import secrets

import pytest

from steps.aws import ecr
from steps.runtime import scratch_dir as scratch


def test_scratch_is_deleted_by_the_step_unless_the_runtime_deletes_tmpdir(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv(scratch.DELETED_AFTER, raising=False)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with scratch.scratch("t-") as path:
        (path / "f").write_text("x")
        assert path.parent == tmp_path
    assert not path.exists()  # nobody else deletes it: the step does
    monkeypatch.setenv(scratch.DELETED_AFTER, "1")
    with scratch.scratch("t-") as kept:
        pass
    assert kept.is_dir()  # left to the runtime, inside the TMPDIR it deletes
    monkeypatch.setenv("TMPDIR", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a scratch outside TMPDIR …
    with scratch.scratch("t-") as outside:
        pass
    assert not outside.exists()  # … is the step's to delete


def test_ecr_client_on_the_warm_loader_answers_as_a_fresh_one(moto, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    name = f"team/warm-{secrets.token_hex(4)}"
    moto.client("ecr").create_repository(repositoryName=name)
    monkeypatch.setattr(ecr, "_LOADER", None)
    fresh = ecr.botocore_client("us-west-2").describe_repositories(repositoryNames=[name])["repositories"]
    ecr.warm_loader()
    assert ecr._LOADER is not None
    warm_client = ecr.botocore_client("us-west-2")
    warm = warm_client.describe_repositories(repositoryNames=[name])["repositories"]
    assert warm == fresh
    assert ecr.botocore_client("us-west-2")._loader is warm_client._loader  # one parsed copy, shared
    with pytest.raises(Exception, match="RepositoryNotFound"):
        warm_client.describe_repositories(repositoryNames=[name + "-missing"])


def test_session_built_before_the_fork_takes_the_steps_environment_and_is_handed_out_once(
    moto, monkeypatch
) -> None:
    """The warm interpreter builds one session before any step's environment exists; the step that
    takes it gets its own endpoint, region and credentials (read when its client is made), and no
    second caller gets the same session."""
    monkeypatch.setattr(ecr, "_LOADER", None)
    monkeypatch.setattr(ecr, "_WARM_SESSION", None)
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    ecr.warm_loader()  # as the fork server does, with none of the step's variables set
    built = ecr._WARM_SESSION
    assert built is not None

    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASTEPOWNKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "step-secret")
    assert ecr._session() is built and ecr._WARM_SESSION is None
    assert ecr._session() is not built  # a new one (on the same parsed data) from now on

    monkeypatch.setattr(ecr, "_WARM_SESSION", built)
    client = ecr.botocore_client("eu-west-1")
    assert client.meta.endpoint_url == moto.endpoint_url and client.meta.region_name == "eu-west-1"
    assert client._request_signer._credentials.access_key == "AKIASTEPOWNKEY"
    assert client.describe_repositories()["repositories"] == []  # eu-west-1 of moto: empty, answered


@pytest.mark.parametrize("region", ["us-west-2", "cn-north-1", "us-gov-west-1", "us-iso-east-1"])
@pytest.mark.parametrize("setting", [{}, {"use_fips_endpoint": True}, {"use_dualstack_endpoint": True}])
def test_ecr_loader_gives_the_client_botocores_own_loader_gives(region, setting, monkeypatch) -> None:
    """steps.aws.ecr's data loader (services checked one by one, plain-dict JSON) builds the client
    botocore's default loader builds: endpoint, signing, model; other services (STS, which a web
    identity's credentials need) and botocore's list of services as they were."""
    import botocore.session
    from botocore.config import Config
    from botocore.exceptions import UnknownServiceError

    monkeypatch.setattr(ecr, "_LOADER", None)
    keys = {"aws_access_key_id": "AKIAEXAMPLE", "aws_secret_access_key": "example"}
    plain = botocore.session.Session().create_client(
        "ecr", region_name=region, config=Config(**setting), **keys
    )
    ours = ecr._new_session().create_client("ecr", region_name=region, config=Config(**setting), **keys)
    assert ours._loader is not plain._loader and type(ours._loader).__module__ == ecr.__name__
    assert ours.meta.endpoint_url == plain.meta.endpoint_url
    assert ours.meta.partition == plain.meta.partition
    assert ours._request_signer._signing_name == plain._request_signer._signing_name
    assert ours._request_signer._region_name == plain._request_signer._region_name
    assert ours.meta.service_model.operation_names == plain.meta.service_model.operation_names
    assert ours.meta.service_model._service_description == plain.meta.service_model._service_description
    shape = "DescribeImagesResponse"  # members in the model's order, as botocore's OrderedDict keeps them
    assert list(ours.meta.service_model.shape_for(shape).members) == ["imageDetails", "nextToken"]
    assert list(plain.meta.service_model.shape_for(shape).members) == ["imageDetails", "nextToken"]
    session = ecr._new_session()
    assert session.create_client("sts", region_name=region, **keys).meta.service_model.service_name == "sts"
    assert list(session.get_available_services()) == botocore.session.Session().get_available_services()
    with pytest.raises(UnknownServiceError, match="Valid service names are: .*ecr"):
        session.create_client("no-such-service", region_name=region)


def test_ecr_loader_reads_aws_data_path_first(tmp_path, monkeypatch) -> None:
    """``AWS_DATA_PATH`` is searched before botocore's data, as botocore's own loader does."""
    import json

    monkeypatch.setattr(ecr, "_LOADER", None)
    (tmp_path / "sdk-default-configuration.json").write_text(
        json.dumps({"version": 1, "base": {}, "modes": {}})
    )
    monkeypatch.setenv("AWS_DATA_PATH", str(tmp_path))
    loader = ecr._new_session().get_component("data_loader")
    assert loader.search_paths[0] == str(tmp_path)
    assert loader.load_data("sdk-default-configuration") == {"version": 1, "base": {}, "modes": {}}
