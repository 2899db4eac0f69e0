"""The documentation: the site builds with --strict, README stays short, its links and its example hold.

* The site (``mkdocs.yml``, ``docs/``) is built exactly as ``./dev docs`` builds it, ``mkdocs build
  --strict``: a missing page, a broken link or a missing anchor fails it (``validation`` in
  ``mkdocs.yml``), and a copy with one broken anchor shows the check can fail.
* README.md is not part of the site, so its links into ``docs/`` are checked against the built
  pages: the file exists and, for ``#anchor``, the page has that id.
* The exit-code table of ``docs/operations.md`` is generated from the code
  (:mod:`imagebump.exit_codes`) and checked for drift, as ``manifests/`` are.
* The rules example README shows does what the sentence before it says, through ``imagebump explain``.

The shell blocks of README.md and ``docs/`` run in tests/test_readme.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from imagebump import docs_gen, exit_codes
from imagebump.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: README's budget (issue 25): what it is and why, the peers, the two commands, the picture, one
#: rules example, install in short, links; everything else lives in docs/.
README_MAX_LINES = 250
LINK = re.compile(r"\]\((?!https?://|mailto:)([^)\s#]*)(?:#([^)\s]+))?\)")


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.is_file():
        pytest.fail(f"no mkdocs next to {sys.executable}: install the project's test extra (./dev test does)")
    return subprocess.run(
        [str(mkdocs), "build", "--strict", "--clean", "--config-file", str(config), "--site-dir", str(site)],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # Material's banner about its successor
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = _mkdocs(ROOT / "mkdocs.yml", out)
    assert built.returncode == 0, built.stderr[-4000:]
    return out


def _page(site: Path, doc: str) -> Path:
    """The built HTML of docs/<doc> (``use_directory_urls``: rules.md → rules/index.html)."""
    stem = doc.removesuffix(".md")
    return site / ("index.html" if stem == "index" else f"{stem}/index.html")


def test_the_site_builds_strictly_with_every_page_in_the_nav(site: Path) -> None:
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    for name in pages:
        assert _page(site, name).is_file(), f"docs/{name} was not built"


def test_a_broken_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    rules = copy / "docs" / "rules.md"
    rules.write_text(rules.read_text() + "\nSee [nowhere](operations.md#no-such-heading).\n")
    built = _mkdocs(copy / "mkdocs.yml", tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-heading" in built.stderr


def test_readme_stays_within_its_budget() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


def test_readme_links_reach_existing_pages_and_anchors(site: Path) -> None:
    links = LINK.findall(README.read_text())
    assert any(target.startswith("docs/") for target, _ in links)
    for target, anchor in links:
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
        if target.startswith("docs/") and anchor:
            html = _page(site, target.removeprefix("docs/")).read_text()
            assert f'id="{anchor}"' in html, f"README links to {target}#{anchor}: no such heading"


def test_the_exit_code_table_is_generated_from_the_code() -> None:
    document = exit_codes.DOCUMENT.read_text()
    assert exit_codes.splice(document) == document, (
        "docs/operations.md's exit-code table is stale: run `python -m imagebump.exit_codes`"
    )


def test_every_command_has_a_row_with_codes_that_have_a_meaning() -> None:
    assert set(exit_codes.COMMANDS) == set(COMMANDS)
    for shown, codes, no in exit_codes.COMMANDS.values():
        assert set(codes) <= set(exit_codes.MEANINGS), shown
        # a command whose "no" is documented can return 1, and only such a command
        assert (1 in codes) == (not no.startswith("—")), shown


def test_the_exit_code_check_reports_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "operations.md"
    stale.write_text(exit_codes.DOCUMENT.read_text().replace("| 75 |", "| 76 |", 1))
    monkeypatch.setattr(exit_codes, "DOCUMENT", stale)
    assert exit_codes.main(["--check"]) == 1
    assert exit_codes.main([]) == 0 and exit_codes.main(["--check"]) == 0
    assert "| 75 |" in stale.read_text()


def _readme_rules(tmp_path: Path) -> Path:
    blocks = re.findall(r"^```yaml\n(.*?)^```", README.read_text(), flags=re.DOTALL | re.MULTILINE)
    (rules,) = [b for b in blocks if b.startswith("- githubRepository:")]
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    return path


@pytest.mark.parametrize(
    ("tag", "routed"),
    [
        pytest.param("5d1c2a0", True, id="a-commit-hash-goes-to-staging"),
        pytest.param("latest", False, id="latest-is-denied"),
        pytest.param("1.4.2", False, id="a-release-tag-is-not-a-commit-hash"),
    ],
)
def test_the_readme_rules_example_does_what_it_says(tmp_path: Path, tag: str, routed: bool) -> None:
    """ "every image of team/api whose tag is a commit hash goes to the staging overlay, as a commit"."""
    explained = subprocess.run(
        [
            str(Path(sys.executable).parent / "imagebump"),
            "explain",
            "--rules",
            str(_readme_rules(tmp_path)),
            f"123456789012.dkr.ecr.us-west-2.amazonaws.com/team/api:{tag}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert explained.returncode == 0, explained.stderr
    targets = json.loads(explained.stdout)["targets"]
    if routed:
        (target,) = targets
        assert (target["path"], target["env"], target["mode"]) == (
            "apps/api/overlays/staging",
            "staging",
            "commit",
        )
        assert target["repo_url"] == "https://github.com/example-org/gitops"
    else:
        assert targets == []


# --- the generated pages (./dev docs-gen) --------------------------------------------------------


def test_the_generated_pages_are_current() -> None:
    """Every page ``./dev docs-gen`` writes is what the code makes today, as manifests/ are."""
    stale = [str(p.relative_to(ROOT)) for p in docs_gen.stale()]
    assert stale == [], f"run ./dev docs-gen: {stale}"


def test_the_drift_check_reports_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "settings.md"
    page.write_text(docs_gen.settings_page().replace("IMAGEBUMP_PUSH_ATTEMPTS", "IMAGEBUMP_PUSH_TRIES"))
    monkeypatch.setattr(
        docs_gen, "outputs", lambda: {page: lambda _current: docs_gen.settings_page().encode()}
    )
    assert list(docs_gen.stale()) == [page]
    assert docs_gen.main(["--check"]) == 1 and "IMAGEBUMP_PUSH_TRIES" in page.read_text()
    assert docs_gen.main([]) == 0 and docs_gen.main(["--check"]) == 0


def test_every_setting_the_code_names_is_in_the_registry() -> None:
    """The registry is the one list: a setting read anywhere in the code is on the settings page."""
    named = docs_gen.settings_in_code()
    assert "IMAGEBUMP_PUSH_ATTEMPTS" in named and "IMAGEBUMP_LIVE_POLL_SECONDS" in named
    assert docs_gen.unregistered_settings() == {}
    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert all(f"`{name}`" in page for name in named)


def test_a_setting_read_outside_the_registry_fails_the_generator(tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "new.py").write_text('import os\nos.environ.get("IMAGEBUMP_SHINY_NEW")\n')
    assert docs_gen.settings_in_code(tmp_path, ["steps"]) == {"IMAGEBUMP_SHINY_NEW": ["steps/new.py"]}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(docs_gen, "ROOT", tmp_path)
        patch.setattr(docs_gen, "CODE_PACKAGES", ("steps",))
        with pytest.raises(ValueError, match="IMAGEBUMP_SHINY_NEW"):
            docs_gen.stale()
        assert docs_gen.main(["--check"]) == 2


def test_every_documented_setting_exists() -> None:
    """Docs and README name only settings the registry knows (a renamed one cannot linger)."""
    from steps.domain.settings_registry import NAMES

    texts = [README, ROOT / "RELIABILITY.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {m for path in texts for m in docs_gen.SETTING_NAME.findall(path.read_text())}
    assert sorted(named - NAMES) == []


def test_the_rules_reference_has_every_key_of_the_schema() -> None:
    from steps.rules.schema import FIELDS

    page = (ROOT / "docs" / "reference" / "rules.md").read_text()
    keys = [f.key for f in FIELDS]
    assert all(f"| `{key}` |" in page for key in keys)
    assert set(docs_gen.RULE_FIELDS) == set(keys)
    # each key's type is a word a user reads (string, list of string, mapping…), never Python's repr
    types = {
        row.split("|")[1].strip(): row.split("|")[2].strip()
        for row in page.splitlines()
        if row.startswith("| `")
    }
    assert not [(k, t) for k, t in types.items() if any(c in t for c in "[]<>()=")], types


def test_the_cli_reference_has_every_command_and_flag() -> None:
    import argparse

    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        assert f"## imagebump {name}\n" in page
        for action in sub._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help") and action.help != argparse.SUPPRESS:
                    assert f"`{flag}" in page or f", {flag}" in page, (name, flag)


def test_development_draws_the_import_graph_from_the_layering_test() -> None:
    from tests.test_layering import MAY_IMPORT

    text = (ROOT / "docs" / "development.md").read_text()
    graph = text.split(docs_gen.GRAPH_BEGIN, 1)[1].split(docs_gen.GRAPH_END, 1)[0]
    drawn = {line.split()[0] for line in graph.splitlines() if line and not line.startswith("```")}
    assert drawn == {p.removeprefix("steps.") for p in MAY_IMPORT}


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def test_the_home_page_table_links_every_page_of_the_nav() -> None:
    """docs/index.md's "Where to read on" is the site's map: a page in the nav missing from it drifted."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml names Python objects (``!!python/name:``); the nav needs none of them
    _Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)["nav"]
    table = (ROOT / "docs" / "index.md").read_text().split("## Where to read on", 1)[1].split("\n## ", 1)[0]
    linked = {target for target, _anchor in LINK.findall(table)}
    assert set(_nav_pages(nav)) - {"index.md"} - linked == set()


def test_the_docs_state_the_cap_of_the_live_states_a_sweep_reads() -> None:
    """The sweep reads the live state of at most REPORT_LIMIT current targets a run: the README and
    the push → live page say so with the code's number, never "every current target"."""
    from steps.reconcile.step import REPORT_LIMIT

    for path in (README, ROOT / "docs" / "push-to-live.md"):
        text = " ".join(path.read_text().split())
        assert f"up to {REPORT_LIMIT}" in text, path.name
        assert "every current target" not in text, path.name


def test_every_test_file_the_docs_and_the_bench_name_exists() -> None:
    """A page, a docstring or bench/ that sends a reader to `tests/….py` sends them to a real file
    (the tests moved into a tree mirroring steps/; three references were left pointing at old paths)."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.md", "*.py", "*.yaml"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    missing = {
        f"{name}: {path}"
        for name in tracked
        for path in re.findall(r"\btests/[A-Za-z0-9_/]+\.py\b", (ROOT / name).read_text(errors="replace"))
        if not (ROOT / path).exists()
    }
    assert not missing, sorted(missing)


def test_the_commit_message_fields_are_documented_each_once() -> None:
    """docs/concepts.md's table of template fields lists exactly the fields the template accepts."""
    from steps.commit_pr.message import TEMPLATE_FIELDS

    text = (ROOT / "docs" / "concepts.md").read_text()
    section = text.split("### Commit messages", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \|", section, re.M)
    assert sorted(rows) == sorted(TEMPLATE_FIELDS) and len(rows) == len(set(rows))
