"""GitHub as a destination (issue 36), against the GitHub fake: a comment on imagebump's pull
request per outcome (held, live in the environment before, blocked), once, and the commit status
``imagebump/live``: pending while verifying, success when live, failure on mismatch or timeout."""

from __future__ import annotations

import pytest

from steps.forge import github as gh
from steps.forge.pull_requests import GitHubForge
from steps.notify import config
from steps.notify.decide import Outcome
from steps.notify.github import CONTEXT
from steps.notify.ledger import FileLedger
from steps.notify.step import notify
from tests.fixtures.github import FakePull, GitHubFake

FAST = gh.RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0, sleep=lambda s: None)
REPO = "https://github.com/acme/gitops"
SHA1, SHA2, SHA3 = "1" * 40, "2" * 40, "3" * 40
CFG = config.parse({"destinations": {"gh": {"type": "github"}}})


@pytest.fixture
def forge_for(github_fake: GitHubFake):
    token = next(iter(github_fake.tokens))
    settings_ = gh.GitHubSettings(api_url=github_fake.url, token=token)
    asked: list[str] = []

    def make(repo_url: str) -> GitHubForge:
        asked.append(repo_url)
        _host, owner, repo = gh.parse_repo_url(repo_url)
        return GitHubForge(owner, repo, gh.client(settings_, retry=FAST), secrets=(token,))

    make.asked = asked  # type: ignore[attr-defined]
    return make


@pytest.fixture
def pull(github_fake: GitHubFake) -> FakePull:
    pr = FakePull("acme", "gitops", 7, "imagebump/production/api", "main", "imagebump(production): api", "")
    github_fake.pulls.append(pr)
    return pr


def _o(kind: str, event: str = "ev-1", **fields: str) -> Outcome:
    return Outcome(kind, event, f"{REPO}/overlays/prod", {"repo": REPO, "overlay": "overlays/prod", **fields})


def test_the_live_status_goes_pending_then_success_or_failure(github_fake, forge_for, tmp_path):
    outcomes = [
        _o("committed", commit=SHA1, verifying="true", link=SHA1),
        _o("live", commit=SHA1, seconds="42"),
        _o("committed", event="ev-2", commit=SHA2, verifying="true"),
        _o("mismatch", event="ev-2", commit=SHA2, application="argocd/api", running_image=":1.4.1"),
        _o("timeout", event="ev-3", commit=SHA3),
        _o("committed", event="ev-4", commit="4" * 40),  # not verified: no status at all
    ]
    report = notify(outcomes, CFG, FileLedger(tmp_path), forge_for=forge_for)
    assert report.counts == {"sent": 5}
    assert github_fake.status_of("acme", "gitops", SHA1, CONTEXT) == "success"
    assert [s["state"] for s in github_fake.statuses[("acme", "gitops", SHA1)]] == ["pending", "success"]
    assert github_fake.status_of("acme", "gitops", SHA2, CONTEXT) == "failure"
    assert github_fake.status_of("acme", "gitops", SHA3, CONTEXT) == "failure"
    assert github_fake.status_of("acme", "gitops", "4" * 40, CONTEXT) is None


@pytest.mark.parametrize("kind", ["held", "live-before", "blocked"])
def test_a_comment_on_imagebumps_pr_once_per_outcome(kind, github_fake, forge_for, pull, tmp_path):
    outcome = _o(kind, pr="https://github.com/acme/gitops/pull/7", reason="rolled back by alice")
    assert notify([outcome], CFG, FileLedger(tmp_path / "a"), forge_for=forge_for).counts == {"sent": 1}
    (comment,) = pull.comments
    assert f"imagebump:notify:{kind}:" in comment and "rolled back by alice" in comment
    # a resubmit: the ledger says sent; even a lost ledger finds the marker on the PR
    assert notify([outcome], CFG, FileLedger(tmp_path / "a"), forge_for=forge_for).counts == {"duplicate": 1}
    notify([outcome], CFG, FileLedger(tmp_path / "b"), forge_for=forge_for)
    assert len(pull.comments) == 1
    # another event's outcome is news
    notify([_o(kind, event="ev-9", pr="7")], CFG, FileLedger(tmp_path / "a"), forge_for=forge_for)
    assert len(pull.comments) == 2


def test_outcomes_with_nothing_for_github_are_no_message(forge_for, tmp_path):
    report = notify(
        [_o("pr-opened"), _o("held"), _o("failed")], CFG, FileLedger(tmp_path), forge_for=forge_for
    )
    assert report.counts == {}
    assert forge_for.asked == []


def test_github_down_is_counted_never_raised(tmp_path):
    def broken(repo_url: str):
        from steps.domain.errors import TransientError

        raise TransientError("GitHub unreachable")

    report = notify(
        [_o("live", commit=SHA1)], CFG, FileLedger(tmp_path), forge_for=broken, sleep=lambda s: None
    )
    assert report.counts == {"failed": 1}


def test_a_held_pr_target_finds_imagebumps_open_pr_from_its_branch(github_fake, forge_for, tmp_path):
    from steps.domain.branches import branch_name
    from steps.domain.models import Target
    from steps.notify.workflow_outcomes import image_outcomes

    target = Target(
        rule=0,
        repo_url=REPO,
        path="overlays/prod",
        env="prod",
        image="team/api",
        tag="v2",
        order="none",
        mode="pr",
    )
    branch = branch_name(target)
    github_fake.pulls.append(FakePull("acme", "gitops", 12, branch, "main", "imagebump(prod): api", ""))
    nodes = [
        {
            "name": "wf.resolve-image",
            "templateName": "resolve-image",
            "phase": "Succeeded",
            "outputs": {"parameters": [{"name": "targets", "value": f"[{target.model_dump_json()}]"}]},
        },
        {
            "name": "wf.update-target(0).update.edit-kustomize",
            "templateName": "edit-kustomize",
            "phase": "Succeeded",
            "outputs": {
                "parameters": [
                    {"name": "decision", "value": "held"},
                    {"name": "reason", "value": "rolled back by alice in c0ffee"},
                    {"name": "plan", "value": '{"base_branch": "main"}'},
                ]
            },
        },
    ]
    (held,) = image_outcomes(nodes, "ev-1")
    assert (held.kind, held.fields["branch"], held.fields["base"]) == ("held", branch, "main")
    assert notify([held], CFG, FileLedger(tmp_path), forge_for=forge_for).counts == {"sent": 1}
    (comment,) = github_fake.pulls[-1].comments
    assert "rolled back by alice" in comment and "imagebump:notify:held:" in comment


def test_a_comment_mentions_nobody_the_data_names(github_fake, forge_for, pull, tmp_path):
    """A hold reason or an author naming ``@alice`` or ``@acme/sre`` notifies nobody on GitHub."""
    outcome = _o("held", pr="7", by="Ann @alice", reason="rolled back, ask @acme/sre or @bob-2")
    assert notify([outcome], CFG, FileLedger(tmp_path), forge_for=forge_for).counts == {"sent": 1}
    assert github_fake.mentions(7) == []
    assert "rolled back, ask" in pull.comments[0]


def test_data_cannot_forge_the_marker_of_a_later_comment(github_fake, forge_for, pull, tmp_path):
    """A hold reason holding the ``blocked`` comment's marker does not stop that comment."""
    from steps.notify.decide import Routing, decide
    from steps.notify.github import marker

    blocked = _o("blocked", pr="7", reason="soak not met")
    (message,) = decide(blocked, Routing(default=("gh",)))
    forged = _o("held", pr="7", reason=f"see {marker(message)} here", by="x")
    assert notify([forged, blocked], CFG, FileLedger(tmp_path), forge_for=forge_for).counts == {"sent": 2}
    assert len(pull.comments) == 2
    assert [c.count("<!--") for c in pull.comments] == [1, 1]  # each only its own marker


@pytest.mark.parametrize("status", [403, 404, 422])
def test_a_comment_github_refuses_is_failed_its_claim_given_back_and_not_retried(
    status, github_fake, forge_for, pull, tmp_path
):
    outcome = _o("blocked", pr="7", reason="soak not met")
    comments = r"/repos/acme/gitops/issues/7/comments"
    github_fake.fail("POST", comments, status)
    sleeps: list[float] = []
    report = notify([outcome], CFG, FileLedger(tmp_path), forge_for=forge_for, sleep=sleeps.append)
    assert report.counts == {"failed": 1}
    assert pull.comments == [] and list(tmp_path.iterdir()) == []
    assert len(github_fake.calls_to("POST", comments)) == 1 and sleeps == []  # it would refuse again
    # the next run (the token fixed, the PR reopened) comments
    assert notify([outcome], CFG, FileLedger(tmp_path), forge_for=forge_for).counts == {"sent": 1}
    assert len(pull.comments) == 1


def test_a_comment_github_could_not_take_now_is_retried(github_fake, forge_for, pull, tmp_path):
    comments = r"/repos/acme/gitops/issues/7/comments"
    github_fake.fail("POST", comments, 502, times=2)  # the client's own retry takes one
    sleeps: list[float] = []
    report = notify(
        [_o("blocked", pr="7", reason="r")],
        CFG,
        FileLedger(tmp_path),
        forge_for=forge_for,
        sleep=sleeps.append,
    )
    assert report.counts == {"sent": 1} and len(pull.comments) == 1
    assert sleeps  # deliver tried again after a transient refusal


def test_a_multi_line_value_starts_no_list_item_of_its_own(github_fake, forge_for, pull, tmp_path):
    """A hold reason with line breaks stays inside its own ``- **reason**:`` item: it cannot add a
    forged ``- **commit**: …`` line to the comment."""
    outcome = _o("held", pr="7", reason="rolled back\n- **commit**: forged\r\n\u2028done")
    assert notify([outcome], CFG, FileLedger(tmp_path), forge_for=forge_for).counts == {"sent": 1}
    (comment,) = pull.comments
    items = [line for line in comment.splitlines() if line.startswith("- ")]
    assert not any("forged" in line and not line.startswith("- **reason**") for line in items)
    assert any(line.startswith("- **reason**: rolled back") and "done" in line for line in items)
