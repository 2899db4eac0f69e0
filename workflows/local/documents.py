"""Reading rendered workflow YAML: the document being run and the WorkflowTemplates it may reference.

:class:`WorkflowDocument` is the raw material of :mod:`validation`: the entry document (a
WorkflowTemplate, Workflow or CronWorkflow, whose ``workflowSpec`` is unwrapped), its templates,
and the templates of other WorkflowTemplates by name, for ``templateRef``. It answers which
template a step calls and in which WorkflowTemplate's scope a template lives; it validates nothing
but the kinds and a CronWorkflow's scheduling fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from steps.domain.errors import ConfigError
from workflows.local.errors import UnsupportedFeatureError

KINDS = ("WorkflowTemplate", "Workflow", "CronWorkflow")

#: libyaml's parser where PyYAML was built with it (the wheels are): the same YAML 1.1 documents as
#: ``yaml.safe_load``, ~10x faster on the rendered templates (image-update: 0.24 s -> 0.03 s here,
#: paid by every ``imagebump run --local`` and every executor a test or the bench builds).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: CronWorkflow fields that only schedule runs (the caller schedules locally): ignored.
IGNORED_CRON = {
    "schedules",
    "schedule",
    "timezone",
    "concurrencyPolicy",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "suspend",
    "workflowMetadata",
}


def load(template_yaml: str | Path) -> tuple[str, dict[str, Any]]:
    """(source, document) of a rendered Workflow, WorkflowTemplate or CronWorkflow: a path or YAML text."""
    if isinstance(template_yaml, Path) or (
        isinstance(template_yaml, str)
        and "\n" not in template_yaml
        and template_yaml.endswith((".yaml", ".yml"))
    ):
        source = str(template_yaml)
        try:
            text = Path(template_yaml).read_text()
        except OSError as exc:
            raise ConfigError(
                f"{source}: cannot read it ({exc.strerror}); render it with `imagebump render`"
            ) from None
    else:
        source, text = "<string>", str(template_yaml)
    try:
        doc = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        raise ConfigError(
            f"{source}: expected a WorkflowTemplate (kind: WorkflowTemplate, or a CronWorkflow)"
        )
    return source, doc


def siblings(source: str) -> list[tuple[str, dict[str, Any]]]:
    """The rendered WorkflowTemplates in the directory of the file ``source`` (none for YAML text)."""
    if source == "<string>":
        return []
    found = []
    for path in sorted(Path(source).resolve().parent.glob("*.y*ml")):
        if path.resolve() == Path(source).resolve() or path.suffix not in (".yaml", ".yml"):
            continue
        try:
            doc = yaml.load(path.read_text(), Loader=_LOADER)
        except (OSError, yaml.YAMLError):
            continue  # not ours to judge: only a WorkflowTemplate a step names is used, and checked
        if isinstance(doc, dict) and doc.get("kind") == "WorkflowTemplate":
            found.append((str(path), doc))
    return found


@dataclass
class WorkflowDocument:
    """The document to run and the WorkflowTemplates ``templateRef`` may name."""

    source: str
    doc: dict[str, Any]
    kind: str
    name: str
    spec: dict[str, Any]
    templates: dict[str, dict[str, Any]]
    #: other WorkflowTemplates by metadata.name → their templates by name
    referenced: dict[str, dict[str, dict[str, Any]]]
    #: names given by more than one file → those files
    ambiguous: dict[str, list[str]]
    #: id(template) → the WorkflowTemplate it belongs to ('' = the document being run)
    scope_of: dict[int, str]

    @classmethod
    def read(
        cls, template_yaml: str | Path, workflow_templates: Sequence[str | Path] | None = None
    ) -> WorkflowDocument:
        """Load ``template_yaml`` and the WorkflowTemplates it may reference (by default: those
        rendered next to it, as a cluster finds them by name in their namespace)."""
        source, doc = load(template_yaml)
        kind: str = doc["kind"]
        meta = doc.get("metadata") or {}
        name = meta.get("name") or meta.get("generateName", "")
        spec: dict[str, Any] = doc.get("spec") or {}
        if kind == "CronWorkflow":
            for key in spec:
                if key != "workflowSpec" and key not in IGNORED_CRON:
                    raise UnsupportedFeatureError(
                        f"spec.{key}", "the local executor runs a CronWorkflow once per call"
                    )
            spec = spec.get("workflowSpec") or {}
        templates = {t["name"]: t for t in spec.get("templates") or []}
        others = siblings(source) if workflow_templates is None else [load(i) for i in workflow_templates]
        referenced: dict[str, dict[str, dict[str, Any]]] = {}
        ambiguous: dict[str, list[str]] = {}
        sources: dict[str, str] = {}
        for other_source, other in others:
            other_name = (other.get("metadata") or {}).get("name")
            if other["kind"] != "WorkflowTemplate" or not other_name:
                raise ConfigError(
                    f"{other_source}: workflow_templates takes named WorkflowTemplates, got {other['kind']}"
                )
            if other_name in sources:
                ambiguous.setdefault(other_name, [sources[other_name]]).append(other_source)
            sources[other_name] = other_source
            referenced[other_name] = {t["name"]: t for t in (other.get("spec") or {}).get("templates") or []}
        scope_of: dict[int, str] = {id(tpl): "" for tpl in templates.values()}
        for ref_name, ref_templates in referenced.items():
            scope_of.update({id(tpl): ref_name for tpl in ref_templates.values()})
        return cls(source, doc, kind, name, spec, templates, referenced, ambiguous, scope_of)

    def scope(self, tpl: dict[str, Any]) -> str:
        """The WorkflowTemplate whose templates ``tpl``'s steps name ('' = the document being run)."""
        return self.scope_of.get(id(tpl), "")

    def callee(self, step: dict[str, Any], scope: str) -> dict[str, Any]:
        """The template a step (or task) runs: ``template`` looked up in the caller's scope (its
        WorkflowTemplate), or ``templateRef`` in the WorkflowTemplate it names. Validated already."""
        ref = step.get("templateRef")
        if ref is not None:
            return self.referenced[ref["name"]][ref["template"]]
        return (self.referenced[scope] if scope else self.templates)[step["template"]]

    def resolve(self, step: dict[str, Any], scope: str, where: str) -> dict[str, Any]:
        """The template a step names, refusing what a cluster would refuse or the runtime cannot run:
        ``inline``, an undefined template, ``template`` with ``templateRef``, a WorkflowTemplate not
        given (or given twice), a template it does not hold, ``clusterScope``."""
        if "inline" in step:
            raise UnsupportedFeatureError(f"{where}.inline")
        ref = step.get("templateRef")
        if ref is None:
            own = self.referenced[scope] if scope else self.templates
            if step.get("template") not in own:
                raise ConfigError(f"{where}: template {step.get('template')!r} is not defined")
            return own[step["template"]]
        rw = f"{where}.templateRef"
        if "template" in step:
            raise UnsupportedFeatureError(rw, "a step has either template or templateRef, not both")
        if not isinstance(ref, dict):
            raise UnsupportedFeatureError(rw, "expected {name, template}")
        for key in ref:
            if key not in ("name", "template", "clusterScope"):
                raise UnsupportedFeatureError(f"{rw}.{key}")
        if ref.get("clusterScope"):
            raise UnsupportedFeatureError(f"{rw}.clusterScope", "ClusterWorkflowTemplates")
        name, template = ref.get("name"), ref.get("template")
        if name not in self.referenced:
            given = ", ".join(sorted(self.referenced)) or "none"
            raise UnsupportedFeatureError(
                f"{rw}.name",
                f"{name!r} is not a WorkflowTemplate given to the local executor (given: {given}); "
                "render it next to this template, or pass its rendered YAML in workflow_templates",
            )
        if name in self.ambiguous:
            raise ConfigError(
                f"{rw}.name: {name!r} names several WorkflowTemplates "
                f"({', '.join(self.ambiguous[name])}); give the executor one"
            )
        if template not in self.referenced[name]:
            held = ", ".join(sorted(self.referenced[name]))
            raise UnsupportedFeatureError(
                f"{rw}.template", f"WorkflowTemplate {name!r} has no template {template!r} (it has: {held})"
            )
        return self.referenced[name][template]

    def every_template(self) -> list[dict[str, Any]]:
        """The document's templates, then those of every referenced WorkflowTemplate."""
        return list(self.templates.values()) + [t for ts in self.referenced.values() for t in ts.values()]


__all__ = ["KINDS", "WorkflowDocument", "load", "siblings"]
