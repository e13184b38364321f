"""The tested set of versions (constraints.txt) stays in step with pyproject.toml: every dependency, extras included,
is pinned there to one exact version that pyproject's bounds allow, and every declared bound has an upper limit
where docs/dependencies.md says it must."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
UNCAPPED = {"pyarrow", "dask", "ruff", "mypy", "pandas-stubs", "types-pyyaml"}
"""Calendar-versioned majors (pyarrow, dask) and pinned-in-CI tools: no upper bound (docs/dependencies.md)."""


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return reqs


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            pins[canonicalize_name(name)] = version
    return pins


def test_every_dependency_is_pinned_within_its_bounds() -> None:
    pins = _pins()
    for req in _requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is a dependency but constraints.txt does not pin it"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {req.specifier}"


def test_bounds_follow_the_policy() -> None:
    for req in _requirements():
        ops = {s.operator for s in req.specifier}
        assert ">=" in ops, f"{req.name}: no lower bound"
        if canonicalize_name(req.name) not in UNCAPPED:
            assert "<" in ops, f"{req.name}: no upper bound below its next major release"
