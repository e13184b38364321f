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
    assert sc.cluster.node_count == 6 and [s.label for s in sc.policy_specs()] == ["fifo", "edf", "milp-1k"]
    c = sc.build_cluster()
    assert sum(s.fixed for s in c.slots) == 2 and c.rules.owned_price_per_hour == {"gtx1080ti": 1.13}


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


def _extending_blocks() -> tuple[str, str]:
    text = README.read_text(encoding="utf-8").split("## Extending capsim", 1)[1]
    code = re.search(r"```python\n(.*?)```", text, re.S)
    scenario = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert code and scenario, "README's Extending capsim lost its worked example"
    return code.group(1), scenario.group(1)


def test_the_out_of_tree_policy_of_the_readme_runs_from_its_scenario_and_conforms(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    code, scenario = _extending_blocks()
    (tmp_path / "my_policies.py").write_text(code, encoding="utf-8")
    (tmp_path / "deadline_first.yaml").write_text(scenario, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    capsim = Path(sys.executable).parent / "capsim"
    r = subprocess.run([str(capsim), "run", "deadline_first.yaml", "--out", str(tmp_path / "out"), "--quiet"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines() if line.startswith(("deadline", "edf"))}
    assert rows["deadline_first"] == rows["edf"], "the README says the two rows agree (the same rule)"
    checked = subprocess.run([sys.executable, "-c", "from my_policies import DeadlineFirst\n"
                              "from sim.testing import check_policy\n"
                              "check_policy(DeadlineFirst()); check_policy(DeadlineFirst(spot=False))"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("kind, words", [
    ("no_such_module:X", "cannot import the module 'no_such_module'"),
    ("sim.model:Plann", "the module 'sim.model' has no 'Plann'"),
    ("sim.model:Plan", "'Plan' is not a policy class"),
    ("optim.baselines:EDF", None),
])
def test_an_out_of_tree_policy_name_is_checked(tmp_path: Path, kind: str, words: str | None) -> None:
    pytest.importorskip("predictors.measured")
    p = tmp_path / "my.yaml"
    p.write_text(f"name: x\nworkload: {{jobs: 3}}\npolicies:\n  - {{kind: '{kind}'}}\n", encoding="utf-8")
    if words is None:
        assert load_scenario(p).policy_specs()[0].kind == kind
        return
    with pytest.raises(CapsimError, match=re.escape(words)):
        load_scenario(p)
