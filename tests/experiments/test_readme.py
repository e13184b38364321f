"""The README's examples stay true: its scenario loads, its error example is what capsim prints, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from experiments.scenario import load_scenario
from sim.model import CapsimError

README = Path(__file__).resolve().parents[2] / "README.md"


def scenario_block() -> str:
    m = re.search(r"### A scenario file\n\n```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert m, "README lost its scenario example"
    return m.group(1)


def test_readme_opens_with_the_two_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)\n```", README.read_text(encoding="utf-8"), re.S)
    assert blocks[0] == "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/capsim run"
    assert blocks[1] == "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/pytest -q"
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert blocks[1] in ci


def test_readme_names_the_checks_ci_runs() -> None:
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"^CHECKS=\((.*)\)$", ci, re.M)
    assert m, ".ci/run lost its CHECKS line"
    checks = re.findall(r'"([^"]+)"', m.group(1))
    assert checks == [".venv-tested/bin/ruff check .", ".venv-tested/bin/mypy"]  # in the tested set's environment
    text = README.read_text(encoding="utf-8")
    for check in checks:
        assert f"`{check.replace('.venv-tested/', '.venv/')}`" in text.split("## Development", 1)[1], check
    assert "pip install -c constraints.txt -e '.[test]'" in ci and "constraints.txt" in text.split("## Development")[1]


def test_readme_scenario_example_is_valid(tmp_path: Path) -> None:
    pytest.importorskip("predictors.measured")
    p = tmp_path / "my.yaml"
    p.write_text(scenario_block(), encoding="utf-8")
    sc = load_scenario(p)
    assert sc.cluster.node_count == 5 and [s.label for s in sc.policy_specs()] == ["fifo", "edf", "milp-1k"]


def test_readme_error_example_matches(tmp_path: Path) -> None:
    pytest.importorskip("predictors.measured")
    text = scenario_block().replace("  mean_interarrival: 30", "  mean_interarival: 30", 1)
    text = text.replace("  - kind: edf\n", "  - kind: edff\n", 1)
    p = tmp_path / "my.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(CapsimError) as e:
        load_scenario(p)
    got = str(e.value)
    shown = re.search(r"```text\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    for line in shown.strip().splitlines()[1:]:
        where = line.split(": unknown")[0].strip()
        assert where.replace("my.yaml", str(p)) in got, where
