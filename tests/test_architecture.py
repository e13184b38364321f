"""The rooms only look down: every import of every project module (top level, inside a function, or by name through
``importlib.import_module("...")``) is checked.

- The floor (vocabulary, contracts, registry, catalogue, metric declarations, the single-job spot contract, the
  deadline-replay vocabulary) imports nothing else of the project.
- The engine side of ``sim/`` imports only ``sim``.
- ``optim/`` and ``predictors/`` import only the floor and themselves, never each other.
- Only ``experiments/`` imports everything; inside it the parts are layered: ``scenario`` (what to run) imports no
  other part, ``running`` only ``scenario``, ``results`` only those two, ``runs`` (the one run path) those three,
  ``plots`` those four, ``api`` everything but the command line, and ``cli`` everything.
- ``studies/`` and ``benchmarks/`` (run from the checkout) may import every room; no room imports them or ``tests``.
- No import circle between modules; no module over the size limit; no package over ``MAX_MODULES`` modules without
  subpackages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("sim", "optim", "predictors", "experiments")
OUTSIDE = ("studies", "benchmarks")
"""Checkout-only code: scripts that may import every room and that no room imports."""
PROJECT = (*ROOMS, *OUTSIDE, "tests")
FLOOR = {"sim.model", "sim.frozen", "sim.vocabulary", "sim.vocabulary.resources", "sim.vocabulary.mig", "sim.registry",
         "sim.contracts", "sim.catalogue", "sim.metrics", "sim.spotjob", "sim.risk", "sim.elasticflow.vocabulary"}
LAYERS = ("experiments.scenario", "experiments.running", "experiments.results", "experiments.runs", "experiments.plots",
          "experiments.api", "experiments.cli", "experiments.entry")
"""The parts of ``experiments/``, bottom up: a part imports only the parts below it (and itself)."""
MAX_LINES = 500
MAX_MODULES = 20
DYNAMIC = {
    "experiments.scenario.outside": "a scenario may name an out-of-tree policy as package.module:Class "
                                       "(README, Extending capsim): the user's module, not a project one",
}
"""Modules allowed to import by a computed name (which this checker cannot see), each with the reason."""


def _modules() -> dict[str, Path]:
    out = {}
    for room in (*ROOMS, *OUTSIDE):
        for p in sorted((ROOT / room).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _by_name(node: ast.AST) -> tuple[bool, str | None] | None:
    """For a call of ``importlib.import_module`` or ``__import__``: (True, the literal name) or (True, None) for a
    computed one; None for any other node."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return True, arg.value
    return True, None


def _known(name: str) -> str:
    """The longest prefix of ``name`` that is a module (``from sim import model`` names the module sim.model)."""
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def project_imports(path: Path, module: str) -> set[str]:
    """The project modules ``path`` imports anywhere in its body (relative imports resolved, names given to
    ``importlib.import_module`` as literals included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    computed = any((c := _by_name(n)) is not None and c[1] is None for n in ast.walk(tree))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        elif (call := _by_name(node)) is not None and call[1] is not None:
            names = [call[1]]
        elif computed and isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value \
                and node.value in MODULES:
            names = [node.value]  # a module named as data (a table of commands), imported by a computed name
        for n in names:
            if n.split(".")[0] in PROJECT:
                found.add(_known(n) if n.split(".")[0] != "tests" else n)
    return found


def computed_imports(path: Path) -> int:
    """How many imports by a computed name (``import_module(variable)``) ``path`` makes that this checker cannot
    see: those of a module that names no project module as a text (a table of the modules it imports by name, which
    ``project_imports`` counts as imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    named = any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "." in n.value and n.value in MODULES
                for n in ast.walk(tree))
    return 0 if named else sum(1 for node in ast.walk(tree) if (c := _by_name(node)) is not None and c[1] is None)


def _layer(module: str) -> int | None:
    for i, part in enumerate(LAYERS):
        if module == part or module.startswith(part + "."):
            return i
    return None


def allowed(importer: str, imported: str) -> bool:
    room = importer.split(".")[0]
    target_room = imported.split(".")[0]
    if target_room in (*OUTSIDE, "tests"):
        return room in OUTSIDE  # a benchmark may reuse the tests' instances; no room depends on checkout scripts
    if importer in FLOOR:
        return imported in FLOOR or imported == "sim"
    if room == "sim":
        return target_room == "sim"
    if room in ("optim", "predictors"):
        return target_room == room or imported in FLOOR or imported == "sim"
    if room == "experiments" and target_room == "experiments":
        mine, theirs = _layer(importer), _layer(imported)
        if mine is None or theirs is None:  # the package itself
            return importer == "experiments" or imported == "experiments"
        return theirs <= mine
    return True  # experiments, studies and benchmarks import every room


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_look_down(module: str) -> None:
    bad = sorted(i for i in project_imports(MODULES[module], module) if not allowed(module, i))
    assert not bad, f"{module} imports {bad}, which its room may not (see tests/test_architecture.py)"


def test_the_floor_exists_and_every_floor_module_is_a_real_module() -> None:
    assert FLOOR <= set(MODULES)
    assert all(part in MODULES for part in LAYERS)
    assert {m for m in MODULES if m.startswith("experiments.")} == {
        m for m in MODULES if _layer(m) is not None}, "every module of experiments/ belongs to one of its parts"


def test_the_checker_sees_function_level_relative_and_named_imports(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("def f():\n    import optim.milp\n    from .model import Plan\n    from predictors import base\n"
                   "    importlib.import_module('experiments.cli.run')\n    __import__('studies.gallery')\n")
    computed = tmp_path / "z.py"
    computed.write_text("import importlib\nimportlib.import_module(name)\n")
    text = tmp_path / "w.py"
    text.write_text("import logging\nlog = logging.getLogger('optim.milp')\n")
    table = tmp_path / "y.py"
    table.write_text("COMMANDS = {'run': 'experiments.cli.run'}\nimportlib.import_module(COMMANDS['run'])\n")
    found = project_imports(src, "sim.engine")
    assert {"optim.milp", "sim.model", "predictors.base", "experiments.cli.run", "studies.gallery"} <= found
    assert computed_imports(src) == 0 and computed_imports(computed) == 1
    assert not project_imports(text, "x"), "a text naming a module is an import only beside a computed import"
    assert "experiments.cli.run" in project_imports(table, "experiments.x") and computed_imports(table) == 0
    assert not allowed("sim.engine", "optim.milp") and not allowed("optim.greedy", "predictors.base")
    assert allowed("optim.greedy", "sim.contracts") and not allowed("sim.model", "sim.engine")
    assert not allowed("experiments.results.store", "experiments.cli.run")
    assert not allowed("experiments.scenario.spec", "experiments.running.tasks")
    assert allowed("experiments.cli.sweep", "experiments.running.pool")
    assert not allowed("experiments.api", "studies.gallery") and allowed("studies.gallery", "experiments.api")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_by_a_computed_name_are_declared(module: str) -> None:
    n = computed_imports(MODULES[module])
    assert not n or module in DYNAMIC, (f"{module} imports by a computed name, which tests/test_architecture.py "
                                        f"cannot check: name the module as a literal, or declare it in DYNAMIC")
    assert module not in DYNAMIC or n, f"{module} no longer imports by a computed name: remove it from DYNAMIC"


def _cycles() -> list[list[str]]:
    """The import circles between modules (strongly connected components of the import graph, Tarjan's)."""
    graph = {m: sorted(i for i in project_imports(p, m) if i in MODULES and i != m) for m, p in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    return out


def test_no_import_circle() -> None:
    assert not _cycles(), f"modules importing each other (split or move what they share): {_cycles()}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_the_size_limit(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it by concern (limit {MAX_LINES})"


def test_no_package_is_a_flat_heap() -> None:
    counts = {}
    for room in (*ROOMS, *OUTSIDE):
        for d in [ROOT / room, *(p for p in (ROOT / room).rglob("*") if p.is_dir())]:
            n = sum(1 for p in d.glob("*.py") if p.name != "__init__.py")
            if n > MAX_MODULES:
                counts[str(d.relative_to(ROOT))] = n
    assert not counts, f"packages with more than {MAX_MODULES} modules: {counts}; group them into subpackages"
