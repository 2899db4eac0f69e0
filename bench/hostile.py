"""Hostile sizes (issue 12): the worst a pushed tag or a rules author can make matching cost, and
what editing a 1 MiB kustomization costs. ``python -m bench.hostile [--quick] [--json FILE]``.

It measures and prints; nothing here asserts on time (the tests prove the engine and the shape of
the work instead: tests/steps/rules/test_rules.py, tests/steps/kustomize/test_kustomize.py).

Rules: each pattern is loaded through :func:`steps.rules.load_rules` (so it is compiled exactly as
in production, by RE2) and :meth:`RuleSet.match` is timed on 128-character tags that almost match
(the issue's near misses) and on one that matches, first match after loading (RE2 builds its DFA
lazily, so the first match is the slow one) and the worst of several. The patterns are the
issue's three polynomial shapes, the classic exponential ones, and the costliest patterns a rule
may hold (just under :data:`steps.rules.MAX_RULE_PROGRAM` RE2 instructions, nested counts built to
defeat the DFA cache). The bar: no rule over 10 ms on any tag of at most 128 characters.

Kustomizations: N entries of ``- name: team/appNNNNN`` / ``newTag: "1.0"`` (27,000 ≈ 0.98 MiB, what
the issue measured at 91 s; 2,700 ≈ 90 KB, 7–12 s then). Timed: reading one entry, editing one in
the middle, adding one at the end, each the best of a few runs; ``imagebump set-image`` editing the
middle entry as a user runs it (a new process: interpreter start and imports included, the file
read and written); and, for scale, one pass of ruamel's round-trip composer (the parser used
before) over the 90 KB file.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

REGISTRY = "123456789012.dkr.ecr.us-west-2.amazonaws.com"

#: (name, rules.yaml text, near-miss tags, a matching tag); every tag is 128 characters.
A127 = "a" * 127


def _rule(extra: str = "", *, tag_pattern: str = "") -> str:
    uri = f"{REGISTRY}/team/$1" + (f":{tag_pattern}" if tag_pattern else "")
    return f"- registryURI: '{uri}'\n  githubRepository: https://github.com/o/r/apps/$1\n{extra}"


def _allow(pattern: str) -> str:
    return _rule(f"  allowImageTag: ['regexp:{pattern}']\n")


PATTERN_CASES: list[tuple[str, str, list[str], str]] = [
    ("issue: regexp:.*.*.*.*.*.*-", _allow(".*.*.*.*.*.*-"), [A127 + "a", "-" * 127 + "a"], A127 + "-"),
    (
        "issue: [a-z]* x7 tag pattern",
        _rule(tag_pattern="[a-z]*" * 7 + "-"),
        [A127 + "0", A127 + "_"],
        A127 + "-",
    ),
    (
        "issue: semver, optional dots",
        _allow("v?" + "[0-9]*\\.?" * 6 + "[0-9]*-?[0-9a-z]*"),
        ["1" * 127 + "_", ("1." * 64)[:127] + "_"],
        "1" * 127 + "a",
    ),
    ("classic: (a+)+$", _allow("(a+)+$"), [A127 + "b"], "a" * 128),
    ("classic: (a|a?)+$", _allow("(a|a?)+$"), [A127 + "b"], "a" * 128),
    ("classic: (.*a){20}$", _allow("(.*a){20}$"), [A127 + "b"], "a" * 128),
    (
        "costliest: ((a{0,6}){0,6}){0,6}-",
        _allow("(?:(?:(?:a{0,6}){0,6}){0,6})-"),
        [A127 + "a", "a" * 128],
        "a" * 127 + "-",
    ),
    ("costliest: (a?){300}a{300}", _allow("(?:a?){300}a{300}"), [A127 + "b", "a" * 128], "a" * 128),
    (
        "costliest: (([a-z0-9]?){15}){15}-",
        _allow("(?:(?:[a-z0-9]?){15}){15}-"),
        [A127 + "a", "a1" * 64],
        A127 + "-",
    ),
    (
        "costliest: 3 allow patterns + tag pattern",
        _rule(
            "  allowImageTag: ['regexp:(?:[a-z]{0,20}){0,5}x', 'regexp:(?:[0-9]{0,20}){0,5}x',"
            " 'regexp:(?:[a-f0-9]?){40}-']\n",
            tag_pattern="(?:[a-z0-9]?){30}.*",
        ),
        [A127 + "b", "a1" * 64],
        A127 + "x",
    ),
]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def run_patterns(reps: int = 5) -> list[dict[str, Any]]:
    """Per pattern: RE2 instructions, first match after load, and the worst match, in ms."""
    from steps.domain.models import Image
    from steps.rules import load_rules

    warm = load_rules(_allow("[0-9a-f]{7,40}"))  # the first match in a process pays one-time costs
    warm.match(Image(account="123456789012", region="us-west-2", repository="team/api", tag="abc1234"))
    results = []
    for name, text, near_misses, matching in PATTERN_CASES:
        tags = [*near_misses, matching]
        assert all(len(tag) == 128 for tag in tags), name
        images = [
            Image(account="123456789012", region="us-west-2", repository="team/api", tag=t) for t in tags
        ]
        first = worst = 0.0
        for _rep in range(reps):
            ruleset = load_rules(text)  # fresh RE2 objects: their lazily built DFA starts empty
            for i, image in enumerate(images):
                started = time.perf_counter()
                ruleset.match(image)
                took = time.perf_counter() - started
                worst = max(worst, took)
                if i == 0:
                    first = max(first, took)
        rule = ruleset.rules[0]
        results.append(
            {
                "pattern": name,
                "re2_instructions": sum(p.programsize for p in rule.patterns()[1:]),
                "engines": sorted({type(p).__module__ for p in rule.patterns()}),
                "first_match_ms": _ms(first),
                "worst_match_ms": _ms(worst),
                "matched": bool(ruleset.match(images[-1]).targets),
            }
        )
    return results


def kustomization(entries: int) -> str:
    """An overlay of ``entries`` images (the shared builder's: what the tests and the demo write)."""
    from imagebump.local import builders

    images = [(f"team/app{i:05d}", "1.0") for i in range(entries)]
    return builders.kustomization(images, resources=("deployment.yaml",))


def _best(fn: Callable[[], Any], reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _cli_best(text: str, name: str, reps: int) -> float:
    """Seconds of ``imagebump set-image DIR NAME:2.0`` in a new process, best of ``reps``."""
    import subprocess
    import tempfile
    from pathlib import Path

    best = float("inf")
    with tempfile.TemporaryDirectory(prefix="hostile-") as directory:
        path = Path(directory) / "kustomization.yaml"
        for _ in range(reps):
            path.write_text(text)
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "imagebump", "set-image", directory, f"{name}:2.0"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            best = min(best, time.perf_counter() - started)
        assert 'newTag: "2.0"' in path.read_text()
    return best


def run_kustomizations(sizes: Sequence[int] = (2_700, 27_000), reps: int = 3, old_parser: bool = True):
    """Per size: bytes, and seconds to read one entry, edit one in the middle, add one at the end."""
    from steps.kustomize import get_image, set_image

    results = []
    for entries in sizes:
        text = kustomization(entries)
        middle = f"team/app{entries // 2:05d}"
        edited = set_image(text, middle, tag="2.0")
        added = set_image(text, "newapp", tag="2.0", add=True)
        assert edited != text and added.endswith('- name: newapp\n  newTag: "2.0"\n')
        row = {
            "entries": entries,
            "bytes": len(text.encode()),
            "read_s": round(_best(lambda t=text, m=middle: get_image(t, m), reps), 3),
            "edit_s": round(_best(lambda t=text, m=middle: set_image(t, m, tag="2.0"), reps), 3),
            "add_s": round(_best(lambda t=text: set_image(t, "newapp", tag="2.0", add=True), reps), 3),
            "cli_edit_s": round(_cli_best(text, middle, reps), 3),
        }
        if old_parser and entries <= 3_000:
            from ruamel.yaml import YAML

            row["ruamel_one_parse_s"] = round(_best(lambda t=text: list(YAML(typ="rt").compose_all(t)), 1), 3)
        results.append(row)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    reps = 1 if args.quick else 5
    patterns = run_patterns(reps)
    print("rules: matching a 128-character tag (RE2; the bar is 10 ms per rule)")
    print(f"  {'pattern':44} {'RE2 instr':>9} {'first ms':>9} {'worst ms':>9}  matched")
    for row in patterns:
        print(
            f"  {row['pattern']:44} {row['re2_instructions']:>9} {row['first_match_ms']:>9.3f} "
            f"{row['worst_match_ms']:>9.3f}  {row['matched']}"
        )
    print(f"  worst of all: {max(r['worst_match_ms'] for r in patterns):.3f} ms")
    sizes = (270, 2_700) if args.quick else (2_700, 27_000)
    edits = run_kustomizations(sizes, reps=1 if args.quick else 3)
    print("kustomization: best of runs, seconds")
    for row in edits:
        old = f"   (ruamel, one parse: {row['ruamel_one_parse_s']} s)" if "ruamel_one_parse_s" in row else ""
        print(
            f"  {row['entries']:>6} entries {row['bytes'] / 1024:>7.0f} KiB  read {row['read_s']:.3f}  "
            f"edit {row['edit_s']:.3f}  add {row['add_s']:.3f}  "
            f"`imagebump set-image` {row['cli_edit_s']:.3f}{old}"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"patterns": patterns, "kustomizations": edits}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
