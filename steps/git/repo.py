"""A clone on disk: :class:`ClonedRepo` reads, writes, commits, pushes and fetches in it.

Every git command runs through :func:`steps.git.process.run_git` with the clone's
:class:`~steps.git.auth.GitAuth` (the token only in an ``http.extraHeader``); failures are
classified by :mod:`steps.git.failures`. :func:`steps.git.clone` makes one; callers import both
from :mod:`steps.git`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from steps.domain.branch_owner import MAX_BRANCH_COMMITS, MAX_COMMIT_BYTES, CommitFacts
from steps.domain.errors import CarriedObjectsError, ConfigError, PermissionDeniedError
from steps.git.auth import GitAuth, origin
from steps.git.commit import COMMIT_SUMMARY, commit_object, fast_import_stream, identity
from steps.git.failures import NO_BRANCH, classify
from steps.git.history import is_ancestor
from steps.git.objects import (
    REGULAR_MODES,
    blob_id,
    branch_file_sha,
    commit_facts,
    file_text,
    head_file_branch,
    is_oid,
    object_format,
    object_id,
    ref_file_sha,
    replace_in_chain,
    split_batch,
    tree_entries,
    verify_path_chain,
    write_pack,
)
from steps.git.process import OVER_LIMIT, ls_remote, run_git


class ClonedRepo:
    """A work tree made by :func:`clone`. All network operations reuse the clone's auth.

    Attributes:
        path: the work tree.
        branch: the branch that was cloned (the base).
        auth: the token used for fetches and pushes (None: anonymous).
        url: the remote's URL.
    """

    def __init__(
        self,
        path: Path | str,
        branch: str,
        auth: GitAuth | None = None,
        url: str | None = None,
        *,
        checked_out: bool = True,
    ) -> None:
        self.path = Path(path)
        self.branch = branch
        self.auth = auth
        self.url = url
        #: False: an objects-only clone (``clone(checkout=False)``): no work tree, no index.
        self.checked_out = checked_out
        #: The commit a :func:`steps.git.seed` repository was made at ("" for a clone): a push from it
        #: must find the remote branch still there (its lease), as nothing was fetched.
        self.seeded_from = ""
        #: The commit a :func:`steps.git.seed` repository was made at, kept after a fetch moved it on
        #: ("" for a clone): a commit it holds for sure, so asking git about it fetches nothing.
        self.seed_commit = ""
        #: A seed's proven chain (the commit and the trees down to :attr:`seeded_path`'s directory):
        #: its first commit is written from them in Python, without ``fast-import``.
        self.seeded_chain: list[bytes] = []
        self.seeded_path = ""
        self._written: set[str] = set()
        self._new: set[str] = set()
        self._pending: dict[str, tuple[str, str, str]] = {}  # objects-only: path -> (mode, old blob, text)
        self._known: dict[str, str] = {}  # blob id -> text, told by know(): read without a fetch
        self._head_entries: dict[str, tuple[str, str] | None] = {}  # entry("HEAD", path) until HEAD moves
        #: objects-only: path -> (HEAD's sha, the chain from HEAD down to path's directory), read by
        #: :meth:`entry` with one ``cat-file --batch``; :meth:`_fast_import` commits on it in Python
        self._chains: dict[str, tuple[str, list[bytes]]] = {}

    def __repr__(self) -> str:
        return f"ClonedRepo(path={str(self.path)!r}, branch={self.branch!r}, url={self.url!r})"

    def git(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        what: str | None = None,
        raw_stdout: bool = False,
        max_stdout: int | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a git command in this work tree, with this clone's auth (``max_stdout``: see
        :func:`~steps.git.process.run_git`)."""
        return run_git(
            list(args),
            self.path,
            self.auth,
            check,
            url=self.url,
            input=input,
            env=env,
            what=what,
            raw_stdout=raw_stdout,
            max_stdout=max_stdout,
        )

    def _checkout(self) -> None:
        self.git("checkout", "--quiet", what=f"checkout of {self.url} branch '{self.branch}'")

    # --- files ----------------------------------------------------------------------------------

    def resolve(self, relpath: str) -> Path:
        """``relpath`` inside the work tree; ConfigError for absolute paths, ``..`` or symlink escapes."""
        p = PurePosixPath(self._relative(relpath))
        root = self.path.resolve()
        full = (root / p).resolve()
        if full != root and not full.is_relative_to(root):
            raise ConfigError(
                f"path {relpath!r} leaves the repository through a symbolic link; refusing to follow it"
            )
        if full.is_relative_to(root / ".git"):
            raise ConfigError(f"path {relpath!r} points into .git; refusing")
        return full

    def read(
        self,
        relpath: str,
        *,
        max_bytes: int | None = None,
        too_large: Callable[[int], Exception] | None = None,
    ) -> str | None:
        """The text of a file (bytes kept: CRLF survives), or None if it does not exist; a file that
        is not UTF-8 is a KustomizationError (:func:`~steps.git.objects.file_text`).

        Objects-only clone: what :meth:`write` left for the next commit, else the blob at ``HEAD``
        (:meth:`show`; None for anything but a regular file). A file larger than ``max_bytes`` is
        never read: ``too_large(size)`` is raised (its size is asked first, :meth:`show`).
        """
        if not self.checked_out:
            rel = self._relative(relpath)
            if rel in self._pending:
                return self._pending[rel][2]
            return self.show("HEAD", rel, max_bytes=max_bytes, too_large=too_large)
        full = self.resolve(relpath)
        if not full.is_file():
            return None
        if max_bytes is not None:
            _refuse_size(full.stat().st_size, max_bytes, too_large, relpath)
        return file_text(full.read_bytes(), relpath, f"{self.branch} of {self.url}")

    def know(self, text: str, blob: str) -> bool:
        """Tell the clone that blob ``blob`` holds ``text`` (e.g. a plan carried it from the step
        that read it), so :meth:`show` / :meth:`read` need not download it.

        Believed only when ``text`` hashes to ``blob`` (the object id is the content's hash, in the
        repository's object format): returns whether it did.
        """
        if not blob or blob_id(text, object_format(blob)) != blob:
            return False
        self._known[blob] = text
        return True

    def assume_entry(self, relpath: str, mode: str, blob: str) -> None:
        """Record that ``HEAD`` holds the regular file ``relpath`` as ``(mode, blob)``, proven by
        other means (:func:`steps.git.seed`'s verified chain of objects): :meth:`entry` need not ask."""
        self._head_entries[self._relative(relpath)] = (mode, blob)

    def entry(self, rev: str, relpath: str) -> tuple[str, str] | None:
        """``(mode, blob id)`` of the regular file ``relpath`` at ``rev``; None when absent or not a
        regular file (a directory, a symbolic link, a submodule)."""
        if rev == "HEAD" and relpath in self._head_entries:
            return self._head_entries[relpath]
        if rev == "HEAD" and not self.checked_out:
            found = self._chain_entry(relpath)
            if found is not False:
                self._head_entries[relpath] = found
                return found
        # --literal-pathspecs: a path is a file's name, never pathspec magic (a helmfile's
        # ':/values.yaml' read the top-level values.yaml; ':(exclude)x' failed) nor a glob
        listing = self.git("--literal-pathspecs", "ls-tree", rev, "--", _pathspec(relpath)).stdout.strip()
        found = None
        if listing:
            mode, kind, rest = listing.split(None, 2)
            if kind == "blob" and mode in REGULAR_MODES:
                found = mode, rest.split("\t", 1)[0]
        if rev == "HEAD" and not self.checked_out:  # HEAD moves only through this object
            self._head_entries[relpath] = found
        return found

    def _chain_entry(self, relpath: str) -> tuple[str, str] | None | bool:
        """:meth:`entry` at ``HEAD`` of an objects-only repository from the chain of objects down to
        ``relpath``'s directory (:meth:`path_objects`: one ``cat-file --batch``, as ``ls-tree``; kept
        for :meth:`_fast_import`, which then commits without ``fast-import``). False when the chain
        cannot tell (a directory missing, a sha it cannot read): then ``ls-tree`` answers."""
        head = self.cloned_head()
        rel = self._relative(relpath)
        chain = self.path_objects(head, rel) if is_oid(head) else None
        if not chain:
            return False
        fmt = object_format(head)
        name = PurePosixPath(rel).name.encode("utf-8")
        try:
            if object_id("commit", chain[0], fmt) != head:
                return False
            found = [(mode, oid) for mode, entry, oid in tree_entries(chain[-1], fmt) if entry == name]
        except CarriedObjectsError:
            return False
        entry = found[0] if len(found) == 1 and found[0][0] in REGULAR_MODES else None
        if entry is not None:
            self._chains[rel] = (head, chain)
        return entry

    def show(
        self,
        rev: str,
        relpath: str,
        *,
        max_bytes: int | None = None,
        too_large: Callable[[int], Exception] | None = None,
    ) -> str | None:
        """The text of ``relpath`` at ``rev`` from the object store (nothing is checked out).

        A partial clone downloads just this one blob, or none when :meth:`know` was told its text.
        None when the path is absent at ``rev`` or is not a regular file (a directory, a symbolic
        link, a submodule). A file that is not UTF-8 is a KustomizationError, never text with
        replacement characters (:func:`~steps.git.objects.file_text`). With ``max_bytes``, at most
        that much of the blob is read: a larger one is never read into memory whole, its size is
        asked (``git cat-file -s``, only then) and ``too_large(size)`` is raised.
        """
        found = self.entry(rev, relpath)
        if found is None:
            return None
        if found[1] in self._known:
            return self._known[found[1]]
        read = self.git(
            "cat-file",
            "blob",
            found[1],
            what=f"reading {relpath} at {rev[:12]} of {self.url}",
            raw_stdout=True,
            max_stdout=max_bytes,
        )
        if read.returncode == OVER_LIMIT:  # larger than max_bytes: stopped there; its size for the error
            size = self.git("cat-file", "-s", found[1], what=f"sizing {relpath} at {rev[:12]} of {self.url}")
            _refuse_size(int(size.stdout.strip()), max_bytes or 0, too_large, relpath)
        data = read.stdout
        return file_text(data, relpath, f"{rev[:12]} of {self.url}")

    def path_objects(self, commit: str, relpath: str) -> list[bytes] | None:
        """The raw objects from ``commit`` down to ``relpath``'s directory — the commit, then one
        tree per directory from the root (:func:`steps.git.objects.verify_path_chain` checks such
        a chain) — with one ``git cat-file --batch``; None when one is missing."""
        parts = PurePosixPath(self._relative(relpath)).parts[:-1]
        specs = [commit, f"{commit}^{{tree}}"] + [
            f"{commit}:{'/'.join(parts[: i + 1])}" for i in range(len(parts))
        ]
        out = self.git(
            "cat-file",
            "--batch",
            input="\n".join(specs) + "\n",
            raw_stdout=True,
            what=f"reading the trees above {relpath} at {commit[:12]}",
        ).stdout
        return split_batch(out, len(specs))

    def _relative(self, relpath: str) -> str:
        """``relpath`` checked as text: relative, no ``..``, not into ``.git`` (all a clone without a
        work tree needs; :meth:`resolve` adds the symbolic-link check on disk)."""
        p = PurePosixPath(_pathspec(relpath))
        if not relpath or p.is_absolute() or ".." in p.parts:
            raise ConfigError(
                f"path {relpath!r} must be relative to the repository root and must not contain '..'"
            )
        rel = p.as_posix()
        if rel == ".git" or rel.startswith(".git/"):
            raise ConfigError(f"path {relpath!r} points into .git; refusing")
        return rel

    def write(self, relpath: str, text: str) -> None:
        """Write a file inside the work tree (bytes as given) and remember it for :meth:`commit`.

        Objects-only clone: the text waits in memory for :meth:`commit`; only a regular file that
        exists at ``HEAD`` can be rewritten (its mode is kept).
        """
        if not self.checked_out:
            rel = self._relative(relpath)
            found = self.entry("HEAD", rel)
            if found is None:
                raise ConfigError(
                    f"{rel} is not a regular file at {self.branch} of {self.url}; an objects-only clone "
                    "rewrites existing files only"
                )
            self._pending[rel] = (found[0], found[1], text)
            return
        full = self.resolve(relpath)
        rel = full.relative_to(self.path.resolve()).as_posix()
        if not full.exists() and rel not in self._written:
            self._new.add(rel)  # not tracked yet: commit must ``git add`` it first
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(text.encode("utf-8"))
        self._written.add(rel)

    # --- history --------------------------------------------------------------------------------

    def head(self) -> str:
        """The sha of ``HEAD``."""
        return self.git("rev-parse", "HEAD").stdout.strip()

    def head_branch(self) -> str:
        """The branch ``HEAD`` names, read from ``.git/HEAD``; anything else asks ``git
        symbolic-ref``: the same answer, one process more (tests compare)."""
        branch = head_file_branch(self.path / ".git")
        return branch or self.git("symbolic-ref", "--short", "HEAD").stdout.strip()

    def parents(self, sha: str) -> tuple[str, ...]:
        """The parent ids written in commit ``sha``, read from its object (in a shallow clone git
        hides a boundary commit's parents from ``rev-list``)."""
        raw = self.git("cat-file", "commit", sha, what=f"reading commit {sha[:12]}").stdout
        header = raw.split("\n\n", 1)[0]
        return tuple(line.split()[1] for line in header.splitlines() if line.startswith("parent "))

    def changed_paths(self, old: str, new: str) -> list[str]:
        """The paths whose entries differ between commits ``old`` and ``new`` (no rename detection)."""
        listed = self.git(
            "diff-tree",
            "-r",
            "--no-renames",
            "--name-only",
            "--end-of-options",
            old,
            new,
            what=f"comparing {new[:12]} with {old[:12]}",
        ).stdout
        return [line for line in listed.splitlines() if line]

    def tree(self, rev: str) -> str:
        """The id of ``rev``'s tree (``git rev-parse REV^{tree}``)."""
        return self.git("rev-parse", f"{rev}^{{tree}}").stdout.strip()

    def head_trees(self) -> tuple[str, str, str]:
        """``(parent, parent's tree, tree)`` of ``HEAD``, with one ``git rev-parse`` (``HEAD^``
        must exist)."""
        parent, parent_tree, tree = self.git(
            "rev-parse", "HEAD^", "HEAD^^{tree}", "HEAD^{tree}"
        ).stdout.split()
        return parent, parent_tree, tree

    def mode_at(self, rev: str, relpath: str) -> str | None:
        """The mode of ``relpath``'s entry in ``rev``'s tree (``git ls-tree REV -- PATH``), or None
        when the tree has no such entry."""
        listing = self.git("--literal-pathspecs", "ls-tree", rev, "--", _pathspec(relpath)).stdout.split(
            None, 1
        )
        return listing[0] if listing else None

    def cloned_head(self) -> str:
        """The sha of ``HEAD`` right after :func:`clone`, read from git's files (``branch_file_sha``);
        anything else (detached, reftable, no such ref) asks ``git rev-parse HEAD`` (tests compare)."""
        gitdir = self.path / ".git"
        branch = head_file_branch(gitdir)
        return (branch and branch_file_sha(gitdir, branch)) or self.head()

    def commit(
        self, message: str, author_name: str | None = None, author_email: str | None = None
    ) -> str | None:
        """Commit the files written through :meth:`write`; None when nothing changed.

        Identity: ``author_name`` / ``author_email``, else ``IMAGEBUMP_GIT_AUTHOR_NAME`` /
        ``IMAGEBUMP_GIT_AUTHOR_EMAIL``, else ``imagebump``. ``author_name`` may also be
        ``"Name <email>"``.
        """
        name, email = identity(author_name, author_email)
        if not self.checked_out:
            return self._fast_import(message, name, email)
        written = sorted(self._written)
        if self._new:  # untracked files: stage them, then commit the index
            self.git("--literal-pathspecs", "add", "--sparse", "--", *written)
            only: list[str] = []
        else:  # tracked files only: ``commit -- PATHS`` stages and commits them in one process
            only = ["--", *written] if written else []
        proc = self.git(
            "--literal-pathspecs",
            "-c",
            f"user.name={name}",
            "-c",
            f"user.email={email}",
            "-c",
            "core.abbrev=no",  # the summary line names the full sha: no rev-parse afterwards
            "commit",
            "--no-verify",
            "-F",
            "-",
            *only,
            input=message,
            check=False,
            what=f"commit in {self.url or self.path}",
        )
        if proc.returncode != 0:
            if proc.returncode == 1 and not proc.stderr.strip():
                return None  # "nothing to commit": git's status on stdout, exit 1, nothing on stderr
            raise classify(
                proc.stderr, args=["commit"], what="commit", url=self.url, returncode=proc.returncode
            )
        self._written.clear()
        self._new.clear()
        found = COMMIT_SUMMARY.search(proc.stdout)
        return found.group(1) if found else self.head()

    def _fast_import(self, message: str, name: str, email: str) -> str | None:
        """Commit the pending texts on ``HEAD`` with one ``git fast-import`` (objects-only clone).

        The stream is :func:`steps.git.commit.fast_import_stream`'s, from ``HEAD`` with every text that
        differs from its blob, after the replaced blobs :meth:`know` was told. Returns the new sha;
        None when no text differs from its blob.
        """
        head = self.cloned_head()
        fmt = object_format(head)
        changed, replaced, olds = {}, [], {}
        for rel, (mode, old_blob, text) in sorted(self._pending.items()):
            if old_blob != blob_id(text, fmt):
                changed[rel] = (mode, text)
                olds[rel] = old_blob
                if old_blob in self._known:
                    replaced.append(self._known[old_blob])
        self._pending.clear()
        if not changed:
            return None
        if self.seeded_chain and head == self.seeded_from and list(changed) == [self.seeded_path]:
            return self._commit_on_seed(
                head, fmt, changed[self.seeded_path][1], replaced, message, name, email
            )
        # one file changed on a HEAD whose chain entry() read: the same commit in Python (as on a seed)
        (rel,) = changed if len(changed) == 1 else ("",)
        at, chain = self._chains.get(rel, ("", []))
        if chain and at == head:
            try:
                verify_path_chain(chain, head, rel, olds[rel])
            except CarriedObjectsError:
                chain = []
            if chain:
                self.seeded_chain, self.seeded_path = chain, rel
                return self._commit_on_seed(head, fmt, changed[rel][1], replaced, message, name, email)
        stream = fast_import_stream(self.branch, head, message, name, email, changed, replaced)
        self.git(
            "fast-import",
            "--quiet",
            "--done",
            input=stream,
            what=f"commit in {self.url or self.path}",
        )
        self._head_entries.clear()
        self._chains.clear()
        return self.cloned_head()

    def _commit_on_seed(
        self, head: str, fmt: str, text: str, replaced: list[str], message: str, name: str, email: str
    ) -> str:
        """:meth:`_fast_import`'s commit of :attr:`seeded_path` on the seed's own commit, written as
        one pack from the proven chain (the same blob, trees and commit: tests compare) —
        one ``git fast-import`` process fewer. The replaced blob is stored too, as there."""
        gitdir = self.path / ".git"
        new = text.encode("utf-8")
        blob = object_id("blob", new, fmt)
        trees = replace_in_chain(self.seeded_chain, self.seeded_path, blob, fmt)
        content = commit_object(object_id("tree", trees[0], fmt), head, message, name, email)
        written = [("blob", old.encode("utf-8")) for old in replaced] + [("blob", new)]
        written += [("tree", tree) for tree in trees[::-1]] + [("commit", content)]
        sha = write_pack(gitdir, written, fmt)[-1]  # one pack, not a file and a directory per object
        (gitdir / "refs" / "heads" / self.branch).write_text(sha + "\n")
        self.seeded_chain = []  # one commit: the next one builds on a commit the chain is not
        self._head_entries.clear()
        self._chains.clear()
        return sha

    def push(self, refspec: str, force_with_lease: tuple[str, str] | None = None) -> None:
        """``git push origin REFSPEC``, optionally ``--force-with-lease=REF:EXPECTED``.

        ``EXPECTED`` is the sha the remote ref must still have ("" = must not exist yet); ``REF``
        may be a full ref or a branch name (``imagebump/prod/api`` → ``refs/heads/imagebump/prod/api``).

        Raises:
            PushRejected: the remote moved on (non-fast-forward, fetch first, stale lease).
            PermissionDeniedError: protected branch, declining hook, 403 or bad token.
        """
        args = ["push", "--quiet", "--no-verify", "--porcelain"]
        if force_with_lease is not None:
            ref, expected = force_with_lease
            if not ref.startswith("refs/"):
                ref = f"refs/heads/{ref}"
            args.append(f"--force-with-lease={ref}:{expected}")
        args += ["origin", refspec]
        proc = self.git(*args, check=False, what=f"push of {refspec} to {self.url}")
        if proc.returncode != 0:
            # --porcelain puts the per-ref status on stdout; classify on both streams.
            raise classify(
                proc.stderr + "\n" + proc.stdout,
                args=args,
                what=f"push of {refspec}",
                url=self.url,
                returncode=proc.returncode,
            )

    def fetch_branches(
        self, branches: list[str], *, check: bool = True, what: str = "", depth: int = 1
    ) -> subprocess.CompletedProcess[str]:
        """Fetch the newest tips of ``branches`` in ONE request, shallowly (``depth`` commits of each,
        default 1; commits and trees, no file contents), each into ``refs/remotes/origin/BRANCH``: the
        one home of the shallow branch fetch (:meth:`fetch`, reconcile's proposal branches). ``check``
        False: a failure is returned."""
        return self.git(
            "fetch",
            "--quiet",
            "--filter=blob:none",
            "--depth",
            str(max(1, int(depth))),
            "--no-tags",
            "origin",
            *[f"+refs/heads/{b}:refs/remotes/origin/{b}" for b in branches],
            check=check,
            what=what or f"fetch of {len(branches)} branch(es) from {self.url}",
        )

    def fetch(self, branch: str | None = None, depth: int = 1) -> str | None:
        """Fetch the newest ``branch`` (default: the base) ``depth`` commits deep; its sha, or None if absent."""
        branch = branch or self.branch
        proc = self.fetch_branches(
            [branch], check=False, what=f"fetch of branch '{branch}' from {self.url}", depth=depth
        )
        if proc.returncode != 0:
            err = classify(
                proc.stderr,
                args=["fetch"],
                what=f"fetch of branch '{branch}'",
                url=self.url,
                anonymous=self.auth is None and origin(self.url or "") is not None,
            )
            if (
                isinstance(err, ConfigError)
                and not isinstance(err, PermissionDeniedError)
                and NO_BRANCH.search(proc.stderr)
            ):
                return None
            raise err
        fetched = ref_file_sha(self.path / ".git", f"refs/remotes/origin/{branch}")
        return fetched or self.git("rev-parse", f"refs/remotes/origin/{branch}").stdout.strip()

    def fetch_and_reset(self, branch: str | None = None, depth: int = 1) -> str:
        """Move the work tree to the newest remote ``branch`` (sparse cone kept); return its sha.

        For rebase-and-retry: discards local commits and edits, then the caller re-applies its
        pure edit on the new base. ``depth``: how many of the branch's newest commits come (commits
        and trees), e.g. enough to reach the base the caller held before (:meth:`untouched_between`).
        """
        branch = branch or self.branch
        sha = self.fetch(branch, depth)
        if sha is None:
            raise ConfigError(f"branch '{branch}' no longer exists in {self.url}")
        self.seeded_from = ""  # the newest base was fetched: a push from it needs no seed's lease
        if not self.checked_out:  # no work tree, no index: the branch just moves
            gitdir = self.path / ".git"
            if head_file_branch(gitdir) == self.branch and "/" not in self.branch:
                # what ``git update-ref HEAD SHA`` writes there (a loose ref wins over packed-refs),
                # as the seed's own commit writes its branch: one process fewer per lost race
                (gitdir / "refs" / "heads" / self.branch).write_text(sha + "\n")
            else:
                self.git("update-ref", "HEAD", sha, what=f"moving to the newest '{branch}'")
            self._pending.clear()
            self._head_entries.clear()
            self._chains.clear()
            return sha
        self.git("reset", "--quiet", "--hard", sha, what=f"reset to the newest '{branch}'")
        self._written.clear()  # (a new file stays untracked after the reset: _new keeps it)
        return sha

    def untouched_between(self, older: str, newer: str, relpath: str) -> bool:
        """Whether ``older`` is an ancestor of ``newer`` in what this repository holds and no commit
        after ``older`` up to ``newer`` changed ``relpath`` (on any side of a merge: ``--full-history``).
        False whenever that cannot be shown with the commits here: ``older`` not reached (a shallow
        boundary in between, or a rewritten branch) or a git error. ``older`` must be a commit this
        repository holds (:func:`steps.git.history.is_ancestor`): then no commit is fetched.
        """
        if older == newer:
            return True
        if not is_ancestor(self, older, newer):
            return False
        touched = self.git(
            "rev-list",
            "--full-history",
            "--max-count=1",
            f"{older}..{newer}",
            "--",
            relpath,
            check=False,
            what=f"commits changing {relpath} after {older[:12]}",
        )
        return touched.returncode == 0 and not touched.stdout.strip()

    def branch_commits(self, branch: str, base: str | None = None) -> list[CommitFacts]:
        """The commits remote ``branch`` has over remote ``base`` (default: the cloned branch), newest
        first, at most :data:`~steps.domain.branch_owner.MAX_BRANCH_COMMITS` (+1, so a caller sees
        there are more), each read from its object (:func:`~steps.git.objects.commit_facts`).

        One fetch of the branch's own history only (``--shallow-exclude`` of the base: the commits
        reachable from the base stay on the server; trees and commits, no blob). When the server
        refuses that — a branch already merged into its base (nothing to select), or no
        ``deepen-not`` — both tips are fetched :data:`~steps.domain.branch_owner.MAX_BRANCH_COMMITS`
        deep, commits only, and compared here (a merged branch has none: []). A commit object larger
        than :data:`~steps.domain.branch_owner.MAX_COMMIT_BYTES` is not read: it is reported with its
        id only (nobody's imagebump commit is that large).
        """
        base = base or self.branch
        refspec = f"+refs/heads/{branch}:refs/remotes/origin/{branch}"
        proc = self.git(
            "fetch",
            "--quiet",
            "--filter=blob:none",
            "--no-tags",
            f"--shallow-exclude=refs/heads/{base}",
            "origin",
            refspec,
            check=False,
            what=f"fetch of the history of '{branch}' over '{base}' from {self.url}",
        )
        if proc.returncode != 0:
            err = classify(
                proc.stderr,
                args=["fetch"],
                what=f"fetch of the history of '{branch}'",
                url=self.url,
                anonymous=self.auth is None and origin(self.url or "") is not None,
            )
            if isinstance(err, PermissionDeniedError) or NO_BRANCH.search(proc.stderr):
                raise err
            # The server refused the exclusion: the branch is merged into the base ("no commits
            # selected"; over HTTP only "error processing shallow info"), or it has no deepen-not.
            # Then both tips, MAX_BRANCH_COMMITS deep, commits only (no tree, no blob), compared here.
            depth = f"--depth={MAX_BRANCH_COMMITS + 1}"
            fallback = self.git(
                "fetch",
                "--quiet",
                "--filter=tree:0",
                "--no-tags",
                depth,
                "origin",
                refspec,
                f"+refs/heads/{base}:refs/remotes/origin/{base}",
                check=False,
                what=f"fetch of the last commits of '{branch}' and '{base}' from {self.url}",
            )
            if fallback.returncode != 0:
                raise err
        tip = f"refs/remotes/origin/{branch}"
        exclude = (
            ["--not", f"refs/remotes/origin/{base}"] if self._has_ref(f"refs/remotes/origin/{base}") else []
        )
        listed = self.git(
            "rev-list",
            f"--max-count={MAX_BRANCH_COMMITS + 1}",
            tip,
            *exclude,
            check=False,
            what=f"listing the commits of '{branch}'",
        )
        shas = [s for s in listed.stdout.split() if s]
        if listed.returncode != 0 or not shas:
            return []
        sizes = self.git(
            "cat-file",
            "--batch-check",
            input="\n".join(shas) + "\n",
            what=f"sizing the commits of '{branch}'",
        ).stdout.split("\n")
        small = [
            sha
            for sha, line in zip(shas, sizes, strict=False)
            if len(line.split()) == 3
            and line.split()[1] == "commit"
            and int(line.split()[2]) <= MAX_COMMIT_BYTES
        ]
        read: dict[str, CommitFacts] = {}
        if small:
            out = self.git(
                "cat-file",
                "--batch",
                input="\n".join(small) + "\n",
                raw_stdout=True,
                what=f"reading the commits of '{branch}'",
            ).stdout
            objects = split_batch(out, len(small)) or []
            read = {sha: commit_facts(sha, raw) for sha, raw in zip(small, objects, strict=False)}
        return [read.get(sha, CommitFacts(sha=sha)) for sha in shas]

    def _has_ref(self, ref: str) -> bool:
        return self.git("rev-parse", "--verify", "--quiet", ref, check=False).returncode == 0

    def remote_branches(self, patterns: list[str], what: str = "") -> dict[str, str]:
        """``branch → sha`` of the remote's branches matching ``patterns`` (``refs/heads/…`` globs),
        listed with ONE ``ls-remote`` of ``origin``."""
        listed = self.git(
            "ls-remote", "origin", *patterns, what=what or f"listing branches of {self.url}"
        ).stdout
        heads = {}
        for line in listed.splitlines():
            sha, _, ref = line.partition("\t")
            if ref.startswith("refs/heads/"):
                heads[ref[len("refs/heads/") :]] = sha
        return heads

    def remote_head(self, branch: str) -> str | None:
        """The sha of ``branch`` on the remote right now (ls-remote), or None if absent."""
        return ls_remote(self.url or "origin", branch, self.auth) if self.url else None


def _refuse_size(
    size: int, max_bytes: int, too_large: Callable[[int], Exception] | None, relpath: str
) -> None:
    """Raise ``too_large(size)`` (a ConfigError naming ``relpath`` without it) when ``size`` is over."""
    if size > max_bytes:
        if too_large is not None:
            raise too_large(size)
        raise ConfigError(
            f"{relpath}: {size} bytes, larger than the {max_bytes} bytes it may be; it was not read"
        )


def _pathspec(relpath: str) -> str:
    """``relpath``, refused (ConfigError) when it holds a NUL byte, which no path in a repository
    can (a helmfile may name one: it would reach git's command line as ``embedded null byte``)."""
    if "\0" in relpath:
        raise ConfigError(f"path {relpath!r} holds a NUL byte, which no file name can; fix the path")
    return relpath
