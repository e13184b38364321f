"""stdout holds a command's results and nothing else: every ``capsim`` command is run as a user runs it (its own
process, file descriptors 1 and 2 captured, so text a solver's C library writes is caught too), and each stdout line
must be part of what that command documents (its table, its files, its predictions); banners, solver logs, progress
and warnings go to stderr. The HiGHS banner (highspy prints it when a process makes its first solver object) used to
reach stdout once per worker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = """\
name: tiny
cluster: {nodes: 2}
workload: {jobs: 6, mean_interarrival: 30}
predictor: {kind: measured}
policies: [{kind: edf}, {kind: milp}]
seeds: [0]
"""

SWEEP = """\
name: tinysweep
scenario:
  cluster: {nodes: 2}
  workload: {jobs: 6, mean_interarrival: 30}
  predictor: {kind: measured}
policies: [{kind: edf}, {kind: milp}]
seeds: [0, 1]
grid:
  workload.mean_interarrival: [30, 60]
"""

NOISE = re.compile(
    r"HiGHS|Copyright|THIRD_PARTY|licen[cs]e|Welcome to the CBC|Set parameter|Gurobi|"  # solver banners and logs
    r"\[#+\.*\]|ETA|elapsed|splits done|"  # progress
    r"Traceback|Warning|WARNING|INFO:|DEBUG:",  # Python warnings, logging, tracebacks
)

# What each command documents on stdout, line by line (blank lines aside).
TABLE_ROW = r"[\w.\-]+( {2,}[\w.\-()$%, ]+)+"
RUN = [r"\w+: \d+ polic.*", r"policy +seeds +total cost.*", r"[- ]+", TABLE_ROW, r"\d+ runs in [\d.]+ s; results in .*"]
SWEEP_DONE = [r"sweep \w+: \d+ runs finished in .*", r"next: capsim report .* and +capsim plot .*",
              r"[\w./-]+/?"]  # the result folder, for a script to read
REPORT_NOTES = [r"\*?cells: mean \[.*", r"\*?runs: .*", r"\*?warning: only \d+ runs behind some cells.*",
                r"\*?warning: a wall-clock time limit stopped decisions .*"]
REPORT = {
    "table": [r"mean inter-arrival.*policy.*", r"[- ]+", r"(30|60) +\w+ +\d+ .*", *REPORT_NOTES],
    "markdown": [r"\|.*\|", *REPORT_NOTES],
    "csv": [r"workload\.mean_interarrival,policy,.*", r"(30|60),\w+,\d+,.*"],
    "latex": [r"%.*", r"\\(begin|end)\{tabular\}.*", r"\\(top|mid|bottom)rule", r".* & .* \\\\"],
}
METRICS_LIST = [r"metric +label +digits +better.*", r"[- ]+", r"\w+ {2,}.*"]
PLOT = [r".*/figures/cost_breakdown\.(png|pdf)"]
SHOW = [r"resnet50/pytorch batch 64, 100 iterations on 1 x V100; the interval .*", r"  \w+ +.*"]
PARETO = [r"resnet50/pytorch batch 64, 100 iterations: .*", r"[* ] .*", r"wrote .*"]
CROSSGPU = [r"speed ∝ .*", r"\|.*\|", r"[A-Z].*"]
EVALUATE = [r"Mean MAPE % .*", r"predictor .*", r"protocol.*", r" *\w+ .*", r"\|.*\|", r"wrote .*|.*results.*"]
VERSION = [r"capsim \S+"]
SPOT = [r" *strategy +.*", r" *\w+(\(variant='\w+'\))? +[\w.+\-]+( +[\w.+\-]+)+", r"agreement with .* \(\d+ runs\):",
        r"results in .*"]


def _stray(out: str, allowed: list[str]) -> list[str]:
    """stdout lines that are noise or match none of ``allowed``."""
    pats = [re.compile(p) for p in allowed]
    return [line for line in out.splitlines()
            if line.strip() and (NOISE.search(line) or not any(p.fullmatch(line) for p in pats))]


def _capsim(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


_DRIVER = """
import ctypes, json, os, sys
from experiments.cli import main
out = {}
for i, argv in enumerate(json.loads(sys.argv[1])):
    files = [open(f"o{i}", "w+"), open(f"e{i}", "w+")]
    saved = [os.dup(1), os.dup(2)]
    sys.stdout.flush(); sys.stderr.flush()
    os.dup2(files[0].fileno(), 1); os.dup2(files[1].fileno(), 2)
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    sys.stdout.flush(); sys.stderr.flush(); ctypes.CDLL(None).fflush(None)
    os.dup2(saved[0], 1); os.dup2(saved[1], 2)
    out[" ".join(argv)] = [code, *(open(f"{s}{i}").read() for s in "oe")]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("stdout")
    (d / "tiny.yaml").write_text(TINY)
    (d / "tinysweep.yaml").write_text(SWEEP)
    return d


@pytest.fixture(scope="module")
def swept(folder: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    proc = _capsim(["sweep", "tinysweep.yaml", "--out", "s", "--workers", "2"], folder)
    assert proc.returncode == 0, proc.stderr
    return folder / "s", proc


def test_sweep_on_a_pool_prints_only_its_closing_lines(swept: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    _, proc = swept
    assert _stray(proc.stdout, SWEEP_DONE) == []
    assert proc.stdout.strip() and "8 to run" in proc.stderr  # results out; progress and header err


@pytest.mark.parametrize("workers", ["1"])  # in this process; the sweep above covers pool workers
def test_run_prints_only_its_table(folder: Path, workers: str) -> None:
    proc = _capsim(["run", "tiny.yaml", "--out", f"r{workers}", "--workers", workers], folder)
    assert proc.returncode == 0, proc.stderr
    assert _stray(proc.stdout, RUN) == []
    assert re.search(r"^milp +1 ", proc.stdout, re.M)


def test_every_other_command_prints_only_its_results(swept: tuple[Path, subprocess.CompletedProcess[str]],
                                                     folder: Path) -> None:
    commands = {
        **{f"report s --format {f}": (["report", "s", "--format", f], REPORT[f]) for f in REPORT},
        "report s --metrics list": (["report", "s", "--metrics", "list"], METRICS_LIST),
        "plot s --only cost_breakdown": (["plot", "s", "--only", "cost_breakdown"], PLOT),
        "predict show": (["predict", "show", "resnet50_pt", "--gpu", "V100", "--batch", "64", "--iterations", "100"],
                         SHOW),
        "predict pareto": (["predict", "pareto", "resnet50_pt", "--batch", "64", "--iterations", "100", "--out", "pp"],
                           PARETO),
        "predict crossgpu": (["predict", "crossgpu"], CROSSGPU),
        "predict evaluate": (["predict", "evaluate", "--out", "pe", "--protocols", "gpus", "--predictors",
                              "analytical", "--workers", "1"], EVALUATE),
        "spot": (["spot", str(ROOT / "experiments" / "spot" / "cantbelate.yaml"), "--out", "sp"], SPOT),
        "--version": (["--version"], VERSION),
    }
    proc = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps([argv for argv, _ in commands.values()])],
                          cwd=folder, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.splitlines()[-1])
    for name, (argv, allowed) in commands.items():
        code, out, err = results[" ".join(argv)]
        assert code in (0, None), f"{name}: exit {code}: {err}"
        assert out.strip(), f"{name}: printed no result"
        assert _stray(out, allowed) == [], f"capsim {name}: stdout lines it does not document"


def test_the_first_solver_of_a_process_prints_no_banner() -> None:
    code = "from optim.highs import new_highs; new_highs(); import highspy; highspy.Highs(); print('done')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n"


def test_every_highs_object_is_made_by_new_highs() -> None:
    """A module that makes its own ``highspy.Highs()`` may be the process's first and print the banner on stdout."""
    own = [p for room in ("sim", "optim", "predictors", "experiments", "studies")
           for p in (ROOT / room).rglob("*.py") if "Highs()" in p.read_text(encoding="utf-8")]
    assert [p.relative_to(ROOT).as_posix() for p in own] == ["optim/highs.py"]
