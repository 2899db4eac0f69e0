"""reconcile's Git reading: ONE partial (``blob:none``), depth-1, sparse clone per Git repository.

Read-only. Every overlay of one repository is read from that clone's object store (trees by
``ls-tree``, the kustomizations in one ``cat-file --batch``, with each entry's hold marker); other
base branches are fetched into it; in ``mode: pr`` the behind targets' proposal branches are listed
with one ``ls-remote`` and fetched together; for ``provider: github`` a branch counts as a proposal
only while its pull request is open (one paginated listing of the open pull requests with the Git
read token, else anonymous; pages counted with the Git calls) — a branch whose pull request was
closed, or cannot be confirmed open, leaves the target ``behind`` and update-target proposes again
(commit-pr is idempotent). ``provider: local``: the branch is the proposal. A living proposal branch
with a commit imagebump did not make is a person's: ``branch-taken``, not handed to update-target
(:mod:`steps.domain.branch_owner`; its history over the base read once per branch). Each item is then
decided (:func:`steps.reconcile.decide.decide`), the ones still behind checked for a rollback
(:mod:`steps.reconcile.rollbacks`); an unreadable repository makes its targets ``unknown`` (``failure``).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from steps.domain.branches import branch_name
from steps.domain.errors import ImagebumpError, TransientError
from steps.domain.models import ImagesEntry, Target, ValuesRef
from steps.domain.repo_url import is_own_head
from steps.reconcile.decide import Verdict, decide
from steps.reconcile.model import Calls, Overlay
from steps.reconcile.report import ErrorKind, error_kind
from steps.reconcile.rollbacks import hold_rolled_back

_REGULAR = ("100644", "100755")


@dataclass(eq=False)
class Item:
    """One target overlay on its way through the Git phase."""

    overlay: Overlay
    newest: Target | None
    why_no_newest: str
    same_image_tags: frozenset[str]
    path: str | None = ""
    file: str = ""
    current: ImagesEntry | None = None
    error: str = ""
    branch: str = ""
    proposed: ImagesEntry | None = None
    verdict: Verdict | None = None
    no_pr: str = ""  # github: why the proposal branch does not count (its pull request is not open)
    failure: ErrorKind = ""  # unknown because the repository could not be read: why (exit codes)
    hold: str | None = None  # the entry's `# imagebump:hold` reason (None: no marker)
    rev: str = ""  # the commit the overlay was read at
    branch_sha: str = ""  # mode pr: the proposal branch's tip ('' when there is none)
    taken: str = ""  # the proposal branch is a person's (steps.domain.branch_owner): why
    values: ValuesRef | None = None  # a Helm values file (or helmfile release): how to find the image
    misread: tuple[str, ...] = ()  # values file: tags written so that Helm reads another value (1.10)
    proposed_misread: tuple[str, ...] = ()  # the same, in the proposal branch's values file

    @property
    def sample(self) -> Target:
        return self.newest or self.overlay.candidates[0]

    def judge(self) -> Verdict:
        sample = self.sample
        return decide(
            newest=self.newest,
            why_no_newest=self.why_no_newest,
            same_image_tags=self.same_image_tags,
            current=self.current,
            current_error=self.error,
            current_pushed_at=self.overlay.pushed_at(self.current, sample.image),
            branch=self.branch,
            proposed=self.proposed,
            proposed_pushed_at=self.overlay.pushed_at(self.proposed, sample.image),
            image=sample.image, hold=self.hold,
            misread=self.misread, proposed_misread=self.proposed_misread,
        )  # fmt: skip


def overlay_dir(path: str) -> str | None:
    """The overlay directory relative to the repository root ('' = root), or None if it escapes."""
    p = PurePosixPath(path.strip())
    if p.is_absolute() or ".." in p.parts or "\\" in path:
        return None
    text = p.as_posix()
    return "" if text == "." else text


def _blobs(repo: Any, oids: Iterable[str], *, fetch: bool, calls: Calls) -> dict[str, str]:
    """``oid → text`` of the blobs (each at most the kustomize size limit; others left out); ``fetch``:
    missing ones come in ONE request (:func:`steps.git.history.read_blobs`), not one each."""
    from steps.git.history import is_oid, read_blobs
    from steps.kustomize import MAX_KUSTOMIZATION_BYTES

    wanted = sorted(o for o in set(oids) if is_oid(o))  # object ids only: nothing reaches git as an option
    if not wanted:
        return {}
    if fetch:
        calls.add("git")
    read = read_blobs(
        repo,
        wanted,
        MAX_KUSTOMIZATION_BYTES,
        fetch=fetch,
        what=f"fetch of {len(wanted)} file(s) from {repo.url}",
    )
    return {oid: data.decode("utf-8", "replace") for oid, (_size, data) in read.items() if data is not None}


def _read_at(repo: Any, rev: str, items: Sequence[Item], *, fetch: bool, calls: Calls) -> None:
    """Fill ``file``/``current``/``error`` of each item from its overlay at ``rev`` (object store)."""
    from steps import kustomize
    from steps.git.history import list_tree

    values_items = [item for item in items if item.sample.edits_values]
    if values_items:
        _read_values_at(repo, rev, values_items)
        items = [item for item in items if not item.sample.edits_values]
        if not items:
            return
    dirs = sorted({item.path for item in items})
    entries = list_tree(repo, rev, [f"{d}/" for d in dirs if d])
    if "" in dirs:
        entries.update(list_tree(repo, rev, [name for name in kustomize.KUSTOMIZATION_FILES]))
    chosen: dict[str, tuple[str, str] | str] = {}
    for d in dirs:
        where = d or "(repository root)"
        names = [f"{d}/{n}" if d else n for n in kustomize.KUSTOMIZATION_FILES]
        present = [n for n in names if n in entries]
        if not present:
            inside = any(name.startswith(f"{d}/") for name in entries) if d else bool(entries)
            chosen[d] = (
                f"no kustomization in {where}: expected one of {', '.join(kustomize.KUSTOMIZATION_FILES)}"
                if inside
                else f"overlay directory {where} does not exist; fix the path in the rule"
            )
        elif len(present) > 1:
            chosen[d] = (
                f"ambiguous: {where} holds {', '.join(p.rsplit('/', 1)[-1] for p in present)}; keep one"
            )
        else:
            mode, kind, oid = entries[present[0]]
            if kind != "blob" or mode not in _REGULAR:
                chosen[d] = f"{present[0]} is not a regular file (a symbolic link?); refusing to follow it"
            else:
                chosen[d] = (present[0], oid)
    texts = _blobs(repo, [c[1] for c in chosen.values() if isinstance(c, tuple)], fetch=fetch, calls=calls)
    for item in items:
        found, item.rev = chosen[item.path], rev
        if isinstance(found, str):
            item.error = found
            continue
        item.file, oid = found
        text = texts.get(oid)
        if text is None:
            item.error = (
                f"{item.file} is larger than {kustomize.MAX_KUSTOMIZATION_BYTES} bytes; not reading it"
            )
            continue
        _set_entry(item, text)


def _read_values_at(repo: Any, rev: str, items: Sequence[Item]) -> None:
    """Fill ``file``/``current``/``hold``/``error`` of items that edit a Helm values file (or a
    helmfile release's values), read from the object store at ``rev``."""
    from steps import kustomize
    from steps.kustomize.values.helmfile import locate_image

    for item in items:
        sample, item.rev = item.sample, rev
        try:
            if sample.values_file is not None:
                item.file = sample.values_file
                text = repo.show(rev, item.file, **kustomize.read_limit(item.file, values=True))
                if text is None:
                    item.error = f"values file {item.file} does not exist; fix valuesFile in the rule"
                    continue
                item.values = sample.values_ref()
            else:
                ref = sample.helmfile
                got = locate_image(
                    lambda path: repo.show(rev, path, **kustomize.read_limit(path, values=True)),
                    ref.file,
                    ref.release,
                    ref.environment,
                    sample.image,
                    sample.values_keys,
                )
                item.file, text = got.file, got.text
                item.values = sample.values_ref(
                    list(got.scope) if got.scope else None, got.keys, got.repository
                )
            item.current = kustomize.require_entry(text, sample.image, source=item.file, values=item.values)
            item.hold = kustomize.entry_hold(text, sample.image, source=item.file, values=item.values)
            item.misread = tuple(
                kustomize.values_misread(text, sample.image, source=item.file, values=item.values)
            )
        except ImagebumpError as exc:
            item.error = str(exc)


def _set_entry(item: Item, text: str) -> None:
    from steps import kustomize

    wanted = item.sample.settings.image_name or item.sample.image
    if "\ufffd" in text:
        item.error = f"{item.file} is not UTF-8"
        return
    try:
        item.current = kustomize.get_image(text, wanted, source=item.file)
    except ImagebumpError as exc:
        item.error = str(exc)
        return
    if item.current is None:
        names = [e.name for e in kustomize.read_images(text, source=item.file)]
        listed = f"found: {', '.join(names)}" if names else "it has no images entries"
        item.error = f"image {wanted!r} not in {item.file} ({listed}); add it under images:"
    else:
        item.hold = kustomize.hold_marker(text, item.current.name, by_new_name=False, source=item.file)


def _read_proposals(repo: Any, items: Sequence[Item], *, calls: Calls) -> None:
    """mode pr: what each item's proposal branch proposes (``proposed``), all branches in one go."""
    from steps import kustomize
    from steps.git.history import list_tree

    wanted = {item.branch for item in items}
    patterns = sorted({f"refs/heads/{b.split('/', 1)[0]}/*" for b in wanted})
    calls.add("git")
    listed = repo.remote_branches(patterns, what=f"listing proposal branches of {repo.url}")
    heads = {b: sha for b, sha in listed.items() if b in wanted}
    if not heads:
        return
    calls.add("git")
    repo.fetch_branches(sorted(heads), what=f"fetch of {len(heads)} proposal branch(es) from {repo.url}")
    for item in items:
        item.branch_sha = heads.get(item.branch, "")
    located: dict[int, str] = {}
    for b, sha in sorted(heads.items()):
        users = [item for item in items if item.branch == b]
        entries = list_tree(repo, sha, sorted({item.file for item in users}))
        for item in users:
            mode, kind, oid = entries.get(item.file, ("", "", ""))
            if kind == "blob" and mode in _REGULAR:
                located[id(item)] = oid
    texts = _blobs(repo, located.values(), fetch=True, calls=calls)
    for item in items:
        text = texts.get(located.get(id(item), ""))
        if text is None or "\ufffd" in text:
            continue
        try:
            item.proposed = (
                kustomize.read_entry(text, item.current.name, source=item.file, values=item.values)
                if item.current
                else None
            )
            if item.current and item.values is not None:
                item.proposed_misread = tuple(
                    kustomize.values_misread(text, item.current.name, source=item.file, values=item.values)
                )
        except ImagebumpError:
            item.proposed = None  # not a readable kustomization there: no proposal to protect


#: At most this many pages of open pull requests (100 each) are read per repository.
MAX_PR_PAGES = 20


def _open_pr_heads(repo_url: str, auth: Any, calls: Calls) -> set[tuple[str, str]] | str:
    """``provider: github``: ``(head branch, base branch)`` of every open pull request of the
    repository whose head is in the repository itself (not a fork), from ONE paginated listing, or
    why it could not be read.

    Reconcile pod has no API credential of its own: the optional Git read token (a GitHub token
    that may read the repository may also list its pull requests), else anonymously (public
    repositories). commit-pr treats a branch whose pull request was closed as no proposal; so does
    reconcile, and a branch it cannot confirm an open pull request for is no proposal either.
    """
    from githubkit.exception import GitHubException

    from steps.forge import github as gh

    token = auth.token if auth is not None else None
    try:
        _host, owner, name = gh.parse_repo_url(repo_url)
        api_url = (os.environ.get(gh.API_URL_ENV) or gh.DEFAULT_API_URL).rstrip("/")
        settings = gh.GitHubSettings(api_url=api_url, token=token)
        retry = gh.RetryPolicy(max_retries=2, max_wait=10.0)
        client = gh.GitHub(token, **gh.client_options(settings, retry))
        heads: set[tuple[str, str]] = set()
        for page in range(1, MAX_PR_PAGES + 1):
            calls.add("git")
            try:
                pulls = client.rest.pulls.list(owner, name, state="open", per_page=100, page=page).parsed_data
            except (GitHubException, ValueError) as exc:
                raise gh.translate(
                    exc, f"listing the open pull requests of {owner}/{name}", (token,)
                ) from None
            heads.update(
                (p.head.ref, p.base.ref)
                for p in pulls
                if p.state == "open" and is_own_head(p.head.label, p.head.ref, owner)
            )
            if len(pulls) < 100:
                return heads
        return f"more than {MAX_PR_PAGES * 100} open pull requests in {owner}/{name}; not all were read"
    except ImagebumpError as exc:
        return str(exc)


def _forget_closed_proposals(repo_url: str, items: Sequence[Item], *, auth: Any, calls: Calls) -> None:
    """``provider: github``: a proposal branch counts only while its pull request is open."""
    github = [
        item for item in items if item.proposed is not None and item.sample.settings.provider == "github"
    ]
    if not github:
        return
    heads = _open_pr_heads(repo_url, auth, calls)
    for item in github:
        base = item.verdict.update.settings.base_branch if item.verdict and item.verdict.update else None
        if isinstance(heads, str):
            item.no_pr = f"the PR branch {item.branch} has no confirmed open pull request ({heads})"
        elif not any(head == item.branch and (base is None or b == base) for head, b in heads):
            item.no_pr = f"the PR branch {item.branch} has no open pull request (closed?)"
        else:
            continue
        item.proposed = None


def _find_taken(repo: Any, items: Sequence[Item], *, calls: Calls) -> None:
    """mode pr: a living proposal branch with a commit imagebump did not make is a person's
    (:mod:`steps.domain.branch_owner`): its item says why (``taken``), one history read per branch."""
    from steps.domain.branch_owner import foreign_commits, taken_reason
    from steps.runtime.settings import author_identity

    _name, email = author_identity()
    judged: dict[tuple[str, str], list[Any]] = {}
    for item in items:
        living = item.branch_sha and not item.no_pr
        if not living or (item.sample.settings.provider != "local" and item.proposed is None):
            continue  # no branch, or a pull request not confirmed open: no proposal to leave alone
        base = (
            item.verdict.update.settings.base_branch if item.verdict and item.verdict.update else None
        ) or repo.branch
        key = (item.branch, base)
        if key not in judged:
            calls.add("git")
            judged[key] = repo.branch_commits(item.branch, base)
        foreign = foreign_commits(judged[key], email, api=item.sample.settings.commit_method == "api")
        if foreign:
            item.taken = taken_reason(item.branch, foreign)


def reconcile_repository(repo_url: str, items: list[Item], *, auth: Any, calls: Calls, scratch: Path) -> None:
    """Read every overlay of one Git repository from ONE partial sparse clone; decide each."""
    from steps import git

    bad = [item for item in items if item.path is None]
    for item in bad:
        item.verdict = Verdict("unknown", f"overlay path {item.sample.path!r} leaves the repository")
    items = [item for item in items if item.path is not None]
    if not items:
        return
    bases = Counter(item.sample.settings.base_branch for item in items)
    branch = None if None in bases else bases.most_common(1)[0][0]
    try:
        calls.add("git")
        calls.add("clones")
        repo = git.clone(
            repo_url,
            scratch / "repo",
            branch=branch,
            paths=sorted({i.path for i in items if i.path}),
            sparse=True,
            auth=auth,
        )
        head = repo.head()
        on_clone: list[Item] = []
        others: dict[str, list[Item]] = {}  # base branch → its items (fetched into the same clone)
        for item in items:
            if item.sample.settings.base_branch in (None, repo.branch):
                on_clone.append(item)
            else:
                others.setdefault(item.sample.settings.base_branch or "", []).append(item)
        _read_at(repo, head, on_clone, fetch=False, calls=calls)
        for base, group in sorted(others.items()):
            calls.add("git")
            sha = repo.fetch(base)
            if sha is None:
                for item in group:
                    item.error = f"branch '{base}' does not exist in {repo_url}; fix baseBranch in the rule"
                continue
            _read_at(repo, sha, group, fetch=True, calls=calls)
        pending = []
        for item in items:
            item.verdict = item.judge()
            if (
                item.verdict.state == "behind"
                and item.verdict.update is not None
                and item.verdict.update.settings.mode == "pr"
            ):
                item.branch = branch_name(item.verdict.update)
                pending.append(item)
        if pending:
            _read_proposals(repo, pending, calls=calls)
            _forget_closed_proposals(repo_url, pending, auth=auth, calls=calls)
            _find_taken(repo, pending, calls=calls)
            for item in pending:
                item.verdict = item.judge()
                if item.taken and item.verdict.state in ("behind", "proposed"):  # a person's branch
                    item.verdict = dataclasses.replace(
                        item.verdict, state="branch-taken", reason=item.taken, update=None
                    )
                    continue
                if item.no_pr and item.verdict.state == "behind":
                    reason = f"{item.verdict.reason}; {item.no_pr}: update-target proposes it again"
                    item.verdict = dataclasses.replace(item.verdict, reason=reason)
        hold_rolled_back(repo, items, count=lambda: calls.add("git"))
    except ImagebumpError as exc:
        retry = (
            " (it may pass: the next reconcile run tries again)" if isinstance(exc, TransientError) else ""
        )
        for item in items:
            if item.verdict is None or item.verdict.state == "behind":
                item.failure = error_kind(exc)
                item.verdict = Verdict(
                    "unknown",
                    f"cannot read {repo_url}: {exc}{retry}",
                    item.verdict.current if item.verdict else "",
                    item.verdict.newest if item.verdict else "",
                )


def isolate_failure(repo_url: str, items: Sequence[Item], exc: BaseException) -> None:
    """An unexpected failure while reconciling one repository (what a hostile commit or a bug may
    cause): only that repository's undecided and behind rows turn ``unknown`` with the reason; the
    reconcile goes on for every other repository. Logged with its traceback for the maintainers."""
    import logging

    logging.getLogger(__name__).error("reconciling %s failed", repo_url, exc_info=exc)
    for item in items:
        if item.verdict is None or item.verdict.state == "behind":
            item.failure = error_kind(exc)
            item.verdict = Verdict(
                "unknown",
                f"cannot reconcile {repo_url}: {type(exc).__name__}: {str(exc)[:300]}; the other repositories are reconciled",
                item.verdict.current if item.verdict else "",
                item.verdict.newest if item.verdict else "",
            )
