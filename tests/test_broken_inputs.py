"""A corpus of broken inputs, the mistakes users make with scenario and sweep files, trace CSVs and result folders:
each must end with a non-zero exit (2: a mistake in the input, never 3: a defect), no traceback, and one message
that names the file at fault.

Each case writes its files into a fresh folder (the working directory during the case) from ``SCENARIO``, a small
valid scenario, changed in one place; ``argv`` is the command line, with ``{d}`` for that folder.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from experiments.cli import main

RUNTIMES = {"J1/NC6/1": 400.0, "J1/NC12/1": 400.0, "J1/NC12/2": 250.0, "J4/NC6/1": 900.0, "J4/NC12/1": 900.0,
            "J4/NC12/2": 500.0, "/NC6/1": 300.0}
SCENARIO: dict[str, Any] = {
    "name": "tiny",
    "cluster": {"nodes": 2, "vm_types": ["NC6", "NC12"]},
    "workload": {"jobs": 6, "mean_interarrival": 60, "mix": {"J1": 1, "J4": 1}},
    "predictor": {"kind": "table", "table": RUNTIMES},
    "policies": [{"kind": "fifo"}, {"kind": "edf"}],
    "seeds": [0, 1],
}
TRACE_HEAD = "submit_time,application,framework,iterations,batch_size,name\n"
GOOD_ROW = "0,deepspeech,tensorflow,2528,4,J1\n"


@dataclass
class Case:
    id: str
    files: dict[str, str | bytes]
    argv: list[str]
    names: str
    """The file the message must name (its name, or a path relative to the case's folder)."""
    setup: Callable[[Path], None] | None = field(default=None, repr=False)


CASES: list[Case] = []


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def scenario(change: Callable[[dict], Any] | None = None) -> str:
    d = copy.deepcopy(SCENARIO)
    if change:
        change(d)
    return dump(d)


def setter(path: str, value: Any) -> Callable[[dict], None]:
    def change(d: dict) -> None:
        *parents, last = path.split(".")
        cur = d
        for p in parents:
            cur = cur.setdefault(p, {})
        if value is _DELETE:
            cur.pop(last, None)
        else:
            cur[last] = value
    return change


_DELETE = object()


def run_case(id: str, text: str | bytes, names: str = "s.yaml", **files: str | bytes) -> None:
    CASES.append(Case(id, {"s.yaml": text, **files}, ["run", "s.yaml", "--workers", "1", "--quiet"], names))


def bad(id: str, path: str, value: Any) -> None:
    run_case(id, scenario(setter(path, value)))


# ----- scenario files: the file itself ------------------------------------------------------------------------------
CASES.append(Case("missing-file", {}, ["run", "nope.yaml"], "nope.yaml"))
CASES.append(Case("scenario-is-a-folder", {"sc/keep": "x"}, ["run", "sc"], "sc"))
run_case("empty-file", "")
run_case("only-comments", "# a scenario\n# to be written\n")
run_case("binary-file", bytes(range(256)) * 4)
run_case("utf16-with-bom", "name: tiny\n".encode("utf-16"))
run_case("latin1-accent", "name: tiny\n# cr\xe9\xe9 par moi\n".encode("latin-1"))
run_case("unclosed-bracket", "name: tiny\ncluster: {nodes: 2, vm_types: [NC6\n")
run_case("tab-indentation", "name: tiny\ncluster:\n\tnodes: 2\n")
run_case("top-level-list", "- name: tiny\n- cluster: {nodes: 2}\n")
run_case("top-level-scalar", "hello\n")
run_case("two-documents", scenario() + "---\n" + scenario())
run_case("duplicate-key", scenario() + "workload: {jobs: 3}\n")
run_case("unknown-top-key", scenario(lambda d: d.update(workoad=d.pop("workload"))))
run_case("python-tag", "name: !!python/object/apply:os.system ['echo hi']\n")
run_case("custom-tag", "name: tiny\ncluster: !include cluster.yaml\n")
run_case("billion-laughs", "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, c in zip([None, *"abcdefgh"], "abcdefghi")))
run_case("recursive-alias", "name: tiny\nloop: &a [1, *a]\n")
run_case("deep-nesting", "name: tiny\nx: " + "[" * 120 + "]" * 120 + "\n")
run_case("huge-file", "name: tiny\n" + "# padding\n" * 300_000)

# ----- scenario files: fields ---------------------------------------------------------------------------------------
bad("name-escapes", "name", "../../escaped")
bad("name-absolute", "name", "/tmp/capsim-absolute")
bad("name-empty", "name", "")
bad("jobs-beyond-memory", "workload.jobs", 100_000_000)  # refused before it runs, with the estimate and the limit
bad("name-with-space", "name", "my run")
bad("name-dot", "name", ".")
bad("nodes-zero", "cluster.nodes", 0)
bad("nodes-yes", "cluster.nodes", True)
bad("nodes-fraction", "cluster.nodes", 2.5)
bad("nodes-empty-groups", "cluster.nodes", [])
bad("nodes-group-count-zero", "cluster.nodes", [{"count": 0}])
bad("jobs-text", "workload.jobs", "ten")
bad("jobs-zero", "workload.jobs", 0)
bad("interarrival-inf", "workload.mean_interarrival", float("inf"))
bad("interarrival-nan", "workload.mean_interarrival", float("nan"))
bad("interarrival-negative", "workload.mean_interarrival", -5)
bad("interarrival-quoted", "workload.mean_interarrival", "30")
bad("decision-interval-yes", "cluster.decision_interval", True)
bad("decision-interval-zero", "cluster.decision_interval", 0)
bad("billing-quantum-huge", "cluster.billing_quantum", 1.0e12)
bad("billing-quantum-negative", "cluster.billing_quantum", -60)
bad("billing-quantum-1e3-text", "cluster.billing_quantum", "1e3")
bad("restart-overhead-inf", "cluster.restart_overhead", float("inf"))
bad("vm-type-unknown", "cluster.vm_types", ["NC7"])
bad("vm-types-empty", "cluster.vm_types", [])
bad("vm-type-twice", "cluster.vm_types", ["NC6", "NC6"])
bad("inline-vm-no-gpus", "cluster.vm_types", [{"name": "mine", "gpu": "K80", "price_per_hour": 1.0}])
bad("inline-vm-price-inf", "cluster.vm_types", [{"name": "mine", "gpu": "K80", "gpus": 1,
                                                   "price_per_hour": float("inf")}])
bad("inline-vm-unknown-gpu", "cluster.vm_types", [{"name": "mine", "gpu": "K81", "gpus": 1, "price_per_hour": 1.0}])
bad("slot-group-foreign-vm", "cluster.nodes", [{"count": 2, "vm_types": ["NC24"]}])
bad("mix-unknown-job", "workload.mix", {"J1": 1, "J99": 1})
bad("mix-weight-zero", "workload.mix", {"J1": 0})
bad("mix-weight-yes", "workload.mix", {"J1": True})
bad("mix-weight-inf", "workload.mix", {"J1": float("inf")})
bad("mix-empty", "workload.mix", {})
bad("mix-infeasible-under-truth", "workload.mix", {"J1": 1, "J2": 1})
bad("deadline-factor-reversed", "workload.deadline_factor", [3, 1])
bad("deadline-factor-single", "workload.deadline_factor", [2])
bad("weight-range-nan", "workload.weight_range", [float("nan"), 1])
bad("seeds-negative", "seeds", -1)
bad("seeds-twice", "seeds", [0, 0])
bad("seeds-reversed-range", "seeds", "5-2")
bad("seeds-huge-range", "seeds", "0-99999999")
bad("seeds-booleans", "seeds", [True])
bad("seeds-empty", "seeds", [])
bad("policies-empty", "policies", [])
bad("policy-unknown", "policies", [{"kind": "fifoo"}])
bad("policy-unknown-parameter", "policies", [{"kind": "milp", "time_limt": 5}])
bad("policy-number-parameter-yes", "policies", [{"kind": "milp", "time_limit": True}])
bad("policy-names-twice", "policies", [{"kind": "fifo"}, {"kind": "fifo"}])
bad("policies-a-mapping", "policies", {"kind": "fifo"})
bad("predictor-unknown", "predictor", {"kind": "measurd"})
bad("predictor-unknown-parameter", "predictor", {"kind": "noisy", "base": {"kind": "measured"}, "mape": 0.1,
                                                  "sigma": 2})
run_case("trace-with-poisson-fields", scenario(setter("workload.trace", "jobs.csv")),
         **{"jobs.csv": TRACE_HEAD + GOOD_ROW})

# ----- trace CSV files ----------------------------------------------------------------------------------------------


def trace_case(id: str, csv: str | bytes, names: str = "jobs.csv", trace: Any = "jobs.csv") -> None:
    def change(d: dict) -> None:
        d["workload"] = {"trace": trace}
    run_case(id, scenario(change), names, **{"jobs.csv": csv})


trace_case("trace-missing", TRACE_HEAD, trace="nope.csv", names="nope.csv")
trace_case("trace-empty-file", "")
trace_case("trace-header-only", TRACE_HEAD)
trace_case("trace-time-text", TRACE_HEAD + "soon,deepspeech,tensorflow,2528,4,J1\n")
trace_case("trace-time-negative", TRACE_HEAD + "-5,deepspeech,tensorflow,2528,4,J1\n")
trace_case("trace-time-infinite", TRACE_HEAD + GOOD_ROW + "1e999,deepspeech,tensorflow,2528,4,J1\n")
trace_case("trace-missing-column", "submit_time,application,framework,iterations\n0,deepspeech,tensorflow,2528\n")
trace_case("trace-column-twice", "submit_time,application,framework,iterations,batch_size,submit_time\n"
           "0,deepspeech,tensorflow,2528,4,5\n")
trace_case("trace-bad-framework", TRACE_HEAD + "0,deepspeech,jax,2528,4,J1\n")
trace_case("trace-iterations-zero", TRACE_HEAD + "0,deepspeech,tensorflow,0,4,J1\n")
trace_case("trace-empty-cell", TRACE_HEAD + "0,deepspeech,tensorflow,,4,J1\n")
trace_case("trace-unknown-application", TRACE_HEAD + GOOD_ROW + "5,bert,pytorch,100,4,B1\n")
trace_case("trace-binary", bytes(range(256)) * 8)
trace_case("trace-deadline-before-submit", "submit_time,application,framework,iterations,batch_size,name,deadline\n"
           "100,deepspeech,tensorflow,2528,4,J1,50\n")
trace_case("trace-unknown-format", TRACE_HEAD + GOOD_ROW, trace={"path": "jobs.csv", "format": "cvs"}, names="s.yaml")
trace_case("trace-is-a-folder", TRACE_HEAD, trace=".", names="s.yaml")

# ----- sweep files ----------------------------------------------------------------------------------------------------


def sweep(**over: Any) -> str:
    base = {k: v for k, v in SCENARIO.items() if k not in ("policies", "seeds", "name")}
    d = {"name": "sw", "scenario": base, "policies": [{"kind": "fifo"}], "seeds": [0, 1],
         "grid": {"cluster.nodes": [1, 2]}}
    d.update(over)
    return dump({k: v for k, v in d.items() if v is not _DELETE})


def sweep_case(id: str, text: str, names: str = "w.yaml", **files: str) -> None:
    CASES.append(Case(id, {"w.yaml": text, **files}, ["sweep", "w.yaml", "--workers", "1", "--quiet"], names))


sweep_case("grid-unknown-field", sweep(grid={"cluster.nodez": [1, 2]}))
sweep_case("grid-empty-values", sweep(grid={"cluster.nodes": []}))
sweep_case("grid-bad-value", sweep(grid={"cluster.nodes": [2, -1]}))
sweep_case("grid-over-seeds", sweep(grid={"seeds": [[0], [1]]}))
sweep_case("grid-not-a-mapping", sweep(grid=[{"cluster.nodes": [1, 2]}]))
sweep_case("grid-too-large", sweep(grid={"workload.jobs": list(range(1, 501)), "cluster.nodes": list(range(1, 201))}))
sweep_case("zip-unequal", sweep(grid={}, zip=[{"cluster.nodes": [1, 2], "workload.jobs": [3]}]))
sweep_case("extends-missing", sweep(extends="base.yaml"), names="base.yaml")
sweep_case("extends-cycle", sweep(extends="w.yaml"))
sweep_case("scenario-path-missing", sweep(scenario="other.yaml"), names="other.yaml")
sweep_case("sweep-name-escapes", sweep(name="../../x"))
sweep_case("sweep-unknown-key", sweep(gird={"cluster.nodes": [1]}))
sweep_case("sweep-seeds-twice", sweep(seeds="0,1,1"))
sweep_case("sweep-policies-twice", sweep(policies=[{"kind": "edf"}, {"kind": "edf"}]))
sweep_case("sweep-billion-laughs", "name: sw\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
    for p, c in zip([None, *"abcdefgh"], "abcdefghi")))

# ----- result folders -------------------------------------------------------------------------------------------------


def _a_run(d: Path) -> None:
    (d / "s.yaml").write_text(scenario(setter("seeds", [0])))
    assert main(["run", str(d / "s.yaml"), "--out", str(d / "res"), "--workers", "1", "--quiet",
                 "--policies", "fifo"]) == 0


def _damage_manifest(text: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        _a_run(d)
        (d / "res" / "manifest.json").write_text(text)
    return setup


def _damage_every_run(d: Path) -> None:
    _a_run(d)
    for p in (d / "res" / "summary").glob("*.parquet"):
        p.write_bytes(p.read_bytes()[:-20])


CASES += [
    Case("report-missing-folder", {}, ["report", "nowhere"], "nowhere"),
    Case("report-on-a-file", {"f.txt": "x"}, ["report", "f.txt"], "f.txt"),
    Case("report-not-a-result-folder", {"plain/notes.txt": "x"}, ["report", "plain"], "plain"),
    Case("report-older-flat-folder", {"flat/jobs.parquet": b"", "flat/summary.csv": "a\n"}, ["report", "flat"], "flat"),
    Case("report-manifest-not-json", {}, ["report", "res"], "manifest.json", _damage_manifest("{oops")),
    Case("report-manifest-a-list", {}, ["report", "res"], "manifest.json", _damage_manifest("[1, 2]")),
    Case("report-every-run-damaged", {}, ["report", "res"], "res", _damage_every_run),
    Case("plot-every-run-damaged", {}, ["plot", "res", "--only", "pareto"], "res", _damage_every_run),
    Case("report-output-is-a-folder", {}, ["report", "res", "-o", "res"], "res", _a_run),
    Case("run-out-is-a-file", {"s.yaml": scenario(), "taken": "x"}, ["run", "s.yaml", "--out", "taken"], "taken"),
    Case("run-out-holds-other-files", {"s.yaml": scenario(), "docs/paper.tex": "x"},
         ["run", "s.yaml", "--out", "docs"], "docs"),
    Case("sweep-out-older-flat-folder", {"w.yaml": sweep(), "old/jobs.parquet": b""},
         ["sweep", "w.yaml", "--out", "old"], "old"),
    Case("sweep-out-manifest-damaged", {"w.yaml": sweep()}, ["sweep", "w.yaml", "--out", "res"], "manifest.json",
         _damage_manifest('{"run_ids": 5}')),
]


def test_the_corpus_is_large_and_its_cases_distinct() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) and len(CASES) >= 60
    assert {"run", "sweep", "report", "plot"} <= {c.argv[0] for c in CASES}
    assert any("jobs.csv" in c.files for c in CASES) and any(c.setup for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_broken_input_gives_one_clear_error(case: Case, tmp_path: Path, monkeypatch, capsys) -> None:
    for name, content in case.files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    monkeypatch.chdir(tmp_path)
    if case.setup:
        case.setup(tmp_path)
        capsys.readouterr()
    outside = [Path("/tmp/capsim-absolute"), tmp_path.parent / "escaped"]
    before = [p.exists() for p in outside]
    code = main(list(case.argv))
    err = capsys.readouterr().err
    assert code == 2, f"exit {code}, expected 2 (a mistake in the input): {err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.startswith("capsim: ") and case.names in err, f"the message must name {case.names}: {err}"
    assert [p.exists() for p in outside] == before, "nothing is written outside the case's folder"


REAL = ["binary-file", "billion-laughs", "trace-header-only", "report-manifest-not-json", "run-out-is-a-file"]


@pytest.mark.parametrize("case_id", REAL)
def test_a_real_process_prints_no_traceback(case_id: str, tmp_path: Path) -> None:
    """The same through the console script: a separate process, so nothing is caught by the test's own handlers."""
    case = next(c for c in CASES if c.id == case_id)
    for name, content in case.files.items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    if case.setup:
        case.setup(tmp_path)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "experiments.cli", *case.argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and case.names in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 3, proc.stderr


def test_the_corpus_manifest_cases_exercise_json(tmp_path: Path) -> None:
    """The damaged-manifest cases start from a folder a real run wrote (the setup is a valid run)."""
    _a_run(tmp_path)
    assert json.loads((tmp_path / "res" / "manifest.json").read_text())["kind"] == "run"
