"""One spelling of a repository, end to end on the local executor with the rendered templates.

Two rules write one GitOps repository in two spellings (``demo/manifests`` and
``Demo/Manifests.git``) for one overlay that deploys two images. With the repository's host a
GitHub host (``IMAGEBUMP_GITHUB_API_URL`` names it, as for GitHub Enterprise), owner and repository
are case-insensitive, as on GitHub: the two pushes' ``update-target`` steps take ONE mutex, so the
two writers of the file are serialised. The ``git http-backend`` remote is real; it is made to
answer both spellings as GitHub does with a symbolic link (its paths are case-sensitive). No
GitHub API is called (``provider: local``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from imagebump.local import builders
from imagebump.local.demo_repo import MANIFESTS_REPO, STAGING_PATH
from imagebump.local.drive import run_until_done
from imagebump.local.world import World, build_world

pytestmark = pytest.mark.slow


def _push(world: World, repository: str, tag: str) -> None:
    """Put ``tag`` into ``repository`` (moto) and send its push event through EventBridge."""
    digest = builders.digest_for(f"{world.stack_name}/{repository}:{tag}")
    world.client("ecr").put_image(
        repositoryName=repository,
        imageManifest=builders.image_manifest(digest),
        imageTag=tag,
        imageDigest=digest,
    )
    event = builders.ecr_push_event(repository, digest, tag, account=world.account, region=world.region)
    response = world.client("events").put_events(Entries=[builders.event_bridge_entry(event)])
    assert not response.get("FailedEntryCount"), response


def test_two_spellings_of_one_repository_share_the_overlays_mutex(moto, tmp_path: Path, monkeypatch) -> None:
    records: list[dict] = []

    def rules(world: World) -> str:
        web = world.repository.rsplit("/", 1)[0] + "/web"
        owner, name = MANIFESTS_REPO.split("/")
        return (
            f"- registryURI: {world.registry}/{world.repository}\n"
            f"  githubRepository: {world.git.base_url}/{owner}/{name}/{STAGING_PATH}\n"
            "  env: staging\n  mode: commit\n  provider: local\n"
            f"- registryURI: {world.registry}/{web}\n"
            f"  githubRepository: {world.git.base_url}/{owner.title()}/{name.title()}.git/{STAGING_PATH}\n"
            "  env: staging\n  mode: commit\n  provider: local\n"
        )

    with build_world(tmp_path, moto=moto, rules=rules, log_sink=records.append) as world:
        monkeypatch.setenv("IMAGEBUMP_GIT_TOKEN", world.token)
        web = world.repository.rsplit("/", 1)[0] + "/web"
        world.client("ecr").create_repository(repositoryName=web)
        overlay = f"{STAGING_PATH}/kustomization.yaml"
        text = world.read(overlay)
        world.git.commit_files(
            MANIFESTS_REPO,
            {overlay: text + f"- name: {world.registry}/{web}\n  newTag: 2.0.0\n"},
            "web in the api overlay",
            branch="main",
        )
        # GitHub answers every spelling of a repository; the plain git server, through links
        owner, name = MANIFESTS_REPO.split("/")
        (world.git.root / owner / f"{name.title()}.git").symlink_to(f"{name}.git")
        (world.git.root / owner.title()).symlink_to(owner)
        world.set_env_config({"IMAGEBUMP_GITHUB_API_URL": f"{world.git.base_url}/api/v3"})

        _push(world, world.repository, "1.4.2")
        _push(world, web, "2.0.1")
        report = run_until_done(world, 2, timeout=120)

        assert [o.result.phase for o in report.outcomes] == ["Succeeded", "Succeeded"]
        acquired = [r["mutex"] for r in records if r.get("event") == "mutex-acquired"]
        assert acquired == [f"{world.git.base_url}/{owner}/{name}/{STAGING_PATH}"] * 2
        after = world.read(overlay)
        assert 'newTag: "1.4.2"  # set by imagebump' in after and "newTag: 2.0.1" in after
