"""Issue 34 through the steps' seams: rules naming values files and helmfile releases, the edit
step's pure core deciding on a values file as on a kustomization (never a downgrade, holds, pins),
commit-pr re-applying, and a helmfile release's values resolved."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from steps.commit_pr import decide as commit_pr
from steps.domain.errors import ImageNotFoundError, RulesError
from steps.domain.models import Image, Target
from steps.edit_kustomize import decide as edit_kustomize
from steps.kustomize import read_entry, write_entry
from steps.kustomize.values import ValuesError
from steps.kustomize.values.helmfile import locate_image, release_sources
from steps.rules import load_rules
from tests.steps.kustomize.go_yaml_v2 import helm_reads_as_text

ZOO = Path(__file__).resolve().parents[2] / "testdata" / "values"
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
IMAGE = f"{ECR}/team/api"
VALUES = f"# the api chart\nimage:\n  registry: {ECR}\n  repository: team/api\n  tag: 1.4.2  # bumped by imagebump\n"


def target(tag: str = "1.4.3", **more) -> Target:
    fields = {
        "rule": 0,
        "repo_url": "https://github.com/o/r",
        "path": "charts/api",
        "image": IMAGE,
        "tag": tag,
        "order": "semver",
        "values_file": "charts/api/values.yaml",
    } | more
    return Target(**fields)


def plan(text: str, t: Target | None = None):
    t = t or target()
    return edit_kustomize.decide(
        t, text, "charts/api/values.yaml", "a" * 40, "main", {}, values=t.values_ref()
    )


# --- rules --------------------------------------------------------------------------------------------


def push(repository: str = "team/api", tag: str = "1.4.3") -> Image:
    return Image(account="123456789012", region="us-east-1", repository=repository, tag=tag)


@pytest.mark.parametrize(
    ("values_file", "path", "file"),
    [
        ("values.yaml", "charts/api", "charts/api/values.yaml"),
        ("env/$1.yaml", "charts/api/env", "charts/api/env/api.yaml"),
        ("/deploy/$1/values-prod.yaml", "deploy/api", "deploy/api/values-prod.yaml"),
        ("../shared/values.yaml", "charts/shared", "charts/shared/values.yaml"),
    ],
)
def test_values_file_is_relative_to_the_rules_path_and_leading_slash_is_the_root(
    values_file, path, file
) -> None:
    rules = load_rules(
        f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/o/r/charts/$1\n"
        f"  valuesFile: {values_file}\n"
    )
    (rule,) = rules.rules
    got = rule.evaluate(push())
    assert isinstance(got, Target)
    assert (got.values_file, got.path) == (file, path)
    assert got.edits_values and got.helmfile is None


def test_values_file_that_leaves_the_repository_yields_no_target() -> None:
    (rule,) = load_rules(
        f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/o/r/a\n  valuesFile: ../../x.yaml\n"
    ).rules
    assert isinstance(rule.evaluate(push()), str)


def test_helmfile_rule_yields_a_release_target() -> None:
    (rule,) = load_rules(
        f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/o/r\n"
        "  helmfile: {file: /deploy/helmfile.yaml, release: $1, environment: prod}\n"
        "  valuesKeys: {repository: image.repository, tag: image.tag}\n"
    ).rules
    got = rule.evaluate(push())
    assert got.helmfile.model_dump() == {
        "file": "deploy/helmfile.yaml",
        "release": "api",
        "environment": "prod",
    }
    assert got.values_keys == {"repository": "image.repository", "tag": "image.tag"}
    assert got.path == "deploy"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("  valuesFile: a.yaml\n  helmfile: {file: h.yaml, release: r}\n", "valuesFile"),
        ("  valuesKeys: {repository: a, tag: b}\n", "valuesKeys"),
        ("  valuesFile: a.yaml\n  valuesKeys: {repository: a}\n", "valuesKeys"),
        ("  valuesFile: a.yaml\n  valuesKeys: {repository: a, tag: b, colour: c}\n", "valuesKeys"),
        ("  helmfile: {file: h.yaml}\n", "helmfile[release]"),
        ("  valuesFile: $3/a.yaml\n", "valuesFile"),
    ],
)
def test_bad_values_rules_name_the_field(extra: str, field: str) -> None:
    with pytest.raises(RulesError) as caught:
        load_rules(f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/o/r\n{extra}")
    assert (caught.value.rule, caught.value.field) == (0, field)


def test_the_seeds_rule_format_keeps_working() -> None:
    (rule,) = load_rules(
        f"- registryURI: {ECR}/team/$1\n  githubRepository: https://github.com/o/r/apps/$1\n"
    ).rules
    got = rule.evaluate(push())
    assert (got.path, got.values_file, got.helmfile, got.edits_values) == ("apps/api", None, None, False)


# --- the edit step's pure core on a values file -------------------------------------------------------


def test_update_plans_the_values_file() -> None:
    p = plan(VALUES)
    assert (p.decision, p.changed) == ("update", True)
    assert p.values is not None and p.image_name == IMAGE
    assert (p.old.newTag, p.new.newTag) == ("1.4.2", "1.4.3")
    assert write_entry(
        VALUES, IMAGE, source=p.file, tag="1.4.3", digest=None, values=p.values
    ) == VALUES.replace("1.4.2", "1.4.3")


def test_never_a_downgrade_on_a_values_file() -> None:
    p = plan(VALUES, target("1.4.1"))
    assert (p.decision, p.changed) == ("stale", False)
    assert plan(VALUES, target("1.4.2")).decision == "current"


def test_a_hold_marker_on_the_images_mapping_holds_it() -> None:
    held = VALUES.replace("image:\n", "image:  # imagebump:hold until the migration\n")
    p = plan(held)
    assert (p.decision, p.changed) == ("held", False)
    assert "until the migration" in p.reason


def test_values_keys_naming_another_repository_pins_it() -> None:
    text = f"image: {ECR}/dr/api\nimageTag: 1.4.2\n"
    t = target(values_keys={"repository": "image", "tag": "imageTag"})
    p = plan(text, t)
    assert (p.decision, p.changed) == ("pinned", False)


def test_image_not_in_the_values_file_names_what_it_holds() -> None:
    with pytest.raises(ImageNotFoundError) as caught:
        plan(f"image:\n  repository: {ECR}/team/other\n  tag: 1.0\n")
    assert f"{ECR}/team/other" in str(caught.value)


def test_commit_pr_reapplies_on_the_newest_base() -> None:
    t = target()
    p = plan(VALUES, t)
    moved = "# a comment someone added\n" + VALUES
    applied = commit_pr.decide(moved, t, p)
    assert applied.text == moved.replace("tag: 1.4.2", "tag: 1.4.3")
    assert commit_pr.decide(applied.text, t, p).text is None  # already there
    held = moved.replace("tag: 1.4.2", "tag: 1.4.2 # imagebump:hold")
    assert commit_pr.decide(held, t, p).text is None


def test_read_entry_of_a_values_file_is_an_images_entry() -> None:
    entry = read_entry(VALUES, IMAGE, source="values.yaml", values=target().values_ref())
    assert (entry.name, entry.newName, entry.newTag, entry.digest) == (IMAGE, IMAGE, "1.4.2", None)


# --- helmfile -------------------------------------------------------------------------------------------


def zoo_reader(root: str = "deploy"):
    def read(path: str) -> str | None:
        local = ZOO / "helmfile" / Path(path).relative_to(root)
        return local.read_text() if local.is_file() else None

    return read


def test_helmfile_release_sources_resolve_the_environment_name() -> None:
    text = (ZOO / "helmfile" / "helmfile.yaml").read_text()

    def exists(path: str) -> bool:
        return zoo_reader()(path) is not None

    got = [str(s) for s in release_sources(text, "deploy/helmfile.yaml", "api", "prod", exists)]
    # environments.prod.values only feed the helmfile's templates; the secrets file is absent, and its
    # entry is guarded by {{ if isFile … }}
    assert got == ["deploy/charts/api/values.yaml", "deploy/overrides/api/values.prod.yaml"]


def test_helmfile_image_found_in_the_highest_precedence_file_that_holds_it() -> None:
    got = locate_image(zoo_reader(), "deploy/helmfile.yaml", "api", "prod", IMAGE)
    assert (got.file, got.scope, got.keys, got.repository) == (
        "deploy/overrides/api/values.prod.yaml",
        None,
        None,
        None,
    )
    assert "replicas: 3" in got.text


def test_helmfile_inline_values_are_edited_in_the_helmfile() -> None:
    got = locate_image(zoo_reader(), "deploy/helmfile.yaml", "worker", "prod", f"{ECR}/team/worker")
    file, text, scope = got.file, got.text, got.scope
    assert file == "deploy/helmfile.yaml" and scope == (1, "releases", 1, "values", 0)
    t = target(
        values_file=None,
        helmfile={"file": "deploy/helmfile.yaml", "release": "worker", "environment": "prod"},
    )
    ref = t.values_ref(list(scope))
    edited = write_entry(text, f"{ECR}/team/worker", source=file, tag="2.0.1", digest=None, values=ref)
    assert edited == text.replace("tag: 2.0.0  # inline", "tag: 2.0.1  # inline")


def test_helmfile_path_it_cannot_resolve_is_a_clear_error_naming_it() -> None:
    with pytest.raises(ValuesError, match=r"overrides/\{\{ \.Values\.team \}\}/values\.yaml"):
        locate_image(zoo_reader(), "deploy/helmfile.yaml", "templated", "prod", IMAGE)


def test_helmfile_unknown_release_lists_the_releases() -> None:
    with pytest.raises(ValuesError, match="api, worker, templated"):
        locate_image(zoo_reader(), "deploy/helmfile.yaml", "nope", "prod", IMAGE)


# --- rollbacks from the values file's history ---------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    import subprocess

    env = {"GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com", "GIT_COMMITTER_NAME": "Ann"}
    env |= {"GIT_COMMITTER_EMAIL": "ann@example.com", "PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def test_a_persons_rollback_in_the_values_files_history_holds_it(tmp_path: Path) -> None:
    from steps.domain.intent import rollback
    from steps.entry_history import last_image_change
    from steps.git import ClonedRepo

    _git(tmp_path, "init", "-q", "-b", "main")
    file = tmp_path / "values.yaml"
    steps = [
        ("1.4.1", "initial"),
        ("1.4.2", f"imagebump(prod): 1.4.2\n\nImagebump-Image: {IMAGE}:1.4.2"),
        ("1.4.1", "roll back: 1.4.2 leaks memory"),
    ]
    for tag, message in steps:
        file.write_text(VALUES.replace("1.4.2", tag))
        _git(tmp_path, "add", "values.yaml")
        _git(tmp_path, "commit", "-q", "-m", message)
    change = last_image_change(
        ClonedRepo(tmp_path, "main"), "HEAD", "values.yaml", IMAGE, fetch=False, values=target().values_ref()
    )
    assert change is not None and (change.before.newTag, change.after.newTag) == ("1.4.2", "1.4.1")
    assert rollback(change, "semver", lambda _entry: None) is change


def test_a_values_files_text_never_travels_in_the_plan() -> None:
    """Values files often hold credentials: the plan never carries the text to commit-pr."""
    from steps.edit_kustomize.step import carry_text

    p = plan(VALUES + "auth:\n  password: hunter2\n")
    assert p.changed
    assert carry_text(p, repo=None, text=VALUES) is p  # the repository is not even looked at


def test_write_refuses_a_pinned_value_keys_image() -> None:
    text = f"image: {ECR}/dr/api\nimageTag: 1.4.2\n"
    keys = {"repository": "image", "tag": "imageTag"}
    with pytest.raises(ValuesError) as caught:
        write_entry(
            text,
            IMAGE,
            source="v.yaml",
            tag="1.4.3",
            digest=None,
            values=target(values_keys=keys).values_ref(),
        )
    assert caught.value.reason == "pinned"


def test_helmfile_without_an_environment_uses_helmfiles_default() -> None:
    text = "releases:\n  - name: api\n    values:\n      - values/{{ .Environment.Name }}.yaml\n"
    assert [str(s) for s in release_sources(text, "helmfile.yaml", "api", "")] == ["values/default.yaml"]


#: Tags that look like numbers, booleans or versions: the shapes Helm may read as another value.
NUMBER_LIKE_TAGS = st.from_regex(
    r"[0-9]{1,4}(\.[0-9]{1,3}){0,2}|[0-9]{1,3}e[0-9]|0x[0-9a-f]{1,3}|0X[0-9A-F]{1,3}|0B[01]{1,4}|0[0-7]{1,3}"
    r"|yes|no|on|off|true|False"
    r"|v[0-9]\.[0-9]{1,2}|[0-9]\.[0-9]-rc[0-9]",
    fullmatch=True,
)


def test_a_tag_helm_reads_as_a_number_is_written_quoted_when_pushed_again() -> None:
    """``tag: 1.10`` is the float 1.1 to Helm (sigs.k8s.io/yaml): the chart deploys ``api:1.1``. The
    push of 1.10 is not ``current``: it writes the same tag quoted, and then it is."""
    text = VALUES.replace("1.4.2", "1.10")
    p = plan(text, target("1.10", order="none"))
    assert (p.decision, p.changed) == ("update", True)
    edited = write_entry(text, IMAGE, source=p.file, tag="1.10", digest=None, values=p.values)
    assert yaml.safe_load(edited)["image"]["tag"] == "1.10"
    assert edited == text.replace("tag: 1.10", 'tag: "1.10"')
    assert plan(edited, target("1.10", order="none")).decision == "current"
    for order in ("none", "semver", "push-time"):  # commit-pr re-applies it on the newest base
        t = target("1.10", order=order)
        assert commit_pr.decide(text, t, plan(text, t)).text == edited


@settings(max_examples=150, deadline=None)
@given(tag=NUMBER_LIKE_TAGS)
def test_after_a_push_helm_reads_the_pushed_tag_whatever_the_file_wrote(tag: str) -> None:
    """Whatever the file wrote (the tag plain, as a person may have), after the push of that same tag
    Helm reads that tag as text (PyYAML reads YAML 1.1, as Helm's sigs.k8s.io/yaml does): either the
    file already said it (``current``), or the edit writes it so."""
    text = VALUES.replace("1.4.2", tag)
    p = plan(text, target(tag, order="none"))
    after = (
        write_entry(text, IMAGE, source=p.file, tag=tag, digest=None, values=p.values)
        if p.decision == "update"
        else text
    )
    assert p.decision in ("update", "current")
    assert yaml.safe_load(after)["image"]["tag"] == tag


def sweep_verdict(text: str, tag: str, *, mode: str = "commit", branch_text: str | None = None):
    """The sweep's verdict on ``text`` when ``tag`` is the newest allowed image (as
    steps.reconcile.overlay_read reads a values file and steps.reconcile.decide judges it)."""
    from steps.kustomize import entry_hold, require_entry, values_misread
    from steps.reconcile.decide import decide as reconcile_decide

    t = target(tag, order="semver", mode=mode)
    ref, file = t.values_ref(), "charts/api/values.yaml"
    proposed = None if branch_text is None else read_entry(branch_text, IMAGE, source=file, values=ref)
    return reconcile_decide(
        newest=t,
        current=require_entry(text, IMAGE, source=file, values=ref),
        hold=entry_hold(text, IMAGE, source=file, values=ref),
        image=IMAGE,
        misread=values_misread(text, IMAGE, source=file, values=ref),
        branch="imagebump/x" if branch_text is not None else "",
        proposed=proposed,
        proposed_misread=(
            values_misread(branch_text, IMAGE, source=file, values=ref) if branch_text is not None else ()
        ),
    )


@settings(max_examples=150, deadline=None)
@given(
    tag=NUMBER_LIKE_TAGS,
    quote=st.sampled_from(["", '"', "'"]),
)
def test_the_sweep_says_current_only_when_helm_reads_the_newest_tag(tag: str, quote: str) -> None:
    """The sweep (image-reconcile) calls a values file ``current`` only when Helm reads the newest tag
    from it (go-yaml v2, as Helm's sigs.k8s.io/yaml reads it: tests/steps/kustomize/go_yaml_v2.py); ``tag: 1.10`` unquoted is the
    number 1.1 to Helm, so it is ``behind``, and the update it hands on writes the tag quoted."""
    text = VALUES.replace("1.4.2", f"{quote}{tag}{quote}")
    verdict = sweep_verdict(text, tag)
    helm_reads_the_tag = bool(quote) or helm_reads_as_text(tag)
    assert verdict.state == ("current" if helm_reads_the_tag else "behind")
    if verdict.state == "behind":
        assert verdict.update is not None and verdict.update.tag == tag
        p = plan(text, verdict.update)  # what update-target's edit-kustomize then does
        assert p.decision == "update"
        edited = write_entry(text, IMAGE, source=p.file, tag=tag, digest=None, values=p.values)
        assert yaml.safe_load(edited)["image"]["tag"] == tag
        assert sweep_verdict(edited, tag).state == "current"


def test_the_sweep_sees_a_pr_branch_that_writes_the_tag_quoted_as_the_proposal() -> None:
    text = VALUES.replace("1.4.2", "1.10")
    assert sweep_verdict(text, "1.10", mode="pr").state == "behind"
    assert sweep_verdict(text, "1.10", mode="pr", branch_text=text).state == "behind"  # still unquoted
    quoted = text.replace("tag: 1.10", 'tag: "1.10"')
    assert sweep_verdict(text, "1.10", mode="pr", branch_text=quoted).state == "proposed"
