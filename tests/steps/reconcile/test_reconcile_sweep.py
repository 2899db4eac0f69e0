"""The reconcile sweep against real parts: moto's ECR (server mode) and a ``git http-backend`` remote
with token auth. Only ECR's pagination, which moto does not emulate, is faked — by a paging proxy
in front of moto (``tests/fixtures/ecr_pages.py``), in the one test that needs pages.

moto stores push times in whole seconds: where the order of two pushes matters the test moves the
injected push clock on (``tests/fixtures/ecr_clock.py``) instead of waiting.
"""

from __future__ import annotations

import gc
import math
import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from imagebump.local import builders
from steps.domain.branches import branch_name
from steps.domain.models import Image, Target
from steps.git import GitAuth
from steps.reconcile.ecr_scan import make_clients, scan_ecr
from steps.reconcile.model import Calls
from steps.reconcile.step import scan_targets
from steps.rules import load_rules
from tests.fixtures import ecr_clock
from tests.fixtures.ecr_pages import PagingProxy

REGION = "us-west-2"
#: An earlier commit-pr run's commit: its identity and its trailer (steps.domain.branch_owner).
IMAGEBUMP = "imagebump <imagebump@users.noreply.github.com>"
TRAILER = "\n\nImagebump-Image: earlier-run\n"

pytestmark = pytest.mark.slow


@dataclass
class Registry:
    """ECR repositories under one unique prefix of moto's shared registry."""

    ecr: object
    prefix: str = field(default_factory=lambda: f"rc{uuid.uuid4().hex[:8]}")
    account: str = ""
    digests: dict[tuple[str, str], str] = field(default_factory=dict)

    def create(self, name: str) -> str:
        created = self.ecr.create_repository(repositoryName=name)["repository"]
        self.account = created["registryId"]
        return name

    def push(self, name: str, tag: str) -> str:
        """Put ``tag`` into ``name`` (created if needed); moto needs the digest given."""
        if (name, None) not in self.digests:
            try:
                self.create(name)
            except self.ecr.exceptions.RepositoryAlreadyExistsException:
                pass
            self.digests[(name, None)] = ""
        digest = builders.digest_for(f"{name}:{tag}:{uuid.uuid4()}")
        manifest = builders.image_manifest(digest)
        self.ecr.put_image(repositoryName=name, imageManifest=manifest, imageTag=tag, imageDigest=digest)
        self.digests[(name, tag)] = digest
        return digest

    @property
    def registry(self) -> str:
        return f"{self.account}.dkr.ecr.{REGION}.amazonaws.com"

    def uri(self, name: str) -> str:
        return f"{self.registry}/{name}"


def kustomization(image: str, tag: str | None, digest: str | None = None) -> str:
    return builders.kustomization([{"name": image, "newTag": tag, "digest": digest}])


@pytest.fixture()
def auth(git_token: str) -> GitAuth:
    """The read token of the session's git server (its repr never shows the token)."""
    return GitAuth(git_token)


@pytest.fixture()
def registry(moto, monkeypatch) -> Registry:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto.endpoint_url)
    return Registry(moto.client("ecr"))


def two_rules(registry: Registry, git_url: str, *, order: str = "push-time") -> str:
    return (
        f"- registryURI: {registry.registry}/{registry.prefix}/$1\n"
        f"  githubRepository: {git_url}/apps/$1/overlays/staging\n"
        f"  env: staging\n  mode: commit\n  provider: local\n  order: {order}\n"
        "  denyImageTag: [latest]\n"
        f"- registryURI: {registry.registry}/{registry.prefix}/$1\n"
        f"  githubRepository: {git_url}/apps/$1/overlays/production\n"
        f"  env: production\n  mode: pr\n  provider: local\n  writeDigest: true\n  order: {order}\n"
        "  denyImageTag: [latest]\n"
    )


def by_overlay(out) -> dict[str, object]:
    return {t.path: t for t in out.report}


def test_every_state_against_real_ecr_and_git(registry: Registry, make_remote, auth: GitAuth) -> None:
    p = registry.prefix
    for name, tag in (("api", "1.4.1"), ("web", "2.0.0"), ("worker", "3.1.0"), ("ghost", "1.0.0")):
        registry.push(f"{p}/{name}", tag)
    registry.push(f"{p}n/cron", "0.1.0")
    ecr_clock.advance()  # moto's push times are whole seconds
    api_newest = registry.push(f"{p}/api", "1.4.2")
    registry.push(f"{p}/web", "latest")  # denied by the rules, pushed after the newest allowed
    d = registry.digests
    api, web, worker = (registry.uri(f"{p}/{name}") for name in ("api", "web", "worker"))
    cron = registry.uri(f"{p}n/cron")
    remote = make_remote(
        {
            "apps/api/overlays/staging/kustomization.yaml": kustomization(api, "1.4.1"),
            "apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.0"),
            "apps/web/overlays/staging/kustomization.yaml": kustomization(web, "latest"),  # pinned by hand
            "apps/web/overlays/production/kustomization.yaml": kustomization(
                web, "2.0.0", d[(f"{p}/web", "2.0.0")]
            ),
            "apps/worker/overlays/staging/kustomization.yaml": kustomization(worker, "3.1.0"),
            "apps/worker/overlays/production/kustomization.yaml": kustomization(
                worker, "3.1.0", d[(f"{p}/worker", "3.1.0")]
            ),
            "jobs/cron/kustomization.yaml": kustomization(cron, "0.0.9"),
        }
    )
    rules = load_rules(
        two_rules(registry, remote.url)
        + (
            f"- registryURI: {registry.registry}/{p}n/$1\n  githubRepository: {remote.url}/jobs/$1\n"
            "  mode: commit\n  provider: local\n  order: none\n"
        )
    )
    # a living proposal that already offers the newest (what an earlier event left)
    pushed_at = registry.ecr.describe_images(repositoryName=f"{p}/api", imageIds=[{"imageTag": "1.4.2"}])[
        "imageDetails"
    ][0]["imagePushedAt"]
    newest_image = Image(
        account=registry.account,
        region=REGION,
        repository=f"{p}/api",
        tag="1.4.2",
        digest=api_newest,
        pushed_at=pushed_at,
    )
    production = next(t for t in rules.match(newest_image).targets if t.env == "production")
    remote.commit_files(
        {"apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.2", api_newest)},
        "imagebump(production): api 1.4.0 → 1.4.2" + TRAILER,
        branch=branch_name(production),
        author=IMAGEBUMP,
    )
    sessions_before = remote.server.read_sessions(remote.name)

    out = scan_targets(rules, concurrency=4, auth=auth)

    states = {path: (t.state, t.current, t.newest) for path, t in by_overlay(out).items()}
    assert states["apps/api/overlays/staging"] == ("behind", "1.4.1", "1.4.2")
    assert states["apps/api/overlays/production"] == ("proposed", "1.4.0", f"1.4.2@{api_newest}")
    assert states["apps/web/overlays/staging"][0] == "ahead"
    assert states["apps/web/overlays/production"][0] == "current"
    assert (
        states["apps/worker/overlays/staging"][0] == states["apps/worker/overlays/production"][0] == "current"
    )
    assert states["apps/ghost/overlays/staging"][0] == "unknown"
    assert "does not exist" in by_overlay(out)["apps/ghost/overlays/staging"].reason
    assert states["jobs/cron"] == ("unknown", "0.0.9", "")  # order: none is reported, never guessed
    assert "order: none" in by_overlay(out)["jobs/cron"].reason
    # reported, not read errors: `imagebump reconcile` does not fail on them
    assert by_overlay(out)["jobs/cron"].error == by_overlay(out)["apps/ghost/overlays/staging"].error == ""
    assert "never touched" in by_overlay(out)["apps/web/overlays/staging"].reason
    # the behind target, exactly as resolve-image would have produced it for that push
    staging = next(t for t in rules.match(newest_image).targets if t.env == "staging")
    assert [t.model_dump() for t in out.targets] == [staging.model_dump()]
    assert out.behind == 1
    # cost: one listing + one DescribeImages per repository; ONE clone for 7 overlays
    assert out.ecr_calls == 1 + 5
    assert out.git_clones == 1
    # clone, checkout, ls-remote, 2 fetches; and for the one target behind, its file's earlier
    # versions (one fetch; main's whole history, one commit, came with the clone): issue 23; and
    # the living proposal branch's own commits, to know it is still imagebump's (one fetch): issue 30
    assert remote.server.read_sessions(remote.name) - sessions_before <= 7
    counts = {(c.state, c.env): c.count for c in out.counts}
    assert counts[("behind", "staging")] == 1 and counts[("proposed", "production")] == 1


def test_a_hundred_repositories_under_one_rule_are_enumerated(
    registry: Registry, make_remote, auth: GitAuth
) -> None:
    p = registry.prefix
    names = [f"svc{i:03d}" for i in range(100)]
    for i, name in enumerate(names):
        registry.push(f"{p}/{name}", "1.0.0")
        if i % 2 == 0:
            registry.push(f"{p}/{name}", "1.1.0")
    # look-alikes the rule must not reach
    for decoy in (f"{p}x/svc000", f"{p}/deep/svc", f"x{p}/svc000"):
        registry.push(decoy, "9.9.9")
    remote = make_remote(
        {
            f"apps/{n}/overlays/staging/kustomization.yaml": kustomization(registry.uri(f"{p}/{n}"), "1.0.0")
            for n in names
        }
    )
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/staging\n"
        "  env: staging\n  mode: commit\n  provider: local\n  order: semver\n"
    )

    out = scan_targets(rules, concurrency=8, auth=auth)

    assert sorted(t.path for t in out.report) == [f"apps/{n}/overlays/staging" for n in names]
    behind = sorted(t.image.rsplit("/", 1)[1] for t in out.targets)
    assert behind == names[::2] and {t.tag for t in out.targets} == {"1.1.0"}
    assert {t.state for t in out.report if t.path.split("/")[1] in names[1::2]} == {"current"}
    assert out.ecr_calls == 1 + 100 and out.git_clones == 1


def test_every_page_of_ecr_is_followed(
    registry: Registry, make_remote, auth: GitAuth, moto, monkeypatch
) -> None:
    """ECR pages its answers (moto does not): a paging proxy in front of moto cuts them into pages of 7."""
    p = registry.prefix
    names = [f"svc{i:02d}" for i in range(20)]
    for name in names:
        registry.push(f"{p}/{name}", "1.0.0")
    for tag in range(1, 16):  # one repository with 16 tags: three pages of images
        registry.push(f"{p}/svc00", f"1.0.{tag}")
    remote = make_remote(
        {
            f"apps/{n}/overlays/staging/kustomization.yaml": kustomization(registry.uri(f"{p}/{n}"), "1.0.0")
            for n in names
        }
    )
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/staging\n"
        "  mode: commit\n  provider: local\n  order: semver\n"
    )
    all_repositories = len(registry.ecr.describe_repositories()["repositories"])  # moto is shared: others too

    with PagingProxy(moto.endpoint_url, page_size=7) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        out = scan_targets(rules, concurrency=4, auth=auth)

    assert len(out.report) == 20
    assert [(t.path, t.tag) for t in out.targets] == [("apps/svc00/overlays/staging", "1.0.15")]
    listing_pages = math.ceil(all_repositories / 7)
    assert proxy.calls["DescribeRepositories"] >= listing_pages  # every page, whatever else moto holds
    assert proxy.calls["DescribeImages"] == 19 + 3
    assert out.ecr_calls == proxy.calls["DescribeRepositories"] + proxy.calls["DescribeImages"]


def test_an_archived_image_still_orders_what_an_overlay_holds_and_is_never_a_candidate(
    registry: Registry, make_remote, auth: GitAuth, moto, monkeypatch
) -> None:
    """ECR lists archived images only when asked for them (DescribeImagesFilter.imageStatus; moto
    has no archive: the proxy plays it). An overlay holding an image a lifecycle rule archived is not
    "behind" an older active one (never a downgrade); an archived image cannot be pulled, so it is
    never what an overlay is brought up to."""
    p = registry.prefix
    registry.push(f"{p}/held", "1.0.1")
    registry.push(f"{p}/fresh", "1.0.0")
    ecr_clock.advance()  # pushed later than the above
    newer = registry.push(f"{p}/held", "1.0.2")  # what the overlay holds, archived since
    archived_newest = registry.push(f"{p}/fresh", "1.0.3")  # the newest push, archived
    remote = make_remote(
        {
            "apps/held/overlays/staging/kustomization.yaml": kustomization(
                registry.uri(f"{p}/held"), "1.0.2"
            ),
            "apps/fresh/overlays/staging/kustomization.yaml": kustomization(
                registry.uri(f"{p}/fresh"), "1.0.0"
            ),
        }
    )
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/staging\n"
        "  mode: commit\n  provider: local\n  order: push-time\n"
    )
    with PagingProxy(moto.endpoint_url, page_size=50, archived={newer, archived_newest}) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        out = scan_targets(rules, concurrency=2, auth=auth)

    states = {t.path.split("/")[1]: t.state for t in out.report}
    assert states == {"held": "ahead", "fresh": "current"}, [(t.path, t.state, t.reason) for t in out.report]
    assert out.targets == []  # nothing written: not 1.0.1 over 1.0.2, not the archived 1.0.3


def test_one_clone_per_git_repository_however_many_overlays(
    registry: Registry, make_remote, auth: GitAuth
) -> None:
    p = registry.prefix
    names = [f"app{i}" for i in range(6)]
    for name in names:
        registry.push(f"{p}/{name}", "1.0.0")
    small = make_remote(
        {"apps/app0/overlays/staging/kustomization.yaml": kustomization(registry.uri(f"{p}/app0"), "1.0.0")}
    )
    large = make_remote(
        {
            f"apps/{n}/overlays/staging/kustomization.yaml": kustomization(registry.uri(f"{p}/{n}"), "1.0.0")
            for n in names
        }
    )
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/app0\n  githubRepository: {small.url}/apps/app0/overlays/staging\n"
        "  mode: commit\n  provider: local\n"
        f"- registryURI: {registry.registry}/{p}/$1\n  githubRepository: {large.url}/apps/$1/overlays/staging\n"
        "  mode: commit\n  provider: local\n"
    )

    out = scan_targets(rules, concurrency=2, auth=auth)

    assert len(out.report) == 7 and {t.state for t in out.report} == {"current"}
    assert out.git_clones == 2
    assert small.server.read_sessions(small.name) == large.server.read_sessions(large.name)  # 1 vs 6 overlays


def test_an_older_living_proposal_is_updated_and_an_unreadable_repository_is_reported(
    registry: Registry, make_remote, auth: GitAuth
) -> None:
    p = registry.prefix
    registry.push(f"{p}/api", "1.4.1")
    ecr_clock.advance()
    newest = registry.push(f"{p}/api", "1.4.2")
    api = registry.uri(f"{p}/api")
    remote = make_remote(
        {
            "apps/api/overlays/staging/kustomization.yaml": kustomization(api, "1.4.0"),
            "apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.0"),
        }
    )
    rules = load_rules(two_rules(registry, remote.url))
    image = Image(account=registry.account, region=REGION, repository=f"{p}/api", tag="1.4.2", digest=newest)
    production = next(t for t in rules.match(image).targets if t.env == "production")
    remote.commit_files(
        {
            "apps/api/overlays/production/kustomization.yaml": kustomization(
                api, "1.4.1", registry.digests[(f"{p}/api", "1.4.1")]
            )
        },
        "an older proposal" + TRAILER,
        branch=branch_name(production),
        author=IMAGEBUMP,
    )

    out = scan_targets(rules, auth=auth)
    refused = scan_targets(rules, auth=GitAuth("not-the-token-" + uuid.uuid4().hex))

    states = {t.env: (t.state, t.reason) for t in out.report}
    assert states["production"][0] == "behind" and "proposes the older 1.4.1" in states["production"][1]
    assert {t.env for t in out.targets} == {"staging", "production"}
    assert {t.state for t in refused.report} == {"unknown"} and refused.targets == []
    assert all("token" in t.reason for t in refused.report), [t.reason for t in refused.report]
    # the kind of the failure travels with the target (imagebump reconcile exits 2 on it)
    assert {t.error for t in refused.report} == {"refused"} and {t.error for t in out.report} == {""}


def test_a_bad_endpoint_url_is_a_config_error_not_a_traceback(monkeypatch) -> None:
    """botocore refuses a malformed ``AWS_ENDPOINT_URL`` with a bare ``ValueError`` ("Invalid
    endpoint"): the step exits 2 (bad configuration), naming the variable, instead of 3."""
    from steps.domain.errors import ConfigError
    from steps.reconcile.ecr_scan import make_clients

    monkeypatch.setenv("AWS_ENDPOINT_URL", "notaurl")
    with pytest.raises(ConfigError, match="Invalid endpoint: notaurl.*AWS_ENDPOINT_URL"):
        make_clients(1)(REGION)


def test_one_ecr_repository_that_refuses_describe_images_does_not_stop_the_sweep(
    registry: Registry, make_remote, auth: GitAuth
) -> None:
    """An IAM policy that denies ``ecr:DescribeImages`` on one repository: its targets are ``unknown``
    (reason and ``error: refused``), every other repository is swept. moto enforces no IAM policy,
    so the refusal is injected at the client seam: a botocore ``before-parameter-build`` handler on the real
    client (talking to moto) answers that one repository's DescribeImages with AccessDeniedException;
    a second repository answers ``ThrottlingException`` for ever (``error: transient``)."""
    from botocore.exceptions import ClientError

    from steps.aws.ecr import make_listing_client

    p = registry.prefix
    for name in ("api", "web", "worker"):
        registry.push(f"{p}/{name}", "1.0.0")
    ecr_clock.advance()
    registry.push(f"{p}/api", "1.0.1")
    remote = make_remote(
        {
            f"apps/{name}/overlays/staging/kustomization.yaml": kustomization(
                registry.uri(f"{p}/{name}"), "1.0.0"
            )
            for name in ("api", "web", "worker")
        }
    )
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/staging\n"
        "  env: staging\n  mode: commit\n  provider: local\n  allowImageTag: ['regexp:[0-9.]+']\n"
    )
    client = make_listing_client(REGION)
    answers = {f"{p}/web": ("AccessDeniedException", 400), f"{p}/worker": ("ThrottlingException", 400)}

    def refuse(params, **_):
        answer = answers.get(params.get("repositoryName"))
        if answer is not None:
            code, status = answer
            raise ClientError(
                {
                    "Error": {"Code": code, "Message": "injected"},
                    "ResponseMetadata": {"HTTPStatusCode": status},
                },
                "DescribeImages",
            )

    client.meta.events.register("before-parameter-build.ecr.DescribeImages", refuse)

    out = scan_targets(rules, auth=auth, client_for=lambda region: client)

    rows = {t.path.split("/")[1]: t for t in out.report}
    assert (rows["api"].state, rows["api"].error) == ("behind", "")
    assert [t.tag for t in out.targets] == ["1.0.1"]
    assert (rows["web"].state, rows["web"].error) == ("unknown", "refused")
    assert f"{p}/web" in rows["web"].reason and "DescribeImages" in rows["web"].reason
    assert rows["web"].repo_url == remote.url and rows["web"].path == "apps/web/overlays/staging"
    assert (rows["worker"].state, rows["worker"].error) == ("unknown", "transient")
    assert "1 refused" in out.reason and "1 transient" in out.reason
    # the report output is capped worst first; the counts keep every target
    capped = scan_targets(rules, auth=auth, client_for=lambda region: client, report_limit=1)
    assert [t.state for t in capped.report] == ["behind"]
    assert "2 more are left out" in capped.reason
    assert sum(c.count for c in capped.counts) == 3


def git_token_not_in(text: str, auth: GitAuth) -> bool:
    return auth.token not in text


def test_a_pr_branch_proposes_only_while_its_github_pull_request_is_open(
    registry: Registry, make_remote, auth: GitAuth, github_env
) -> None:
    """``provider: github``: a proposal branch whose pull request was closed without merging is no
    proposal (as commit-pr treats it): the target is ``behind``, so update-target proposes again.
    The GitHub API cannot run here: the fake (``tests/fixtures/github.py``) answers the listing of
    open pull requests, authenticated by the sweep's read token; Git and ECR are real."""
    from tests.fixtures.github import FakePull

    p = registry.prefix
    registry.push(f"{p}/api", "1.4.1")
    ecr_clock.advance()
    newest = registry.push(f"{p}/api", "1.4.2")
    api = registry.uri(f"{p}/api")
    remote = make_remote({"apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.1")})
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/production\n"
        "  env: production\n  mode: pr\n  provider: github\n"
    )
    image = Image(account=registry.account, region=REGION, repository=f"{p}/api", tag="1.4.2", digest=newest)
    (target,) = rules.match(image).targets
    branch = branch_name(target)
    remote.commit_files(
        {"apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.2")},
        "imagebump(production): api 1.4.1 → 1.4.2" + TRAILER,
        branch=branch,
        author=IMAGEBUMP,
    )
    owner, name = remote.name.split("/")
    github_env.pulls.append(FakePull(owner, name, 7, branch, "main", "api 1.4.2", ""))

    def state() -> tuple[str, str, list[str]]:
        out = scan_targets(rules, auth=auth)
        (row,) = out.report
        return row.state, row.reason, [t.tag for t in out.targets]

    assert state() == ("proposed", f"the PR branch {branch} already proposes 1.4.2", [])
    listings = github_env.calls_to("GET", rf"/repos/{owner}/{name}/pulls")
    assert len(listings) == 1  # one listing per repository and sweep

    github_env.close(7)  # closed without merging: the branch is no proposal any more
    closed = state()
    assert closed[0] == "behind" and closed[2] == ["1.4.2"]
    assert "has no open pull request" in closed[1] and "proposes it again" in closed[1]

    github_env.pulls.append(FakePull(owner, name, 8, branch, "main", "api 1.4.2", ""))  # reopened
    assert state()[0] == "proposed"
    # the API refuses the sweep's credential: the open pull request cannot be confirmed, so the
    # target is behind (update-target re-proposes idempotently), never "proposed" on a guess
    github_env.tokens.clear()
    unconfirmed = state()
    assert unconfirmed[0] == "behind" and "no confirmed open pull request" in unconfirmed[1]
    assert git_token_not_in(unconfirmed[1], auth)


def test_an_open_pull_request_counts_whatever_case_github_gives_the_owner(
    registry: Registry, make_remote, auth: GitAuth, github_env
) -> None:
    """GitHub labels a pull request's head with the owner's canonical case (``O:branch``) while the
    rule writes ``o``: the open pull request is found and the target is ``proposed``, not ``behind``
    forever. The GitHub API is the fake (``tests/fixtures/github.py``); Git and ECR are real."""
    from tests.fixtures.github import FakePull

    p = registry.prefix
    registry.push(f"{p}/api", "1.4.1")
    ecr_clock.advance()  # moto's push times are whole seconds
    newest = registry.push(f"{p}/api", "1.4.2")
    api = registry.uri(f"{p}/api")
    remote = make_remote({"apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.1")})
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/production\n"
        "  env: production\n  mode: pr\n  provider: github\n"
    )
    image = Image(account=registry.account, region=REGION, repository=f"{p}/api", tag="1.4.2", digest=newest)
    (target,) = rules.match(image).targets
    branch = branch_name(target)
    remote.commit_files(
        {"apps/api/overlays/production/kustomization.yaml": kustomization(api, "1.4.2")},
        "imagebump(production): api 1.4.1 → 1.4.2" + TRAILER,
        branch=branch,
        author=IMAGEBUMP,
    )
    owner, name = remote.name.split("/")
    assert owner != owner.upper()
    github_env.name_repository(f"{owner.upper()}/{name}")
    github_env.pulls.append(FakePull(owner.upper(), name, 7, branch, "main", "api 1.4.2", ""))

    (row,) = scan_targets(rules, auth=auth).report
    assert (row.state, row.reason) == ("proposed", f"the PR branch {branch} already proposes 1.4.2")
    (listing,) = github_env.calls_to("GET", rf"/repos/{owner}/{name}/pulls")
    assert listing.status == 200


def _retained_targets() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Target)


def test_the_ecr_scan_keeps_candidates_bounded_by_targets_not_images(
    registry: Registry, moto, monkeypatch
) -> None:
    """The sweep streams DescribeImages and keeps a running newest per overlay: how many candidates
    (Target objects) are alive after the scan does not grow with the images ECR holds, and the
    newest is still the newest. Pages of 50 through the paging proxy, as ECR pages."""
    retained = {}
    for name, images in (("small", 5), ("large", 150)):
        p = f"{registry.prefix}{name}"
        for i in range(images):
            digest = registry.push(f"{p}/api", f"{i:07x}")
            registry.ecr.put_image(
                repositoryName=f"{p}/api",
                imageManifest=builders.image_manifest(digest),
                imageTag=f"1.0.{i}",
                imageDigest=digest,
            )
        rules = load_rules(
            f"- registryURI: {registry.registry}/{p}/$1\n"
            "  githubRepository: https://github.com/o/gitops/apps/$1/overlays/staging\n"
            "  env: staging\n  allowImageTag:\n  - regexp:^[0-9a-f]{7}$\n"
            f"- registryURI: {registry.registry}/{p}/$1\n"
            "  githubRepository: https://github.com/o/gitops/apps/$1/overlays/production\n"
            "  env: production\n  denyImageTag:\n  - latest\n"
        )
        before = _retained_targets()
        with PagingProxy(moto.endpoint_url, page_size=50) as proxy:
            monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
            overlays, _, _ = scan_ecr(rules, concurrency=1, calls=Calls(), client_for=make_clients(1))
        retained[name] = _retained_targets() - before
        assert proxy.calls["DescribeImages"] == math.ceil(images / 50)
        newest = {k[1].rsplit("/", 1)[1]: o.newest()[0] for k, o in overlays.items()}
        last = images - 1
        assert newest["staging"].tag == f"{last:07x}"  # the newest push (ties: the larger tag)
        assert newest["production"].tag == f"1.0.{last}"  # ties: a version before a hash
        del overlays, newest
    # two overlays of two rules: at most two candidates each, however many images
    assert retained["large"] == retained["small"] <= 2 * 2


def test_a_pr_branch_a_person_pushed_to_is_branch_taken_not_handed_on(
    registry: Registry, make_remote, auth: GitAuth, github_env
) -> None:
    """Issue 30 item 9: a living proposal branch with a commit imagebump did not make is the
    person's: the sweep says ``branch-taken`` and hands nothing to update-target, until the pull
    request is closed (then ``behind``: proposed afresh)."""
    from tests.fixtures.github import FakePull

    p = registry.prefix
    registry.push(f"{p}/api", "1.4.1")
    ecr_clock.advance()
    newest = registry.push(f"{p}/api", "1.4.2")
    api = registry.uri(f"{p}/api")
    file = "apps/api/overlays/production/kustomization.yaml"
    remote = make_remote({file: kustomization(api, "1.4.0")})
    rules = load_rules(
        f"- registryURI: {registry.registry}/{p}/$1\n"
        f"  githubRepository: {remote.url}/apps/$1/overlays/production\n"
        "  env: production\n  mode: pr\n  provider: github\n"
    )
    image = Image(account=registry.account, region=REGION, repository=f"{p}/api", tag="1.4.2", digest=newest)
    (target,) = rules.match(image).targets
    branch = branch_name(target)
    remote.commit_files(
        {file: kustomization(api, "1.4.1")}, "imagebump: 1.4.1" + TRAILER, branch=branch, author=IMAGEBUMP
    )
    theirs = remote.commit_files(
        {file: kustomization(api, "1.4.1") + "# keep 1.4.1 until the migration ran\n"},
        "hold on",
        branch=branch,
        author="Dana Reviewer <dana@example.com>",
    )
    owner, name = remote.name.split("/")
    github_env.pulls.append(FakePull(owner, name, 7, branch, "main", "api 1.4.1", ""))

    out = scan_targets(rules, auth=auth)
    (row,) = out.report
    assert row.state == "branch-taken" and out.targets == []
    assert theirs[:12] in row.reason and "Dana Reviewer" in row.reason
    assert {(c.state, c.count) for c in out.counts if c.env == "production" and c.count} == {
        ("branch-taken", 1)
    }

    github_env.close(7)  # closed: no living proposal, imagebump proposes the newest image again
    out = scan_targets(rules, auth=auth)
    (row,) = out.report
    assert row.state == "behind" and [t.tag for t in out.targets] == ["1.4.2"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    archived=st.lists(st.booleans(), min_size=2, max_size=5),
    held=st.integers(min_value=0, max_value=4),
)
def test_the_sweep_never_offers_an_archived_image_nor_one_older_than_the_overlay_holds(
    registry: Registry, make_remote, auth: GitAuth, moto, monkeypatch, archived: list[bool], held: int
) -> None:
    """Never a downgrade, never an image that cannot be pulled, over every mix of archived and active
    pushes and every image the overlay holds: the sweep offers the newest ACTIVE image pushed after
    the held one, and nothing when there is none (so the property cannot pass by offering nothing)."""
    held %= len(archived)
    name = f"{registry.prefix}/a{uuid.uuid4().hex[:6]}"
    digests = []
    for i in range(len(archived)):
        digests.append(registry.push(name, f"1.0.{i}"))
        ecr_clock.advance()  # a strict push order (moto's push times are whole seconds)
    remote = make_remote(
        {"apps/a/overlays/staging/kustomization.yaml": kustomization(registry.uri(name), f"1.0.{held}")}
    )
    rules = load_rules(
        f"- registryURI: {registry.registry}/{name}\n"
        f"  githubRepository: {remote.url}/apps/a/overlays/staging\n"
        "  mode: commit\n  provider: local\n  order: push-time\n"
    )
    gone = {d for d, a in zip(digests, archived, strict=True) if a}
    with PagingProxy(moto.endpoint_url, page_size=3, archived=gone) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        out = scan_targets(rules, concurrency=2, auth=auth)

    newer_active = [i for i in range(held + 1, len(archived)) if not archived[i]]
    offered = [(t.tag, t.digest) for t in out.targets]
    if newer_active:
        assert offered == [(f"1.0.{newer_active[-1]}", digests[newer_active[-1]])], out.report
    else:
        assert offered == [], out.report
