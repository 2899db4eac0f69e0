"""The supported subset: everything the local runtime cannot run is refused before any run.

:func:`validate` walks a :class:`~workflows.local.documents.WorkflowDocument` (the spec, every
template reachable from it, the templates a ``templateRef`` names, their volumes, variables,
conditions and retry strategies) and returns a :class:`ValidatedWorkflow`, the only thing the
interpreter runs. Refusals are :class:`~workflows.local.errors.UnsupportedFeatureError` (message
``not supported by the local executor: <field>…``) or, for a template that is wrong on any
runtime (an undefined template, a missing Secret), :class:`steps.domain.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from steps.domain.errors import ConfigError
from workflows.local import fields as f
from workflows.local.documents import WorkflowDocument
from workflows.local.errors import UnsupportedFeatureError
from workflows.local.expressions import (
    VAR,
    check_variables,
    dag_ancestors,
    evaluate_condition,
    evaluate_when,
    parse_duration,
    retry_operand,
    task_dependencies,
    variables,
)
from workflows.local.paths import is_private


@dataclass(frozen=True)
class ValidatedWorkflow:
    """A document every reachable template of which the local runtime can run."""

    document: WorkflowDocument
    #: spec.arguments.parameters: name → value or default (None: the caller must give it)
    workflow_parameters: dict[str, str | None]

    @property
    def spec(self) -> dict[str, Any]:
        return self.document.spec


def validate(
    document: WorkflowDocument,
    secrets: Mapping[str, Mapping[str, str]],
    configmaps: Mapping[str, Mapping[str, str]],
) -> ValidatedWorkflow:
    """Check ``document`` against the supported subset and the Secrets/ConfigMaps given.

    Raises:
        UnsupportedFeatureError: a field, variable or expression the local runtime does not run.
        ConfigError: the document is wrong on any runtime, or a non-optional Secret/ConfigMap it
            references was not given.
    """
    return _Validator(document, secrets, configmaps).run()


def _check_keys(
    obj: Mapping[str, Any], allowed: set[str], where: str, ignored: set[str] = frozenset()
) -> None:
    for key in obj:
        if key not in allowed and key not in ignored:
            raise UnsupportedFeatureError(f"{where}.{key}")


def _int(value: Any, where: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise UnsupportedFeatureError(where, f"{value!r} is not an integer") from None


def _mutexes(sync: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``synchronization.mutexes`` plus the older single ``mutex``."""
    return list(sync.get("mutexes") or []) + ([sync["mutex"]] if sync.get("mutex") else [])


class _Validator:
    def __init__(
        self,
        doc: WorkflowDocument,
        secrets: Mapping[str, Mapping[str, str]],
        configmaps: Mapping[str, Mapping[str, str]],
    ) -> None:
        self.doc = doc
        self.secrets = secrets
        self.configmaps = configmaps
        self.validated: set[int] = set()
        self.workflow_parameters: dict[str, str | None] = {}

    def run(self) -> ValidatedWorkflow:
        doc, spec = self.doc, self.doc.spec
        for key in spec:
            if key not in f.SUPPORTED_SPEC and key not in f.IGNORED_SPEC:
                raise UnsupportedFeatureError(f"spec.{key}")
        if not spec.get("entrypoint") or spec["entrypoint"] not in doc.templates:
            raise ConfigError(f"{doc.source}: spec.entrypoint {spec.get('entrypoint')!r} is not a template")
        if spec.get("onExit") and spec["onExit"] not in doc.templates:
            raise ConfigError(f"{doc.source}: spec.onExit {spec['onExit']!r} is not a template")
        if spec.get("activeDeadlineSeconds") is not None:
            _int(spec["activeDeadlineSeconds"], "spec.activeDeadlineSeconds")
        args = spec.get("arguments") or {}
        for key in args:
            if key != "parameters":
                raise UnsupportedFeatureError(f"spec.arguments.{key}")
        for i, p in enumerate(args.get("parameters") or []):
            _check_keys(p, f.PARAMETER, f"spec.arguments.parameters[{i}]")
            value = p.get("value", p.get("default"))
            self.workflow_parameters[p["name"]] = None if value is None else str(value)
        self.volumes(spec.get("volumes") or [], "spec.volumes")
        for name, tpl in doc.templates.items():
            self.template(name, tpl)
        return ValidatedWorkflow(doc, self.workflow_parameters)

    def vars(self, text: str, where: str, inputs: set[str], visible: set[str], item: bool, **kw: Any) -> None:
        check_variables(
            text,
            where,
            workflow_parameters=self.workflow_parameters,
            input_names=inputs,
            visible_steps=visible,
            has_item=item,
            **kw,
        )

    def volumes(self, volumes: list[dict[str, Any]], where: str) -> None:
        for i, vol in enumerate(volumes):
            kinds = set(vol) - {"name"}
            if kinds - {"secret", "configMap", "emptyDir"} or len(kinds) != 1:
                raise UnsupportedFeatureError(
                    f"{where}[{i}]", f"volume kinds {sorted(kinds)} (only secret, configMap, emptyDir)"
                )
            if "secret" in vol:
                src = vol["secret"]
                _check_keys(src, {"secretName", "items", "optional", "defaultMode"}, f"{where}[{i}].secret")
                self.require("secret", src.get("secretName"), None, src.get("optional"), where)
            if "configMap" in vol:
                src = vol["configMap"]
                _check_keys(src, {"name", "items", "optional", "defaultMode"}, f"{where}[{i}].configMap")
                self.require("configmap", src.get("name"), None, src.get("optional"), where)

    def require(self, kind: str, name: str | None, key: str | None, optional: Any, where: str) -> None:
        store = self.secrets if kind == "secret" else self.configmaps
        if optional:
            return
        if name not in store:
            arg = "secrets" if kind == "secret" else "configmaps"
            raise ConfigError(
                f"{where}: {kind} {name!r} is referenced by the template but was not given to the local "
                f"executor; pass it in {arg}={{{name!r}: {{...}}}}"
            )
        if key is not None and key not in store[name]:
            raise ConfigError(
                f"{where}: {kind} {name!r} has no key {key!r} (has: {', '.join(sorted(store[name])) or 'none'})"
            )

    def template(self, name: str, tpl: dict[str, Any]) -> None:
        self.validated.add(id(tpl))
        scope = self.doc.scope(tpl)
        where = f"templates[{name}]" if not scope else f"workflowtemplates[{scope}].templates[{name}]"
        kinds = [k for k in ("steps", "dag", "script", "suspend") if k in tpl]
        _check_keys(tpl, f.SUPPORTED_TEMPLATE, where, f.IGNORED_TEMPLATE)
        if len(kinds) != 1:
            raise UnsupportedFeatureError(
                where, "a template must be exactly one of steps, dag, script, suspend"
            )
        if tpl.get("parallelism") is not None:
            if kinds[0] not in ("steps", "dag"):
                raise UnsupportedFeatureError(f"{where}.parallelism", "only on steps and dag templates")
            if _int(tpl["parallelism"], f"{where}.parallelism") < 1:
                raise UnsupportedFeatureError(f"{where}.parallelism", "must be at least 1")
        if "suspend" in tpl:
            suspend = tpl["suspend"] or {}
            _check_keys(suspend, {"duration"}, f"{where}.suspend")
            if suspend.get("duration") in (None, ""):
                raise UnsupportedFeatureError(
                    f"{where}.suspend", "no duration: it would wait for a manual resume"
                )
            parse_duration(suspend["duration"], f"{where}.suspend.duration")
            if tpl.get("outputs"):
                raise UnsupportedFeatureError(f"{where}.outputs", "outputs of a suspend template")
        inputs = tpl.get("inputs") or {}
        _check_keys(inputs, {"parameters"}, f"{where}.inputs")
        input_names = set()
        for i, p in enumerate(inputs.get("parameters") or []):
            _check_keys(p, f.PARAMETER, f"{where}.inputs.parameters[{i}]")
            input_names.add(p["name"])
        if tpl.get("activeDeadlineSeconds") is not None:
            _int(tpl["activeDeadlineSeconds"], f"{where}.activeDeadlineSeconds")
        sync = tpl.get("synchronization")
        if sync is not None:
            _check_keys(sync, {"mutexes", "mutex"}, f"{where}.synchronization")
            for j, m in enumerate(_mutexes(sync)):
                _check_keys(m, {"name", "namespace"}, f"{where}.synchronization.mutexes[{j}]")
                if m.get("namespace"):
                    raise UnsupportedFeatureError(f"{where}.synchronization.mutexes[{j}].namespace")
                self.vars(str(m.get("name", "")), f"{where}.synchronization", input_names, set(), False)
        if tpl.get("retryStrategy") is not None:
            self.retry(tpl["retryStrategy"], f"{where}.retryStrategy")
        self.volumes(tpl.get("volumes") or [], f"{where}.volumes")
        step_outputs: set[str] = set()
        if "script" in tpl:
            self.script(tpl, where, input_names)
        elif "suspend" not in tpl:
            step_outputs = self.group(tpl, where, input_names)
        self.outputs(tpl, where, input_names, step_outputs)

    def outputs(self, tpl: dict[str, Any], where: str, input_names: set[str], step_outputs: set[str]) -> None:
        outputs = tpl.get("outputs") or {}
        _check_keys(outputs, {"parameters"}, f"{where}.outputs")
        for i, p in enumerate(outputs.get("parameters") or []):
            pw = f"{where}.outputs.parameters[{i}]"
            _check_keys(p, {"name", "valueFrom", "description", "globalName"}, pw)
            if p.get("globalName"):
                raise UnsupportedFeatureError(f"{pw}.globalName")
            vf = p.get("valueFrom") or {}
            if "script" in tpl:
                _check_keys(vf, {"path", "default"}, f"{pw}.valueFrom")
                if "path" not in vf:
                    raise UnsupportedFeatureError(f"{pw}.valueFrom", "script outputs need valueFrom.path")
                if variables(vf["path"]):
                    raise UnsupportedFeatureError(f"{pw}.valueFrom.path", "variables in output paths")
                mounts = [m["mountPath"] for m in tpl["script"].get("volumeMounts") or []]
                if not is_private(vf["path"], mounts):
                    raise UnsupportedFeatureError(
                        f"{pw}.valueFrom.path",
                        f"{vf['path']!r} is outside /tmp and the template's volume mounts",
                    )
            else:
                _check_keys(vf, {"parameter", "default"}, f"{pw}.valueFrom")
                if "parameter" not in vf:
                    raise UnsupportedFeatureError(
                        f"{pw}.valueFrom", "steps/dag outputs need valueFrom.parameter"
                    )
                prefix = "steps" if "steps" in tpl else "tasks"
                self.vars(
                    str(vf["parameter"]),
                    f"{pw}.valueFrom.parameter",
                    input_names,
                    step_outputs,
                    False,
                    prefix=prefix,
                )

    def retry(self, retry: dict[str, Any], where: str) -> None:
        _check_keys(retry, {"limit", "retryPolicy", "backoff", "expression"}, where)
        if retry.get("limit") is not None:
            _int(retry["limit"], f"{where}.limit")
        if retry.get("retryPolicy") not in (None, "Always", "OnFailure", "OnError", "OnTransientError"):
            raise UnsupportedFeatureError(f"{where}.retryPolicy", str(retry["retryPolicy"]))
        backoff = retry.get("backoff") or {}
        _check_keys(backoff, {"duration", "factor", "maxDuration", "cap"}, f"{where}.backoff")
        for key in ("duration", "maxDuration", "cap"):
            if backoff.get(key) is not None:
                parse_duration(backoff[key], f"{where}.backoff.{key}")
        if backoff.get("factor") is not None:
            try:
                float(str(backoff["factor"]))
            except ValueError:
                raise UnsupportedFeatureError(f"{where}.backoff.factor", str(backoff["factor"])) from None
        if retry.get("expression"):
            try:
                for code, status in ((0, "Failed"), (2, "Failed"), (75, "Error")):
                    evaluate_condition(
                        retry["expression"], lambda t, c=code, s=status: retry_operand(t, c, s)
                    )
            except (ValueError, TypeError) as exc:
                raise UnsupportedFeatureError(
                    f"{where}.expression", f"{retry['expression']!r} ({exc})"
                ) from None

    def script(self, tpl: dict[str, Any], where: str, input_names: set[str]) -> None:
        script = tpl["script"]
        sw = f"{where}.script"
        _check_keys(script, f.SUPPORTED_SCRIPT, sw, f.IGNORED_SCRIPT)
        command = list(script.get("command") or [])
        if command[:1] not in (["python"], ["python3"]) or len(command) != 1:
            raise UnsupportedFeatureError(f"{sw}.command", f"{command!r} (only [python])")
        self.vars(
            str(script.get("source", "")), f"{sw}.source", input_names, set(), False, allow_all_inputs=True
        )
        for a in script.get("args") or []:
            self.vars(str(a), f"{sw}.args", input_names, set(), False)
        volume_names = {v["name"] for v in (tpl.get("volumes") or []) + (self.doc.spec.get("volumes") or [])}
        for i, m in enumerate(script.get("volumeMounts") or []):
            mw = f"{sw}.volumeMounts[{i}]"
            _check_keys(m, {"name", "mountPath", "readOnly", "subPath"}, mw)
            if m.get("name") not in volume_names:
                raise ConfigError(f"{mw}: volume {m.get('name')!r} is not declared in the template's volumes")
        for i, e in enumerate(script.get("env") or []):
            ew = f"{sw}.env[{i}]"
            _check_keys(e, {"name", "value", "valueFrom"}, ew)
            if "value" in e:
                self.vars(str(e["value"]), f"{ew}.value", input_names, set(), False)
            vf = e.get("valueFrom")
            if vf is not None:
                _check_keys(vf, {"secretKeyRef", "configMapKeyRef"}, f"{ew}.valueFrom")
                for kind, ref in (
                    ("secret", vf.get("secretKeyRef")),
                    ("configmap", vf.get("configMapKeyRef")),
                ):
                    if ref is not None:
                        _check_keys(ref, {"name", "key", "optional"}, ew)
                        self.require(kind, ref.get("name"), ref.get("key"), ref.get("optional"), ew)
        for i, e in enumerate(script.get("envFrom") or []):
            ew = f"{sw}.envFrom[{i}]"
            _check_keys(e, {"secretRef", "configMapRef", "prefix"}, ew)
            for kind, ref in (("secret", e.get("secretRef")), ("configmap", e.get("configMapRef"))):
                if ref is not None:
                    _check_keys(ref, {"name", "optional"}, ew)
                    self.require(kind, ref.get("name"), None, ref.get("optional"), ew)

    def group(self, tpl: dict[str, Any], where: str, input_names: set[str]) -> set[str]:
        """Validate a steps/dag template; return the names of its steps/tasks."""
        items: list[tuple[str, dict[str, Any], set[str]]] = []
        if "steps" in tpl:
            prefix = "steps"
            seen: set[str] = set()
            for gi, group in enumerate(tpl["steps"] or []):
                if not isinstance(group, list):
                    raise UnsupportedFeatureError(f"{where}.steps[{gi}]", "expected a list of parallel steps")
                names_before = set(seen)
                for si, step in enumerate(group):
                    items.append((f"{where}.steps[{gi}][{si}]", step, names_before))
                    seen.add(step["name"])
        else:
            dag = tpl["dag"] or {}
            _check_keys(dag, {"tasks"}, f"{where}.dag", {"failFast"})
            prefix = "tasks"
            tasks = dag.get("tasks") or []
            seen = {t["name"] for t in tasks}
            graph: dict[str, set[str]] = {}
            for ti, task in enumerate(tasks):
                deps = task_dependencies(task, f"{where}.dag.tasks[{ti}]")
                for dep in deps:
                    if dep not in seen:
                        raise ConfigError(f"{where}.dag.tasks[{ti}]: depends on unknown task {dep!r}")
                graph[task["name"]] = set(deps)
            for ti, task in enumerate(tasks):
                items.append((f"{where}.dag.tasks[{ti}]", task, dag_ancestors(graph, task["name"])))
        scope = self.doc.scope(tpl)
        for sw, step, visible in items:
            self.step(step, sw, scope, prefix, input_names, visible, in_steps="steps" in tpl)
        return {s["name"] for _, s, _ in items}

    def step(
        self,
        step: dict[str, Any],
        sw: str,
        scope: str,
        prefix: str,
        input_names: set[str],
        visible: set[str],
        *,
        in_steps: bool,
    ) -> None:
        _check_keys(step, f.SUPPORTED_STEP, sw)
        if in_steps and ("dependencies" in step or "depends" in step):
            raise UnsupportedFeatureError(f"{sw}.dependencies")
        callee = self.callee(step, scope, sw)
        has_items = "withParam" in step or "withItems" in step
        args = step.get("arguments") or {}
        _check_keys(args, {"parameters"}, f"{sw}.arguments")
        callee_inputs = {p["name"] for p in (callee.get("inputs") or {}).get("parameters") or []}
        for i, p in enumerate(args.get("parameters") or []):
            _check_keys(p, {"name", "value", "description"}, f"{sw}.arguments.parameters[{i}]")
            if p["name"] not in callee_inputs:
                raise ConfigError(
                    f"{sw}: argument {p['name']!r} is not an input of template {callee['name']!r}"
                )
            vw = f"{sw}.arguments.parameters[{i}].value"
            self.vars(str(p.get("value", "")), vw, input_names, visible, has_items, prefix=prefix)
        if "withParam" in step:
            self.vars(str(step["withParam"]), f"{sw}.withParam", input_names, visible, False, prefix=prefix)
        if "withItems" in step and not isinstance(step["withItems"], list):
            raise UnsupportedFeatureError(f"{sw}.withItems", "expected a list")
        if "when" in step:
            when = str(step["when"])
            self.vars(when, f"{sw}.when", input_names, visible, has_items, prefix=prefix)
            try:
                evaluate_when(VAR.sub("x", when))
            except ValueError as exc:
                raise UnsupportedFeatureError(f"{sw}.when", f"{when!r} ({exc})") from None

    def callee(self, step: dict[str, Any], scope: str, where: str) -> dict[str, Any]:
        """What a step names (see :meth:`WorkflowDocument.resolve`), validated once."""
        callee = self.doc.resolve(step, scope, where)
        if id(callee) not in self.validated:  # e.g. a template of a referenced WorkflowTemplate
            self.template(callee["name"], callee)
        return callee


__all__ = ["ValidatedWorkflow", "validate"]
