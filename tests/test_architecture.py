"""The rooms only look down: every import of every project module (top level or inside a function) is checked.

- The floor (vocabulary, contracts, registry, catalogue, metric declarations, the replay vocabulary) imports nothing
  else of the project.
- The engine side of ``sim/`` imports only ``sim``.
- ``optim/`` and ``predictors/`` import only the floor and themselves, never each other.
- Only ``experiments/`` imports everything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("sim", "optim", "predictors", "experiments")
FLOOR = {"sim.model", "sim.registry", "sim.contracts", "sim.catalogue", "sim.metrics", "sim.elastic"}
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for room in ROOMS:
        for p in sorted((ROOT / room).rglob("*.py")):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def project_imports(path: Path, module: str) -> set[str]:
    """The project modules ``path`` imports anywhere in its body (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
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
        for n in names:
            if n.split(".")[0] in ROOMS:
                # ``from sim import model`` names the module sim.model; keep the longest name that is a module
                found.add(n if n in MODULES else n.rpartition(".")[0] if n.rpartition(".")[0] in MODULES else n)
    return found


def allowed(importer: str, imported: str) -> bool:
    room = importer.split(".")[0]
    target_room = imported.split(".")[0]
    if importer in FLOOR:
        return imported in FLOOR or imported == "sim"
    if room == "sim":
        return target_room == "sim"
    if room in ("optim", "predictors"):
        return target_room == room or imported in FLOOR or imported == "sim"
    return True  # experiments: the lab imports everything


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_only_look_down(module: str) -> None:
    bad = sorted(i for i in project_imports(MODULES[module], module) if not allowed(module, i))
    assert not bad, f"{module} imports {bad}, which its room may not (see tests/test_architecture.py)"


def test_the_floor_exists_and_every_floor_module_is_a_real_module() -> None:
    assert FLOOR <= set(MODULES)


def test_the_checker_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    src = tmp_path / "x.py"
    src.write_text("def f():\n    import optim.milp\n    from .model import Plan\n    from predictors import base\n")
    found = project_imports(src, "sim.engine")
    assert {"optim.milp", "sim.model", "predictors.base"} <= found
    assert not allowed("sim.engine", "optim.milp") and not allowed("optim.greedy", "predictors.base")
    assert allowed("optim.greedy", "sim.contracts") and not allowed("sim.model", "sim.engine")


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_the_size_limit(module: str) -> None:
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{module} has {lines} lines; split it by concern (limit {MAX_LINES})"
