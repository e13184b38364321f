"""Parameters are documented once, in the component's docstrings (the class's, its constructor's or its module's),
and the tables of README and docs/heuristics.md that list parameters and defaults agree with ``param_defaults()``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import optim
import predictors
from sim.traces import registry as trace_formats

ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = {f"{what} {kind}": cls for what, reg in (("policy", optim.registry(aliases=False)),
                                                       ("predictor", predictors.registry(aliases=False)),
                                                       ("trace format", trace_formats(aliases=False)))
              for kind, cls in reg.items()}


def _docs(cls: type) -> str:
    """Every docstring that documents ``cls``'s parameters: its own, its constructor's, its module's, and those of
    the project classes it derives from."""
    parts = []
    for c in cls.__mro__:
        if c.__module__.split(".")[0] in ("sim", "optim", "predictors"):
            parts += [c.__doc__ or "", c.__dict__.get("__init__", object).__doc__ or "",
                      inspect.getmodule(c).__doc__ or ""]
    return "\n".join(parts)


@pytest.mark.parametrize("component", sorted(COMPONENTS))
def test_every_parameter_is_documented_in_a_docstring(component: str) -> None:
    cls = COMPONENTS[component]
    docs = _docs(cls)
    missing = [n for n in cls.param_names() if not re.search(rf"``{n}\b", docs)]
    assert not missing, f"{component}: parameters {missing} are not described in its docstrings (``{missing[0]}``)"


def test_the_heuristics_parameter_table_gives_the_defaults() -> None:
    text = (ROOT / "docs" / "heuristics.md").read_text(encoding="utf-8")
    header = "| parameter | `random_greedy` | `local_search` | `path_relinking` | meaning |"
    assert header in text, "docs/heuristics.md lost its parameter table"
    kinds = ("random_greedy", "local_search", "path_relinking")
    rows = text.split(header, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    seen = set()
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        name = cells[0].strip("`")
        seen.add(name)
        for kind, cell in zip(kinds, cells[1:4]):
            defaults = optim.registry()[kind].param_defaults()
            if not cell:
                assert name not in defaults, f"{kind} takes {name}: the table leaves its cell empty"
            elif re.fullmatch(r"[\d.]+", cell):
                assert defaults[name] == float(cell), f"{kind}.{name}: the table says {cell}, the default is " \
                                                      f"{defaults[name]}"
            else:
                assert name in defaults or cell.startswith("("), f"{kind}.{name}: {cell!r}"
    assert seen == {n for k in kinds for n in optim.registry()[k].param_names()}, "a parameter is missing"


def test_readme_names_only_real_policy_parameters_with_their_defaults() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("| `policies[].kind` | what it does | main parameters |", 1)[1].split("\n\n", 1)[0]
    for row in table.splitlines()[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        kinds = [k for k in re.findall(r"`([a-z_]+)`", cells[0]) if k in optim.registry()]
        for name, note in re.findall(r"`([a-z_]+)`( \([^)]*\))?", cells[2]):
            classes = [optim.registry()[k] for k in kinds]
            assert any(name in c.param_names() for c in classes), f"README lists {name} for {kinds}"
            said = re.search(r"default ([\d.]+)", note)
            if said:
                for c in classes:
                    assert c.param_defaults()[name] == float(said.group(1)), f"{c.name}.{name}"
