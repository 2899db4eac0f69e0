"""What reading an entry's history costs (issue 23): ``python -m bench.history [--commits N ...]``.

edit-kustomize (for a target that would change) and reconcile (for a target behind) read the last
commit that changed the entry's image (:func:`steps.entry_history.last_image_change`) from the
partial, depth-1 clone they already made. This times that read alone, against the project's own
``git http-backend`` server on loopback, for a branch of N commits in three shapes:

- ``rollback-at-tip``: the newest commit is a person's revert (found in the first fetch);
- ``file-busy``: every commit touches the kustomization, none changes the image (20 read, stop);
- ``file-quiet``: the kustomization was last touched N commits ago (the bound's worst case: the
  history is fetched in steps up to :data:`steps.entry_history.MAX_DEPTH` commits).

Prints the median wall time of a few runs and the requests made. Small and short on purpose.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

FILE = "apps/api/overlays/prod/kustomization.yaml"
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api"
TOKEN = "bench-history-token"


def _text(tag: str, note: int = 0) -> str:
    return f"# note {note}\nresources:\n- ../../base\nimages:\n- name: {IMAGE}\n  newTag: {tag}\n"


def _fast_import(bare: Path, commits: list[tuple[str, dict[str, str]]]) -> None:
    """Write ``commits`` (message, files) on main of the bare repository in one ``git fast-import``."""
    out = []
    for i, (message, files) in enumerate(commits):
        data = message.encode()
        out.append(b"commit refs/heads/main\n")
        out.append(f"committer Bench <b@x> {1_700_000_000 + i} +0000\n".encode())
        out.append(f"data {len(data)}\n".encode() + data + b"\n")
        for path, text in files.items():
            body = text.encode()
            out.append(f"M 100644 inline {path}\ndata {len(body)}\n".encode() + body + b"\n")
    subprocess.run(["git", "-C", str(bare), "fast-import", "--quiet"], input=b"".join(out), check=True)


def _shape(shape: str, n: int) -> list[tuple[str, dict[str, str]]]:
    from steps.domain.intent import trailer

    commits = [("initial", {FILE: _text("1.4.1"), "README.md": "0\n"})]
    if shape == "rollback-at-tip":
        commits += [(f"other {i}", {"README.md": f"{i}\n"}) for i in range(n - 3)]
        commits += [(f"imagebump\n\n{trailer(IMAGE, '1.5.0', None)}", {FILE: _text("1.5.0")})]
        commits += [('Revert "imagebump"', {FILE: _text("1.4.1")})]
    elif shape == "file-busy":
        commits += [(f"note {i}", {FILE: _text("1.4.1", i + 1)}) for i in range(n - 1)]
    else:
        commits += [(f"other {i}", {"README.md": f"{i}\n"}) for i in range(n - 1)]
    return commits


def measure(shape: str, n: int, runs: int) -> tuple[float, int]:
    from imagebump.local.git_server import GitHttpServer
    from steps.entry_history import last_image_change
    from steps.git import GitAuth, clone

    times, requests = [], 0
    with (
        tempfile.TemporaryDirectory(prefix="bench-history-") as tmp,
        GitHttpServer(Path(tmp) / "srv", TOKEN) as srv,
    ):
        url = srv.create_repo("bench/gitops", {"README.md": "x\n"})
        bare = srv.bare_path("bench/gitops")
        subprocess.run(["git", "-C", str(bare), "update-ref", "-d", "refs/heads/main"], check=True)
        _fast_import(bare, _shape(shape, n))
        for run in range(runs):
            repo = clone(url, Path(tmp) / f"c{run}", paths=["apps/api/overlays/prod"], auth=GitAuth(TOKEN))
            calls: list[int] = []
            started = time.perf_counter()
            last_image_change(repo, repo.head(), FILE, IMAGE, count=lambda calls=calls: calls.append(1))
            times.append(time.perf_counter() - started)
            requests = len(calls)
    return statistics.median(times), requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, nargs="+", default=[100, 2000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"{'shape':<16} {'commits':>7} {'median s':>9} {'requests':>8}")
    for n in args.commits:
        for shape in ("rollback-at-tip", "file-busy", "file-quiet"):
            seconds, requests = measure(shape, n, args.runs)
            print(f"{shape:<16} {n:>7} {seconds:>9.3f} {requests:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
