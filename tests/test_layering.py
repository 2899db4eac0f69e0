"""The layering of the code, read from the source with ``ast`` (issues 14 and 25).

The rules (docs/development.md draws them):

- **No import circles** between the project's modules (lazy imports inside functions count: a
  circle that works only while the imports stay inside functions is still one).
- **No module uses another module's underscore names**: neither ``from m import _x`` nor
  ``m._x`` (however ``m`` was imported), nor an underscore module of another package.
- **The package DAG**: every package (a ``steps/`` sub-package or single module,
  ``workflows`` — the declarations —, ``workflows.local``, ``sensors``, ``render``, ``imagebump``,
  ``bench``) imports only the packages :data:`MAY_IMPORT` lists for it. So ``steps/`` never
  imports ``workflows``, ``sensors``, ``render`` or ``imagebump``; a step never imports another
  step; and ``render`` sits above both ``workflows`` and ``sensors`` (only the CLI and the bench
  import it).
- ``steps/`` never loads Hera, even through a third-party import (checked statically through
  every project module, and by importing it in a fresh interpreter); nor do
  ``workflows.names`` and ``sensors/``.
- ``sensors/`` never loads the interpreter or the sandbox of the local runtime; the top-level
  declarations never load the local runtime.
- Each package says what lives there; a package's docstring names each of its modules.
- **One home for git** (issue 32): no module of ``steps/`` outside ``steps/git`` (nor of
  ``imagebump.commands``) runs git itself: no ``x.git(…)``, no ``run_git``, no ``["git", …]`` argv.

:func:`test_each_rule_can_fail` feeds every checker a small tree that breaks its rule.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("imagebump", "steps", "workflows", "sensors", "render", "bench")

_DOMAIN, _RUNTIME = "steps.domain", "steps.runtime"
_STEPS = (
    "steps.resolve_image",
    "steps.edit_kustomize",
    "steps.commit_pr",
    "steps.reconcile",
    "steps.argocd_backup",
    "steps.verify_live",
    "steps.live_states",
    "steps.notify",
    "steps.gate",
)
#: Who may import whom: each package → the packages it may import (besides itself). A package not
#: listed fails :func:`test_every_package_has_a_place_in_the_dag`, so a new one is placed on purpose.
MAY_IMPORT: dict[str, frozenset[str]] = {
    k: frozenset(v)
    for k, v in {
        # steps/, bottom up: the shared domain, the step runtime, the seams, then the steps
        _DOMAIN: (),
        _RUNTIME: (_DOMAIN,),
        "steps.kustomize": (_DOMAIN,),
        "steps.kube": (_DOMAIN,),
        "steps.rules": (_DOMAIN, _RUNTIME),
        "steps.aws": (_DOMAIN, _RUNTIME),
        "steps.git": (_DOMAIN, _RUNTIME),
        "steps.forge": (_DOMAIN, _RUNTIME, "steps.git"),
        "steps.proposals": (_DOMAIN, "steps.git", "steps.kustomize"),
        "steps.entry_history": (_DOMAIN, _RUNTIME, "steps.git", "steps.kustomize"),
        "steps.resolve_image": (_DOMAIN, _RUNTIME, "steps.rules", "steps.aws"),
        "steps.edit_kustomize": (
            _DOMAIN,
            _RUNTIME,
            "steps.kustomize",
            "steps.aws",
            "steps.git",
            "steps.proposals",
            "steps.entry_history",
            "steps.forge",  # a GitHub App's installation token reads private repositories
        ),
        "steps.commit_pr": (
            _DOMAIN,
            _RUNTIME,
            "steps.kustomize",
            "steps.git",
            "steps.forge",
            "steps.proposals",
            "steps.entry_history",  # rollbacks re-checked on the newest base
            "steps.gate",  # issue 35: gate: check's pending soak status on the pull request
        ),
        "steps.reconcile": (
            *(_DOMAIN, _RUNTIME, "steps.kustomize", "steps.rules", "steps.aws", "steps.git", "steps.forge"),
            "steps.entry_history",
            "steps.gate",  # issue 35: gated targets wait, are blocked or promoted
        ),
        "steps.argocd_backup": (_DOMAIN, _RUNTIME, "steps.aws", "steps.kube"),
        "steps.verify_live": (_DOMAIN, _RUNTIME, "steps.git", "steps.kube", "steps.kustomize"),
        # the sweep's live states: each Application judged as verify-live judges it, through its seams
        "steps.live_states": (_DOMAIN, _RUNTIME, "steps.git", "steps.kustomize", "steps.verify_live"),
        "steps.notify": (
            _DOMAIN,
            _RUNTIME,
            "steps.aws",
            "steps.kube",
            "steps.forge",
        ),  # ledger, Workflow, GitHub
        # the promotion gate (issue 35): its pure core, and its reads through verify-live's seams
        "steps.gate": (
            *(_DOMAIN, _RUNTIME, "steps.git", "steps.kube", "steps.kustomize", "steps.verify_live"),
            "steps.forge",  # gate: check's commit status
            "steps.rules",  # the short evaluation keeps the gated rules
            "steps.notify",  # issue 36: its live-before / blocked messages (steps.notify.promotion)
        ),
        # above steps/: the local runtime, the declarations, the sensors, rendering, the CLI
        "workflows.local": (_DOMAIN, _RUNTIME, "workflows"),  # workflows.names only (see below)
        "workflows": (_DOMAIN, _RUNTIME, "steps.kube", *_STEPS),  # steps.kube: Argo CD's namespaces (RBAC)
        "sensors": (_DOMAIN, _RUNTIME, "workflows", "workflows.local"),
        "render": ("workflows", "sensors"),
        "imagebump": ("*",),
        "bench": ("*",),
    }.items()
}
#: Packages nothing outside these may import (the top of the DAG).
ABOVE_ALL = frozenset({"imagebump", "bench"})


class Tree:
    """The project's modules under ``root`` and what each imports, read with ``ast``."""

    def __init__(self, root: Path, packages: Iterable[str] = PACKAGES) -> None:
        self.root = root
        self.packages = tuple(packages)

    @functools.cached_property
    def files(self) -> dict[str, Path]:
        found = {}
        for package in self.packages:
            for path in sorted((self.root / package).rglob("*.py")):
                parts = list(path.relative_to(self.root).with_suffix("").parts)
                found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        return found

    def is_project(self, module: str) -> bool:
        return module.split(".")[0] in self.packages

    @functools.cache  # noqa: B019 - a Tree lives as long as the test session
    def imports(self, module: str) -> tuple[tuple[str, str | None], ...]:
        """``(module, name)`` for each ``from module import name`` (``name`` None for ``import m``),
        absolute, project or not, anywhere in the source (inside functions too)."""
        path = self.files[module]
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: list[tuple[str, str | None]] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.extend((alias.name, None) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                found.extend((source, alias.name) for alias in node.names)
        return tuple(found)

    @functools.cache  # noqa: B019
    def depends_on(self, module: str) -> frozenset[str]:
        """The modules ``module`` names: ``from steps import git`` names ``steps.git``, ``from
        steps.git import clone`` names ``steps.git`` (the parent packages it runs on the way are
        not counted here: a package's ``__init__`` importing its own modules is no circle)."""
        deps = set()
        for source, name in self.imports(module):
            if name is not None and f"{source}.{name}" in self.files:
                deps.add(f"{source}.{name}")
            else:
                deps.add(source)
        return frozenset(deps)

    def loads(self, module: str) -> set[str]:
        """``module`` and everything importing it loads, parents' ``__init__`` included,
        transitively through project modules."""
        seen, stack = set(), [module]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if current in self.files:
                for dep in self.depends_on(current):
                    stack.extend(".".join(dep.split(".")[:i]) for i in range(1, dep.count(".") + 2))
        return seen


def unit(module: str) -> str:
    """The package ``module`` belongs to in the DAG: ``steps.git.repo`` → ``steps.git``,
    ``steps.proposals`` → itself, ``workflows.local.executor`` → ``workflows.local``."""
    parts = module.split(".")
    if parts[0] == "steps":
        return "steps" if len(parts) == 1 else f"steps.{parts[1]}"
    if parts[0] == "workflows" and len(parts) > 1 and parts[1] == "local":
        return "workflows.local"
    return parts[0]


# --- the checkers: each returns what breaks its rule (empty: the rule holds) ---------------------


def circles(tree: Tree) -> list[list[str]]:
    """Every import circle among the project's modules (one per strongly connected component)."""
    graph = {m: sorted(d for d in tree.depends_on(m) if d in tree.files and d != m) for m in tree.files}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def underscore_imports(tree: Tree) -> list[str]:
    """``from m import _x`` of a project module, and an underscore module imported from outside
    its own package."""
    found = []
    for module in tree.files:
        for source, name in tree.imports(module):
            if not tree.is_project(source):
                continue
            if name is not None and _private(name):
                found.append(f"{module}: from {source} import {name}")
            target = f"{source}.{name}" if name is not None and f"{source}.{name}" in tree.files else source
            parts = target.split(".")
            for i, part in enumerate(parts):
                if _private(part) and not module.startswith(".".join(parts[:i]) + "."):
                    found.append(f"{module}: imports {target}, private to {'.'.join(parts[:i])}")
                    break
    return found


def _module_names(tree: Tree, module: str) -> dict[str, str]:
    """The local names ``module`` binds to project modules: ``import a.b as m`` → ``m``,
    ``from a import b`` (``b`` a module) → ``b``, ``import a.b`` → ``a`` (the dotted rest is read
    from the attribute chain)."""
    path = tree.files[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if tree.is_project(alias.name):
                    if alias.asname:
                        names[alias.asname] = alias.name
                    else:
                        names[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                if f"{source}.{alias.name}" in tree.files:
                    names[alias.asname or alias.name] = f"{source}.{alias.name}"
    return names


def _dotted(node: ast.expr) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def underscore_attributes(tree: Tree) -> list[str]:
    """``m._x`` where ``m`` is another project module (``import steps.git.repo as m``, ``from
    steps.git import repo``, or the dotted ``steps.git.repo._x``): reaching into its private names."""
    found = []
    for module, path in tree.files.items():
        names = _module_names(tree, module)
        if not names:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            chain = _dotted(node.value)
            if not chain or chain[0] not in names:
                continue
            target = ".".join([names[chain[0]], *chain[1:]])
            if target in tree.files and target != module:
                found.append(f"{module}: {target}.{node.attr}")
    return sorted(set(found))


def dag_violations(tree: Tree, may_import: Mapping[str, frozenset[str]] = MAY_IMPORT) -> list[str]:
    """Each import of a package its package may not import (or of a package not in the DAG)."""
    found = []
    for module in tree.files:
        own = unit(module)
        allowed = may_import.get(own, frozenset())
        for dep in tree.depends_on(module):
            other = unit(dep)
            if not tree.is_project(dep) or other == own or dep == "steps":  # steps/__init__: a docstring
                continue
            if own not in may_import:
                found.append(f"{module}: its package {own} is not in MAY_IMPORT")
            elif "*" not in allowed and other not in allowed:
                found.append(f"{module} ({own}) imports {dep} ({other})")
    return found


def loads_forbidden(tree: Tree, modules: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    """``module: name`` for each of ``modules`` that loads (through any project module) a module
    named in ``forbidden`` or inside it."""
    found = []
    for module in modules:
        loaded = tree.loads(module)
        for name in forbidden:
            hits = sorted(m for m in loaded if m == name or m.startswith(f"{name}."))
            if hits:
                found.append(f"{module} loads {hits}")
    return found


#: Where git may run: the git layer. Checked: the steps and the CLI's commands.
GIT_HOME = "steps.git"
GIT_CHECKED = ("steps", "imagebump.commands")


def git_outside_its_home(tree: Tree) -> list[str]:
    """``module:line: what`` for each call that runs git outside :data:`GIT_HOME`: a ``.git(…)``
    method (a clone's own wrapper), ``run_git``, or an argv (list or tuple) whose first item is
    ``"git"`` (``subprocess.run(["git", …])``)."""
    found = []
    for module, path in tree.files.items():
        if unit(module) == GIT_HOME or not any(
            module == p or module.startswith(f"{p}.") for p in GIT_CHECKED
        ):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if isinstance(func, ast.Attribute) and name == "git":
                found.append(f"{module}:{node.lineno}: .git(...)")
            elif name == "run_git":
                found.append(f"{module}:{node.lineno}: run_git(...)")
            elif any(
                isinstance(arg, (ast.List, ast.Tuple))
                and arg.elts
                and isinstance(arg.elts[0], ast.Constant)
                and arg.elts[0].value == "git"
                for arg in node.args
            ):
                found.append(f"{module}:{node.lineno}: a git argv")
    return sorted(found)


TREE = Tree(ROOT)
STEPS = sorted(m for m in TREE.files if unit(m).startswith("steps"))


# --- the rules on this tree ----------------------------------------------------------------------


def test_no_import_circles() -> None:
    assert circles(TREE) == []


def test_no_module_imports_another_modules_underscore_names() -> None:
    assert underscore_imports(TREE) == []


def test_no_module_reaches_into_another_modules_underscore_attributes() -> None:
    assert underscore_attributes(TREE) == []


def test_git_runs_only_in_steps_git() -> None:
    assert git_outside_its_home(TREE) == []


def test_every_package_imports_only_what_the_dag_allows() -> None:
    assert dag_violations(TREE) == []


def test_every_package_has_a_place_in_the_dag() -> None:
    units = {unit(m) for m in TREE.files} - {"steps"}
    assert sorted(units - MAY_IMPORT.keys()) == [], "place the new package in MAY_IMPORT"
    assert sorted(MAY_IMPORT.keys() - units) == [], "MAY_IMPORT names a package that is gone"


def test_render_sits_above_workflows_and_sensors() -> None:
    """Only the CLI and the bench import ``render``; ``render`` imports both halves it renders."""
    importers = {unit(m) for m in TREE.files for d in TREE.depends_on(m) if unit(d) == "render"}
    assert importers - {"render"} <= ABOVE_ALL
    assert {"workflows", "sensors"} <= {
        unit(d) for m in TREE.files if unit(m) == "render" for d in TREE.depends_on(m)
    }


def test_steps_never_load_hera_or_anything_above_them() -> None:
    above = ("hera", "workflows", "sensors", "render", "imagebump", "bench")
    assert loads_forbidden(TREE, STEPS, above) == []


def test_sensors_do_not_load_the_interpreter_or_the_sandbox() -> None:
    sensors = [m for m in TREE.files if unit(m) == "sensors"]
    forbidden = ("workflows.local.interpreter", "workflows.local.sandbox")
    assert loads_forbidden(TREE, sensors, forbidden) == []


def test_top_level_workflows_do_not_load_the_local_runtime() -> None:
    declarations = [m for m in TREE.files if unit(m) == "workflows"]
    assert loads_forbidden(TREE, declarations, ("workflows.local",)) == []


def test_names_and_sensors_do_not_load_hera() -> None:
    modules = ["workflows", "workflows.names", *(m for m in TREE.files if unit(m) == "sensors")]
    assert loads_forbidden(TREE, modules, ("hera",)) == []


def test_importing_steps_names_and_sensors_loads_no_hera() -> None:
    """The same rules at run time, where a third-party import could pull Hera in indirectly."""
    modules = ["workflows.names", *(m for m in TREE.files if unit(m) == "sensors"), *STEPS]
    code = (
        f"import sys, {', '.join(modules)}\n"
        "print(sorted(m for m in sys.modules if m == 'hera' or m.startswith('hera.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- each rule can fail ----------------------------------------------------------------------------


def _write(root: Path, files: Mapping[str, str]) -> Tree:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Tree(root, ("steps", "workflows", "sensors", "render"))


def test_each_rule_can_fail(tmp_path: Path) -> None:
    """A small tree that breaks every rule once: each checker names what breaks it."""
    tree = _write(
        tmp_path,
        {
            "steps/__init__.py": "",
            "steps/domain/__init__.py": "",
            "steps/domain/models.py": "def f():\n    from steps.domain import errors\n",
            "steps/domain/errors.py": "from steps.domain.models import f\n",  # a circle, lazily
            "steps/git/__init__.py": "from steps.git.repo import clone\n",  # a facade: no circle
            "steps/git/repo.py": "from steps.domain.errors import f\n_x = 1\ndef clone(): ...\n",
            "steps/git/_raw.py": "",
            "steps/runtime/__init__.py": "",
            "steps/runtime/harness.py": "from steps.git.repo import _x\nimport steps.git._raw\nimport hera\n",
            "workflows/__init__.py": "",
            "workflows/render_here.py": "from render import manifests\n",
            "sensors/__init__.py": "",
            "render/__init__.py": "",
            "render/manifests.py": "import workflows, sensors\n",
            # m._x across modules, in each way a module can be named
            "steps/forge/__init__.py": "",
            "steps/forge/as_name.py": "from steps.git import repo\nrepo._x\nrepo.clone\n",
            "steps/forge/as_alias.py": "import steps.git.repo as r\nr._x\n",
            "steps/forge/dotted.py": "import steps.git.repo\nsteps.git.repo._x\n",
            "steps/forge/own.py": "_y = 1\nimport steps.forge.own as me\nme._y\n",  # its own: fine
            # git run outside steps/git, in each way (steps/git itself may)
            "steps/forge/runs_git.py": (
                "import subprocess\nfrom steps import git\ndef f(repo):\n"
                "    repo.git('rev-parse', 'HEAD')\n    git.run_git(['log'])\n"
                "    subprocess.run(('git', 'status'))\n    git.clone('u')\n"
            ),
            "steps/git/process.py": "import subprocess\ndef run_git(a):\n    subprocess.run(['git', *a])\n",
        },
    )
    assert circles(tree) == [["steps.domain.errors", "steps.domain.models"]]
    assert underscore_imports(tree) == [
        "steps.runtime.harness: from steps.git.repo import _x",
        "steps.runtime.harness: imports steps.git._raw, private to steps.git",
    ]
    assert underscore_attributes(tree) == [
        "steps.forge.as_alias: steps.git.repo._x",
        "steps.forge.as_name: steps.git.repo._x",
        "steps.forge.dotted: steps.git.repo._x",
    ]
    assert sorted(dag_violations(tree)) == [
        "steps.runtime.harness (steps.runtime) imports steps.git._raw (steps.git)",
        "steps.runtime.harness (steps.runtime) imports steps.git.repo (steps.git)",
        "workflows.render_here (workflows) imports render.manifests (render)",
    ]
    assert git_outside_its_home(tree) == [
        "steps.forge.runs_git:4: .git(...)",
        "steps.forge.runs_git:5: run_git(...)",
        "steps.forge.runs_git:6: a git argv",
    ]
    assert loads_forbidden(tree, ["steps.runtime.harness"], ["hera"]) == [
        "steps.runtime.harness loads ['hera']"
    ]
    render_below_sensors = {**MAY_IMPORT, "render": frozenset({"workflows"})}
    assert "render.manifests (render) imports sensors (sensors)" in dag_violations(tree, render_below_sensors)
    assert dag_violations(
        _write(tmp_path / "new", {"steps/new_step.py": "import steps.domain.models\n"})
    ) == ["steps.new_step: its package steps.new_step is not in MAY_IMPORT"]


# --- what lives where ------------------------------------------------------------------------------


PACKAGE_INITS = sorted(m for m, p in TREE.files.items() if p.name == "__init__.py")


@pytest.mark.parametrize("package", [*PACKAGE_INITS])
def test_every_package_says_what_lives_there(package: str) -> None:
    """Each package's docstring is a paragraph (what lives there and what it may import)."""
    doc = ast.get_docstring(ast.parse(TREE.files[package].read_text())) or ""
    assert len(doc.split()) >= 12, f"{package}: its __init__ needs a docstring saying what lives there"


@pytest.mark.parametrize(
    "package",
    [
        p
        for p in PACKAGE_INITS
        if p == "steps"
        or unit(p).startswith("steps.")
        or p in {"sensors", "workflows", "workflows.local", "render"}
    ],
)
def test_the_package_docstring_names_each_of_its_modules(package: str) -> None:
    """A newcomer reads a package from its ``__init__``: every module and sub-package is named."""
    path = TREE.files[package]
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    names = [p.stem for p in path.parent.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}]
    names += [p.name for p in path.parent.iterdir() if (p / "__init__.py").is_file()]
    unnamed = sorted(n for n in names if f"``{n}``" not in doc and f"``{n}/``" not in doc)
    assert not unnamed, f"{package}/__init__.py does not name {unnamed}"


@pytest.mark.parametrize("step", _STEPS)
def test_every_step_keeps_its_pure_core_in_decide_under_one_name(step: str) -> None:
    """Issue 32: the tree alone says where a step's decision is — ``steps/<step>/decide.py``, its
    pure core named ``decide`` in every step."""
    path = TREE.files.get(f"{step}.decide")
    assert path is not None, f"{step} has no decide.py"
    functions = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
    assert "decide" in functions, f"{step}.decide has no function decide"


def test_the_steps_image_is_named_in_one_place_and_tagged_with_the_project_version() -> None:
    """The image repository is written once (``workflows.names``): no module spells it again, and
        the tag the CLI and the manifests use is the version the source declares once
    (``steps.__version__``, which ``pyproject.toml`` reads and the CLI re-exports)."""
    import imagebump

    repository = "ghcr.io/imagebump/imagebump"
    spelled = sorted(
        module
        for module, path in TREE.files.items()
        if re.search(rf"['\"]{re.escape(repository)}", path.read_text())
    )
    assert spelled == ["workflows.names"]
    source = ast.parse(TREE.files["steps"].read_text())
    (version,) = [
        node.value.value
        for node in source.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
        and isinstance(node.value, ast.Constant)
    ]
    assert imagebump.IMAGE == f"{repository}:{version}"
    assert imagebump.__version__ == version == importlib.metadata.version("imagebump")
    assert 'version = { attr = "steps.__version__" }' in (ROOT / "pyproject.toml").read_text()
