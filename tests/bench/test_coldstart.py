"""bench.coldstart measures what the templates render: its cases are the rendered steps, its inputs
validate, and its probe stops each step's process at the first line of the step through both
runners (no timing is asserted: the benchmark prints numbers)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench import coldstart, coldstart_cases


def test_the_cases_are_the_rendered_step_templates_with_the_entry_as_command():
    for case in coldstart_cases.CASES:
        tpl = coldstart_cases.template(case.manifest, case.template)
        args = tpl["script"]["args"]
        assert args[:2] == ["-m", "steps.runtime.launcher"], case.name
        inputs = coldstart_cases.inputs_file(tpl, case.values)
        declared = [p["name"] for p in tpl["inputs"]["parameters"]]
        assert [i["name"] for i in inputs] == declared


def test_the_probe_reaches_the_first_line_through_both_runners():
    case = next(c for c in coldstart_cases.CASES if c.name == "commit-pr (commit)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        probes = coldstart.write_probes(root)
        for runner in coldstart.RUNNERS:
            assert coldstart.first_line(case, runner, probes, root) > 0
        evidence = coldstart.importtime(case, "entry", probes, root)
    assert evidence["modules"] > 0 and not evidence["hera_workflows"] and not evidence["githubkit"]
    assert json.dumps(evidence)  # what results.json stores
