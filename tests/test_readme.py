"""README.md and docs/ are executed: their shell blocks run as written, so they cannot drift from the code.

* Every ``sh`` block of "Try the pieces", "Run without a cluster" (``docs/local.md``) and "Nothing
  lost" (``docs/operations.md``) runs in ``bash``, command by command, exactly as a user would paste it. A command must exit 0 unless its line ends with a
  comment ``# exits N`` (then it must exit N: ``git diff --no-index`` exits 1 when files differ).
* Every other shell block, in README.md and every page of ``docs/``, carries a visible marker
  saying why it does not run here,
  ``<!-- readme-test: skip: REASON -->`` right before it, or ``<!-- readme-test: skip section:
  REASON -->`` under its heading (the cluster install). A new block with neither fails this test.
* The environment is what the docs tell a user to have and nothing more: ``imagebump`` on PATH
  (the interpreter's own bin directory, as ``. .venv/bin/activate`` gives), HOME, LANG, a private
  TMPDIR; for "Run without a cluster" also AWS credentials and ``AWS_ENDPOINT_URL`` (boto3's own
  variable, which the docs name for running without an AWS account), and the Git token typed
  on stdin. No ``IMAGEBUMP_*`` variable is set.

The world "Run without a cluster" runs against is real: moto's server in a process of its own (the
docs name fixed resources: queue ``imagebump-ecr-events``, ECR ``team/api`` of account
123456789012) with the project's CloudFormation stack, and a ``git http-backend`` remote that
wants the token for reads and writes. The event is ``examples/push-event.json``, the one the
docs' ``explain`` and ``jq`` examples use.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from imagebump.local import builders
from tests.fixtures.aws import isolated_moto

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Every document whose shell blocks must run or say why not: README.md and the site's pages.
DOCUMENTS = (README, *sorted((ROOT / "docs").glob("*.md")))
RUN_SECTIONS = ("Try the pieces", "Run without a cluster", "Nothing lost")
SHELL_LANGUAGES = {"sh", "bash", "shell", "console"}
SKIP = re.compile(r"<!--\s*readme-test:\s*skip(?P<section>\s+section)?:\s*(?P<reason>\S.*?)\s*-->")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
FENCE = re.compile(r"^(\s*)```\s*([\w-]*)")
EXITS = re.compile(r"\s#\s*exits\s+(\d+)\b[^'\"]*$")
EVENT = json.loads((ROOT / "examples" / "push-event.json").read_text())


@dataclass
class Block:
    section: str
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    skip: str | None
    path: str = "README.md"  # the document, relative to the checkout


@dataclass
class Command:
    text: str
    expect: int
    line: int


def readme_blocks(text: str, path: str = "README.md") -> list[Block]:
    """Every fenced block of one document with its section and the skip marker that applies to it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    section, level, section_skip, skip_level = "", 0, None, 0
    previous = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if heading := HEADING.match(line):
            level = len(heading.group(1))
            section = heading.group(2)
            if section_skip and level <= skip_level:
                section_skip = None
        elif (marker := SKIP.search(line)) and marker.group("section"):
            section_skip, skip_level = marker.group("reason"), level
        elif fence := FENCE.match(line):
            indent, language = fence.groups()
            body: list[str] = []
            i += 1
            while not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            own = SKIP.search(previous)
            blocks.append(
                Block(
                    section,
                    i - len(body),
                    language,
                    textwrap.dedent("\n".join(body)),
                    own.group("reason") if own and not own.group("section") else section_skip,
                    path,
                )
            )
        if line.strip():
            previous = line
        i += 1
    return blocks


def shell_blocks(section: str | None = None) -> list[Block]:
    """The shell blocks of README.md and docs/ (of one section, when given), in document order."""
    blocks = [
        b
        for doc in DOCUMENTS
        for b in readme_blocks(doc.read_text(), str(doc.relative_to(ROOT)))
        if b.language in SHELL_LANGUAGES
    ]
    return [b for b in blocks if section is None or b.section == section]


def commands(block: Block) -> list[Command]:
    """The block's commands: continuation lines and multi-line quotes joined, comment lines dropped."""
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    for offset, raw in enumerate(block.text.splitlines()):
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if not pending:
            start = offset
        pending.append(raw)
        joined = "\n".join(pending)
        if raw.rstrip().endswith("\\"):
            continue
        try:
            shlex.split(joined, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        expect = EXITS.search(raw)
        found.append(Command(joined, int(expect.group(1)) if expect else 0, block.line + 1 + start))
        pending = []
    assert not pending, f"{block.path} line {block.line}: unterminated command {pending!r}"
    return found


def script(block: Block) -> str:
    """The block as a bash script that stops at the first command exiting otherwise than documented."""
    parts = []
    for command in commands(block):
        first = command.text.splitlines()[0][:80].replace("'", "")
        parts += [
            command.text,
            f'__rc=$?; if [ "$__rc" -ne {command.expect} ]; then '
            f"echo '{block.path} line {command.line}: exited '\"$__rc\"', expected {command.expect}: "
            f"{first}' >&2; exit 97; fi",
        ]
    return "\n".join(parts) + "\n"


def user_environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """What the docs tell a user to have: imagebump on PATH, and nothing of ours besides."""
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "imagebump").is_file():
        pytest.fail(
            f"no imagebump next to {sys.executable}: install the project (pip install -e '.[test]', "
            "as ./dev test does) before running tests/test_readme.py"
        )
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    return {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(tmp),
        **extra,
    }


def bash(block: Block, tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / f"{name}.sh"
    path.write_text(script(block))
    return ["bash", "--noprofile", "--norc", str(path)]


# --- the documents' own shape ------------------------------------------------------------------


def test_every_shell_block_is_run_or_visibly_excluded() -> None:
    blocks = shell_blocks()
    for section in RUN_SECTIONS:
        assert [b for b in blocks if b.section == section], f"no document has a shell block under {section!r}"
    assert {b.path for b in blocks} > {"README.md"}, "the docs' shell blocks are checked too"
    for block in blocks:
        if block.section in RUN_SECTIONS:
            assert block.skip is None, (
                f"{block.path} line {block.line}: a block of {block.section!r} is skipped"
            )
        else:
            assert block.skip, (
                f"{block.path} line {block.line} ({block.section!r}): a shell block that "
                "tests/test_readme.py neither runs nor excludes with "
                "<!-- readme-test: skip: REASON -->"
            )


def test_the_block_parser_joins_continuations_and_reads_exit_markers() -> None:
    block = Block(
        "x", 10, "sh", "# a comment\nfoo \\\n  --bar\njq 'a\n  | b' f   # exits 3: why\n\nbaz", None
    )
    assert [(c.text, c.expect, c.line) for c in commands(block)] == [
        ("foo \\\n  --bar", 0, 12),
        ("jq 'a\n  | b' f   # exits 3: why", 3, 14),
        ("baz", 0, 17),
    ]


def test_no_block_uses_a_fixed_temporary_path() -> None:
    for block in shell_blocks():
        assert not re.search(r"(?<![\w$])/tmp/", block.text), f"{block.path} line {block.line}: use mktemp -d"


# --- "Try the pieces" ------------------------------------------------------------------------------


def _dirty() -> set[str]:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.splitlines())


def test_try_the_pieces_runs_as_written(tmp_path: Path) -> None:
    before = _dirty()
    (block,) = shell_blocks("Try the pieces")
    proc = subprocess.run(
        bash(block, tmp_path, "pieces"),
        cwd=ROOT,
        env=user_environment(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert proc.returncode == 0, proc.stderr
    # explain printed its JSON, set-image changed exactly the one line that had to change
    assert '"targets"' in proc.stdout
    diff = [
        line for line in proc.stdout.splitlines() if line.startswith(("+ ", "- ", "+\t", "-\t", "+  ", "-  "))
    ]
    assert diff == ['-  newTag: "1.4.1"  # set by imagebump', '+  newTag: "1.4.2"  # set by imagebump'], (
        proc.stdout
    )
    assert _dirty() == before  # the checkout's examples are untouched: the copy was edited


# --- "Run without a cluster" ---------------------------------------------------------------------


@dataclass
class LocalWorld:
    moto: object
    git: object
    queue_url: str
    dlq_url: str
    token: str


def _world(tmp_path: Path, moto, stack) -> LocalWorld:
    """What the docs assume exists: the stack's queue, an ECR image, a GitOps repository."""
    from imagebump.local.demo_repo import MANIFESTS_REPO, default_rules, manifests_files
    from imagebump.local.git_server import GitHttpServer
    from imagebump.local.stack import deploy_stack
    from tests.secret_scan import register

    detail = EVENT["detail"]
    registry = f"{EVENT['account']}.dkr.ecr.{EVENT['region']}.amazonaws.com"
    ecr = moto.client("ecr")
    ecr.create_repository(repositoryName=detail["repository-name"])
    _put_image(ecr, detail["repository-name"], detail["image-tag"], detail["image-digest"])
    _, outputs = deploy_stack(moto, "imagebump")  # the docs' queue: imagebump-ecr-events

    token = register("ibreadme_" + secrets.token_hex(20))
    git = stack.enter_context(GitHttpServer(tmp_path / "remotes", token))  # wants the token to read, too
    git.create_repo(MANIFESTS_REPO, manifests_files(f"{registry}/{detail['repository-name']}"))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "rules.yaml").write_text(
        default_rules(git.base_url, registry, repository=detail["repository-name"])
    )
    return LocalWorld(moto, git, outputs["QueueUrl"], outputs["DeadLetterQueueUrl"], token)


def _put_image(ecr, repository: str, tag: str, digest: str) -> None:
    """An image in moto's ECR (moto needs the digest given: it computes its own oddly)."""
    manifest = builders.image_manifest(digest)
    ecr.put_image(repositoryName=repository, imageManifest=manifest, imageTag=tag, imageDigest=digest)


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _depth(sqs, url: str) -> int:
    attrs = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return sum(int(v) for v in attrs.values())


@pytest.mark.slow
def test_run_without_a_cluster_runs_as_written(tmp_path: Path) -> None:
    from contextlib import ExitStack

    run_block, jq_block = shell_blocks("Run without a cluster")
    with ExitStack() as stack:
        moto = stack.enter_context(isolated_moto(region=EVENT["region"]))
        world = _world(tmp_path, moto, stack)
        work = tmp_path / "work"
        env = user_environment(
            tmp_path,
            AWS_ENDPOINT_URL=moto.endpoint_url,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
        )
        sqs = moto.client("sqs")
        sqs.send_message(QueueUrl=world.queue_url, MessageBody=json.dumps(EVENT))  # what EventBridge delivers

        proc = subprocess.Popen(
            bash(run_block, tmp_path, "run"),
            cwd=work,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stdout: list[str] = []
        progressed = threading.Event()

        def read() -> None:
            for line in proc.stdout:  # type: ignore[union-attr]
                stdout.append(line)
                if line.startswith(f"event {EVENT['id'][:8]}"):
                    progressed.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.stdin.write(world.token + "\n")  # typed at the prompt  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
            assert progressed.wait(180), f"no progress line; stdout={stdout} log={_log(work)[-3000:]}"
            (imagebump,) = [
                pid
                for pid in _children(proc.pid)
                if b"imagebump" in Path(f"/proc/{pid}/cmdline").read_bytes()
            ]
            os.kill(imagebump, signal.SIGTERM)  # "SIGTERM stops taking messages ... and exits 0"
            returncode = proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        reader.join(10)
        stderr = proc.stderr.read()  # type: ignore[union-attr]

        assert returncode == 0, stderr + _log(work)[-3000:]
        out = "".join(stdout)
        progress = [line for line in stdout if line.startswith("event ")]
        assert len(progress) == 1 and "→ 2 targets: staging committed " in progress[0], out
        assert ", production pr-created " in progress[0], out
        assert out.splitlines()[-1].startswith("stopped: 1 received, 1 succeeded, 0 failed")
        staging = world.git.git("demo/manifests", "show", "main:apps/api/overlays/staging/kustomization.yaml")
        assert 'newTag: "1.4.2"' in staging
        assert _depth(sqs, world.queue_url) == 0 and _depth(sqs, world.dlq_url) == 0
        log = _log(work)
        for text in (out, stderr, log):
            assert world.token not in text

        jq = subprocess.run(
            bash(jq_block, tmp_path, "jq"),
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

        assert jq.returncode == 0, jq.stderr
        records = [json.loads(line) for line in jq.stdout.splitlines()]
        assert {r["component"] for r in records} == {"sensor", "executor", "step"}
        assert any(
            r["component"] == "step"
            and r["step"] == "commit-pr"
            and (r["message"] or "").startswith("committed ")
            for r in records
        ), records
        assert all(set(r) == {"ts", "level", "component", "step", "event", "message"} for r in records)

        # "Nothing lost": a push whose event never came (no message sent), then the docs' sweep
        moto.advance_push_clock()  # ECR push times have whole seconds: the new image is strictly newer
        _put_image(moto.client("ecr"), EVENT["detail"]["repository-name"], "1.4.3", "sha256:" + "d" * 64)
        (sweep_block,) = shell_blocks("Nothing lost")
        sweep = subprocess.run(
            bash(sweep_block, tmp_path, "sweep"),
            cwd=work,
            env=env,
            input=world.token + "\n",  # typed at the prompt
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

        assert sweep.returncode == 0, sweep.stderr[-3000:]
        reports, rest, decoder = [], sweep.stdout.strip(), json.JSONDecoder()
        while rest:  # one JSON document per command on stdout
            report, end = decoder.raw_decode(rest)
            reports.append(report)
            rest = rest[end:].strip()
        assert len(reports) == 2, sweep.stdout
        dry, applied = reports
        assert {(t["env"], t["state"], t["newest"].split("@")[0]) for t in dry["targets"]} == {
            ("staging", "behind", "1.4.3"),
            ("production", "behind", "1.4.3"),  # writeDigest: the digest too
        }, dry
        assert dry["submitted"] == 0 and applied["submitted"] == 2, (dry, applied)
        staging = world.git.git("demo/manifests", "show", "main:apps/api/overlays/staging/kustomization.yaml")
        assert 'newTag: "1.4.3"' in staging
        assert world.token not in sweep.stdout + sweep.stderr


def _log(work: Path) -> str:
    path = work / "imagebump.log"
    return path.read_text() if path.exists() else ""


def test_reliability_points_at_tests_that_exist() -> None:
    """RELIABILITY.md names the test behind each promise: every path and test it names exists."""
    text = (ROOT / "RELIABILITY.md").read_text()
    assert re.search(r"^### 1\. .*what holds on each runtime", text, re.MULTILINE)
    referenced = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?", text)
    assert referenced
    for path, name in referenced:
        source = ROOT / path
        assert source.is_file(), f"RELIABILITY.md names {path}, which does not exist"
        if name:
            assert re.search(rf"^def {name}\(", source.read_text(), re.MULTILINE), (
                f"{path}::{name} does not exist"
            )
    section = text[text.index("### 1.") : text.index("### 2.")]
    for name in re.findall(r"`(test_\w+)`", section):  # names given after a path in the same bullet
        assert any(
            re.search(rf"^def {name}\(", p.read_text(), re.MULTILINE)
            for p in (ROOT / "tests").rglob("test_*.py")
        ), f"RELIABILITY.md names {name}, which does not exist"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param("true\nfalse\necho never", 97, id="a-command-that-fails-stops-the-block"),
        pytest.param("false   # exits 1: documented", 0, id="a-documented-exit-code-passes"),
        pytest.param("true   # exits 1: documented but wrong", 97, id="an-undocumented-success-fails"),
    ],
)
def test_a_broken_command_fails_the_block(tmp_path: Path, text: str, code: int) -> None:
    block = Block("x", 1, "sh", text, None)
    proc = subprocess.run(
        bash(block, tmp_path, "broken"), capture_output=True, text=True, timeout=30, check=False
    )
    assert proc.returncode == code, proc.stderr
    assert "never" not in proc.stdout
    if code:
        assert "README.md line " in proc.stderr and "exited" in proc.stderr  # the block's document
