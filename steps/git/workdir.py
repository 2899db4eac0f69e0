"""Clones and seeds for the steps: the working directory a step edits in.

:func:`clone` makes the partial (``--filter=blob:none``), shallow, single-branch, sparse (cone)
clone every step uses; :func:`seed` creates a branch from given files. Reads: the tokens through
:class:`~steps.git.auth.GitAuth`. Writes: only inside the directory given to :func:`clone`. An
anonymous read the remote refuses is a :class:`~steps.domain.errors.PermissionDeniedError` naming
the ``imagebump-git-read`` Secret.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from steps.domain.errors import CarriedObjectsError, ConfigError
from steps.git.auth import GitAuth, check_url
from steps.git.objects import object_format, object_id, verify_path_chain, write_pack
from steps.git.process import run_git
from steps.git.repo import ClonedRepo
from steps.runtime.timing import timed

# --- clones -------------------------------------------------------------------------------------


def _clean_paths(paths: Iterable[str]) -> list[str]:
    cleaned = []
    for raw in paths:
        p = PurePosixPath(raw.strip())
        if p.is_absolute() or ".." in p.parts:
            raise ConfigError(f"path {raw!r} must be relative to the repository root, without '..'")
        text = p.as_posix()
        if text not in (".", ""):
            cleaned.append(text)
    return cleaned


#: Path characters a cone pattern takes literally; any other path uses ``git sparse-checkout set``
#: (which escapes glob characters itself) instead of the one-process clone below.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._@+-]+(?:/[A-Za-z0-9._@+-]+)*")
#: The full sha in ``git commit``'s summary line (``[main 0123…] subject``, with ``core.abbrev=no``).


def cone_patterns(paths: Sequence[str]) -> str | None:
    """The ``info/sparse-checkout`` file ``git sparse-checkout set --cone PATHS`` writes, or None
    when a path has characters a pattern would not take literally (then git must write it).

    The format is git's documented cone pattern set (git-sparse-checkout(1), "INTERNALS — CONE
    PATTERN SET"): every top-level file, then for each directory on the way to a path its files
    but not its subdirectories, and each path recursively.
    """
    if not all(_PLAIN_PATH.fullmatch(p) for p in paths):
        return None
    lines = ["/*", "!/*/"]
    recursive = sorted({p for p in paths if not any(p.startswith(q + "/") for q in paths)})
    parents = sorted({"/".join(p.split("/")[:d]) for p in recursive for d in range(1, p.count("/") + 1)})
    for parent in parents:
        lines += [f"/{parent}/", f"!/{parent}/*/"]
    lines += [f"/{p}/" for p in recursive]
    return "\n".join(lines) + "\n"


def clone(
    repo_url: str,
    dest: Path | str,
    *,
    branch: str | None = None,
    paths: Sequence[str] = (),
    auth: GitAuth | None = None,
    sparse: bool | None = None,
    one_process: bool = True,
    checkout: bool = True,
    depth: int = 1,
) -> ClonedRepo:
    """A cheap clone: partial (``blob:none``), depth 1, one branch, sparse cone on ``paths``.

    Args:
        repo_url: ``scheme://host[:port]/OWNER/REPO`` (with or without ``.git``), no credentials.
        dest: an empty or missing directory to clone into.
        branch: the branch to check out (None: the remote's default branch).
        paths: directories to materialise (cone mode; top-level files always come along).
        auth: token, or None for anonymous access.
        sparse: force sparse checkout on (True with no ``paths``: top-level files only) or off.
            Default: sparse when ``paths`` is given.
        one_process: make the sparse clone with one ``git clone`` (the cone's pattern file comes
            from a private template directory, the sparse settings from ``clone -c``) instead of
            ``clone --no-checkout`` + ``sparse-checkout set`` + ``checkout``. Same work tree, index
            and configuration (tests compare both); False forces the three commands.
        checkout: False makes an objects-only clone (``--no-checkout``: commits and trees, no
            blob, no work tree, no index): files are read from the object store one blob at a time
            (:meth:`ClonedRepo.read`, which takes a blob it was told about without fetching it,
            :meth:`ClonedRepo.know`) and commits are written with one ``git fast-import``.
            ``paths`` and ``sparse`` do not apply.
        depth: how many commits of the branch come (commits and trees, no file contents beyond the
            cone's at the tip): edit-kustomize clones the commits its history read needs
            (:data:`steps.entry_history.DEPTHS` ``[0]``) in the clone's own request, so the usual
            history read fetches no commits (one round trip fewer per event).

    Raises:
        ConfigError: missing repository or branch; PermissionDeniedError: token rejected;
        TransientError: network trouble.
    """
    check_url(repo_url)
    dest = Path(dest)
    cone = _clean_paths(paths)
    use_sparse = (bool(cone) if sparse is None else sparse) and checkout
    patterns = cone_patterns(cone) if (use_sparse and one_process) else None
    args = [
        "clone",
        "--quiet",
        "--filter=blob:none",
        "--depth",
        str(max(1, int(depth))),
        "--single-branch",
        "--no-tags",
    ]
    if patterns is not None:
        # The template holds only info/sparse-checkout: no sample hooks to copy (or delete) either.
        template = dest.parent / f".{dest.name}-template"
        with timed("git clone"):  # part of making the clone (the scratch disk's writes)
            (template / "info").mkdir(parents=True, exist_ok=True)
            (template / "info" / "sparse-checkout").write_text(patterns)
            (template / "info" / "attributes").write_text(NO_CONVERSION)
        args += [
            f"--template={template}",
            "--config=core.sparseCheckout=true",
            "--config=core.sparseCheckoutCone=true",
            # --sparse-index: the index holds only the cone, so checkout and commit do not grow with
            # the repository's file count (measured in bench/: 50,000 files, 1.5 s -> 0.3 s).
            "--config=index.sparse=true",
        ]
    else:
        args += ["--no-checkout"]
        if not checkout:
            args += ["--template="]  # no sample hooks, no info/: nothing to copy (or delete) unused
    if branch:
        args += ["--branch", branch]
    try:
        run_git(
            [*args, "--", repo_url, str(dest)],
            auth=auth,
            url=repo_url,
            what=f"clone of {repo_url}" + (f" branch '{branch}'" if branch else ""),
        )
    finally:
        if patterns is not None:
            with timed("git clone"):
                shutil.rmtree(template, ignore_errors=True)
    repo = ClonedRepo(dest, branch or "", auth, url=repo_url, checked_out=checkout)
    if not branch:
        repo.branch = repo.head_branch()
    if patterns is not None or not checkout:
        return repo
    (dest / ".git" / "info").mkdir(parents=True, exist_ok=True)
    (dest / ".git" / "info" / "attributes").write_text(NO_CONVERSION)
    if use_sparse:
        run_git(
            ["sparse-checkout", "set", "--cone", "--sparse-index", "--", *cone],
            dest,
            auth,
            url=repo_url,
            what=f"sparse checkout of {repo_url}",
        )
    repo._checkout()
    return repo


#: ``info/attributes`` of every checked-out clone (it outranks the repository's ``.gitattributes``):
#: no end-of-line conversion, no clean/smudge filter, no ``ident``, no ``working-tree-encoding``.
#: The work tree holds each blob's bytes and ``git commit`` stores the edited bytes as they are: a
#: CRLF file under ``*.yaml text eol=lf`` keeps its other lines (the clean filter rewrote them all),
#: and what is read is what the objects-only path reads from the blob.
NO_CONVERSION = "* -text -eol -filter -ident -working-tree-encoding\n"

#: Branch names :func:`seed` writes as a ref file itself (any other name: a clone, where git checks it).
_PLAIN_BRANCH = re.compile(r"[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*(?:/[A-Za-z0-9_@+-][A-Za-z0-9._@+-]*)*")


def seed(
    repo_url: str,
    dest: Path | str,
    *,
    branch: str,
    commit: str,
    objects: Sequence[bytes],
    path: str,
    text: str,
    blob: str,
    auth: GitAuth | None = None,
) -> ClonedRepo:
    """An objects-only repository of ``branch`` at ``commit`` made without the network, from
    objects another step read: the commit and the trees from its root down to ``path`` (a
    regular file holding ``text``, blob ``blob``). Nothing else of the commit is there; that is
    all :meth:`ClonedRepo.commit` needs to replace ``path`` on it, and all ``git push`` needs to
    send the change (the remote has the rest: git skips the missing trees of the commit a push
    builds on, ``revision.c`` ``mark_tree_contents_uninteresting``). The layout is the one
    ``clone(checkout=False)`` writes: a shallow (``.git/shallow``) single-branch repository whose
    ``origin`` is a promisor remote (``blob:none``), so a later :meth:`ClonedRepo.fetch` works as
    in a clone. The caller pushes with a lease on ``commit`` (:attr:`ClonedRepo.seeded_from`):
    if the remote branch moved on — or is gone — the push is refused, never a stale base landed.

    Raises:
        CarriedObjectsError: ``objects`` are not that chain, ``text`` is not ``blob`` or ``branch``
            is not a plain branch name
            (:func:`steps.git.objects.verify_path_chain`): nothing was written.
    """
    check_url(repo_url)
    parts = branch.split("/")
    if (
        not _PLAIN_BRANCH.fullmatch(branch)
        or ".." in branch
        or branch == "@"
        or any(p.endswith(".lock") for p in parts)
    ):
        raise CarriedObjectsError(f"branch {branch!r} is not a plain branch name: clone it instead")
    mode = verify_path_chain(objects, commit, path, blob)
    fmt = object_format(commit)
    if object_id("blob", text.encode("utf-8"), fmt) != blob:
        raise CarriedObjectsError(f"the text given for {path} is not blob {blob}")
    dest = Path(dest)
    with timed("git seed"):  # the repository's files, the carried objects, the branch, shallow, the remote
        _write_seed(dest / ".git", objects, fmt, branch, commit, repo_url)
    repo = ClonedRepo(dest, branch, auth, url=repo_url, checked_out=False)
    repo.seeded_from = repo.seed_commit = commit
    repo.seeded_chain, repo.seeded_path = list(objects), PurePosixPath(path).as_posix()
    repo.know(text, blob)
    repo.assume_entry(path, mode, blob)
    return repo


def _write_seed(
    gitdir: Path, objects: Sequence[bytes], fmt: str, branch: str, commit: str, repo_url: str
) -> None:
    """:func:`seed`'s writes: the repository ``git init --template= --object-format=FMT
    --initial-branch=BRANCH`` makes (gitrepository-layout(5): ``HEAD``, ``config``, ``objects/``,
    ``refs/``; tests compare), without its process, then the carried objects, the branch, the
    shallow boundary and the promisor remote a ``blob:none`` clone configures."""
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (gitdir / sub).mkdir(parents=True, exist_ok=True)
    (gitdir / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
    kinds = ["commit"] + ["tree"] * (len(objects) - 1)
    write_pack(gitdir, list(zip(kinds, objects, strict=True)), fmt)
    ref = gitdir / "refs" / "heads" / branch
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text(commit + "\n")
    (gitdir / "shallow").write_text(commit + "\n")
    quoted = '"' + repo_url.replace("\\", "\\\\").replace('"', '\\"') + '"'
    # version 1: the extensions below (and a partial clone's promisor remote) need it
    extensions = "[extensions]\n\tobjectformat = sha256\n" if fmt == "sha256" else ""
    config = (
        "[core]\n\trepositoryformatversion = 1\n\tfilemode = true\n\tbare = false\n"
        f"\tlogallrefupdates = true\n{extensions}"
        f'[remote "origin"]\n\turl = {quoted}\n\ttagOpt = --no-tags\n'
        "\tpromisor = true\n\tpartialclonefilter = blob:none\n"
    )
    (gitdir / "config").write_text(config)
