"""Stack one more commit on the living PR branch, or rebuild it (issue 33), as properties over branch
shapes: whatever the branch holds, a person's commit is never built on, a base that moved means a
rebuild on the newest base, and a stacked update proposes exactly the tree a rebuild proposes.

Branches are modelled, not made with git: a tree is a mapping path → text, a commit its id, parents,
maker and tree. The real branch (git, the GitHub fake) is covered in
tests/steps/forge/test_github_commits.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from steps.commit_pr.stack import MAX_STACKED, BranchCommit, decide_update

FILE = "overlays/prod/kustomization.yaml"
OTHER = "overlays/prod/other.yaml"
PATHS = (FILE, OTHER, "README.md")
NEW_TEXT = "newTag: 9.9.9\n"


@dataclass(frozen=True)
class Shape:
    """A base's history, a PR branch built on one of its commits, and what the step sees now."""

    base_trees: tuple[dict[str, str], ...]  # oldest first; the last is the newest base
    built_on: int  # index into base_trees (the last: the base did not move)
    commits: tuple[BranchCommit, ...]  # over the base, newest first
    head_tree: dict[str, str]
    pr_open: bool
    can_append: bool
    pr_title: str  # what the open pull request's title says now

    @property
    def base(self) -> str:
        return _base_sha(len(self.base_trees) - 1)

    @property
    def base_tree(self) -> dict[str, str]:
        return self.base_trees[-1]

    @property
    def changed(self) -> set[str]:
        keys = set(self.base_tree) | set(self.head_tree)
        return {k for k in keys if self.base_tree.get(k) != self.head_tree.get(k)}

    def decide(self, limit: int = MAX_STACKED):
        return decide_update(
            head=self.commits[0].sha if self.commits else _base_sha(self.built_on),
            base=self.base,
            commits=self.commits,
            changed=self.changed,
            file=FILE,
            pr_open=self.pr_open,
            can_append=self.can_append,
            pr_title=self.pr_title,
            limit=limit,
        )


def _base_sha(i: int) -> str:
    return f"b{i:039x}"


def _edit(tree: dict[str, str], path: str, text: str) -> dict[str, str]:
    return {**tree, path: text}


@st.composite
def shapes(draw) -> Shape:
    texts = st.text(alphabet="abc:1234567890\n", min_size=1, max_size=12)
    first = {p: draw(texts) for p in PATHS}
    trees = [first]
    for _ in range(draw(st.integers(0, 3))):  # the base's later commits (someone's changes)
        trees.append(_edit(trees[-1], draw(st.sampled_from(PATHS)), draw(texts)))
    built_on = draw(st.integers(0, len(trees) - 1))
    tree, parent = dict(trees[built_on]), _base_sha(built_on)
    commits: list[BranchCommit] = []
    for i in range(draw(st.integers(0, MAX_STACKED + 1))):
        person = draw(st.booleans()) and draw(st.booleans())  # about a quarter of commits
        # imagebump edits the plan's file (a former plan: sometimes another); a person anything
        path = draw(st.sampled_from(PATHS)) if person or draw(st.integers(0, 5)) == 0 else FILE
        tree = _edit(tree, path, draw(texts))
        merge = draw(st.integers(0, 7)) == 0  # "Update branch": a merge of the base
        parents = (parent, _base_sha(len(trees) - 1)) if merge else (parent,)
        sha = f"c{i:039x}"
        commits.append(BranchCommit(sha, parents, imagebump=not person and not merge, subject=f"bump {i}"))
        parent = sha
    # imagebump titles the pull request with the subject of the commit it pushed last; a person who
    # dropped that commit (a force-push) leaves the title naming a commit the branch no longer has
    pushed_last = len(commits) - 1 + draw(st.integers(0, 2))
    return Shape(
        base_trees=tuple(trees),
        built_on=built_on,
        commits=tuple(reversed(commits)),
        head_tree=tree,
        pr_open=draw(st.integers(0, 5)) > 0,
        can_append=draw(st.integers(0, 5)) > 0,
        pr_title=f"bump {pushed_last}",
    )


@settings(max_examples=400, deadline=None)
@given(shapes())
def test_a_persons_commit_anywhere_on_the_branch_is_never_stacked_on(shape: Shape) -> None:
    if any(not c.imagebump for c in shape.commits):
        assert not shape.decide().stack


@settings(max_examples=400, deadline=None)
@given(shapes())
def test_a_base_that_moved_means_a_rebuild_on_the_newest_base(shape: Shape) -> None:
    if shape.built_on != len(shape.base_trees) - 1:
        assert not shape.decide().stack


@settings(max_examples=400, deadline=None)
@given(shapes())
def test_a_stacked_update_proposes_the_tree_a_rebuild_proposes(shape: Shape) -> None:
    """createCommitOnBranch writes the file on the head's tree; a rebuild writes it on the base's."""
    update = shape.decide()
    if update.stack:
        assert _edit(shape.head_tree, FILE, NEW_TEXT) == _edit(shape.base_tree, FILE, NEW_TEXT)
        assert shape.pr_open and shape.can_append and 0 < len(shape.commits) < MAX_STACKED


@settings(max_examples=400, deadline=None)
@given(shapes())
def test_every_branch_of_imagebumps_commits_on_the_newest_base_is_stacked_on_below_the_bound(
    shape: Shape,
) -> None:
    """The saving is real: nothing but the listed reasons makes a rebuild."""
    eligible = (
        shape.pr_open
        and shape.can_append
        and 0 < len(shape.commits) < MAX_STACKED
        and all(c.imagebump for c in shape.commits)
        and shape.built_on == len(shape.base_trees) - 1
        and shape.changed <= {FILE}
        and shape.pr_title == shape.commits[0].subject
    )
    assert shape.decide().stack == eligible


@settings(max_examples=400, deadline=None)
@given(shapes())
def test_nothing_is_stacked_on_a_branch_a_person_cut_back_with_a_force_push(shape: Shape) -> None:
    """imagebump's last commit gone from the branch (its title still names it): not built on."""
    if shape.commits and shape.pr_title != shape.commits[0].subject:
        assert not shape.decide().stack


@settings(max_examples=200, deadline=None)
@given(shapes(), st.integers(1, MAX_STACKED + 2))
def test_the_stack_is_bounded(shape: Shape, limit: int) -> None:
    if len(shape.commits) >= limit:
        assert not shape.decide(limit).stack


def test_a_head_the_lease_does_not_expect_is_rebuilt() -> None:
    """The commits read must end at the head the mutation's ``expectedHeadOid`` names."""
    base = _base_sha(0)
    mine = BranchCommit("c" * 40, (base,), imagebump=True)
    common = {"base": base, "changed": {FILE}, "file": FILE, "pr_open": True, "can_append": True}
    assert decide_update(head=mine.sha, commits=[mine], **common).stack
    moved = decide_update(head="d" * 40, commits=[mine], **common)
    assert not moved.stack and "lease" in moved.reason
