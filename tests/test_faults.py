"""Faults, with real processes and real signals: workers die with the command that started them (SIGKILL or SIGTERM
to it), a second sweep into a busy folder is refused, and (``-m slow``) a sweep SIGKILLed at 20 random points loses
nothing, leaves nothing damaged, redoes nothing that had finished and leaves no process behind. A damaged result file
found and run again is in ``tests/experiments/test_hardening.py``.

The sweeps use ``tests.fault_sweep``: the command line plus a ``sleepy`` policy (FIFO that sleeps at each decision),
so they last long enough to be killed part-way.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml

import tests.fault_sweep  # noqa: F401  (registers `sleepy` here too, for validation)
from experiments.cli import main
from experiments.results.folders import LOCK
from experiments.results.reading import read_results
from experiments.results.store import ResultStore

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads processes from /proc")

ROOT = Path(__file__).resolve().parents[1]
RUNTIMES = {"J1/NC6/1": 400.0, "J1/NC12/1": 400.0, "J1/NC12/2": 250.0, "J4/NC6/1": 900.0, "J4/NC12/1": 900.0,
            "J4/NC12/2": 500.0}


def sweep_file(d: Path, seeds: str = "0-9") -> Path:
    data = {"name": "faults",
            "scenario": {"cluster": {"nodes": 2, "vm_types": ["NC6", "NC12"]},
                         "workload": {"jobs": 6, "mean_interarrival": 60, "mix": {"J1": 1, "J4": 1}},
                         "predictor": {"kind": "table", "table": RUNTIMES}},
            "policies": [{"kind": "sleepy"}, {"kind": "edf"}], "seeds": seeds,
            "grid": {"cluster.nodes": [1, 2]}}
    path = d / "faults.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def start(f: Path, out: Path, sleepy: float, log: Path, *how: str) -> subprocess.Popen:
    env = {**os.environ, "CAPSIM_SLEEPY": str(sleepy), "PYTHONPATH": str(ROOT),
           "DASK_DISTRIBUTED__WORKER__PRELOAD": '["tests.fault_sweep"]'}  # Dask's workers know `sleepy` too
    with open(log, "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.fault_sweep", "sweep", str(f), "--out", str(out),
                                 *(how or ("--workers", "2")), "--quiet"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)


def processes_of(out: Path) -> set[int]:
    """Live processes whose command line names ``out`` (the command and the workers it forked)."""
    found = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if str(out).encode() in (d / "cmdline").read_bytes() and alive(int(d.name)):
                found.add(int(d.name))
        except OSError:
            pass
    return found


def alive(pid: int) -> bool:
    try:
        return b"\nState:\tZ" not in Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return False


def children(pid: int) -> set[int]:
    """Every descendant of ``pid`` (the pool's fork server, its workers, the resource tracker)."""
    out: set[int] = set()
    try:
        for t in Path(f"/proc/{pid}/task").glob("*/children"):
            out |= {int(x) for x in t.read_text().split()}
    except OSError:
        return out
    for c in list(out):
        out |= children(c)
    return out


def wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_workers_die_with_their_parent(sig: signal.Signals, tmp_path: Path) -> None:
    f, out, log = sweep_file(tmp_path), tmp_path / "out", tmp_path / "err.log"
    proc = start(f, out, sleepy=0.3, log=log)
    try:
        assert wait_for(lambda: len(children(proc.pid)) >= 4, 60), log.read_text()  # server, tracker, 2 workers
        workers = children(proc.pid)
        os.kill(proc.pid, sig)
        code = proc.wait(30)
    finally:
        proc.kill()
    assert wait_for(lambda: not processes_of(out) and not any(map(alive, workers)), 10), \
        f"still running after {sig.name}: {processes_of(out) | {w for w in workers if alive(w)}}"
    if sig == signal.SIGTERM:
        assert code == 143 and "capsim: terminated" in log.read_text() and "Traceback" not in log.read_text()
        assert not (out / LOCK).exists(), "a terminated sweep releases its lock"
    else:
        assert code == -signal.SIGKILL
    assert ResultStore(out).load_checked(all_runs=True)[1] == {}, "what finished before the signal is intact"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_sigterm_whose_exception_python_swallowed_still_stops_the_sweep(workers: str, tmp_path: Path,
                                                                          monkeypatch, capsys) -> None:
    """Python may run the SIGTERM handler where its exception cannot escape (an at-fork hook: "Exception ignored"),
    which once let a terminated sweep run on to its end; the request is remembered and the run loops stop on it."""
    from experiments.running import interrupts

    monkeypatch.setenv("CAPSIM_SLEEPY", "0")
    f, out = sweep_file(tmp_path, seeds="0-1"), tmp_path / "out"
    try:
        interrupts.on_signal(signal.SIGTERM, None)
    except interrupts.Terminated:
        pass  # what Python does with an exception raised in an at-fork hook
    assert main(["sweep", str(f), "--out", str(out), "--workers", workers, "--quiet"]) == 143
    assert "capsim: terminated" in capsys.readouterr().err
    assert not (out / LOCK).exists(), "a terminated sweep releases its lock"
    assert ResultStore(out).load_checked(all_runs=True)[1] == {}
    assert main(["sweep", str(f), "--out", str(out), "--workers", workers, "--quiet"]) == 0, \
        "the request ends with its command: the next one runs"
    assert len(read_results(out).tables["summary"]) == 8


@pytest.mark.slow
def test_local_dask_workers_die_with_their_parent(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    f, out, log = sweep_file(tmp_path), tmp_path / "out", tmp_path / "err.log"
    proc = start(f, out, 0.3, log, "--dask", "local:2")
    try:
        assert wait_for(lambda: len(children(proc.pid)) >= 2 and (out / "summary").is_dir(), 120), log.read_text()
        workers = children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()
    assert wait_for(lambda: not any(map(alive, workers)), 15), {w for w in workers if alive(w)}


def test_a_second_concurrent_sweep_is_refused(tmp_path: Path, capsys) -> None:
    f, out, log = sweep_file(tmp_path), tmp_path / "out", tmp_path / "err.log"
    proc = start(f, out, sleepy=0.3, log=log)
    try:
        assert wait_for(lambda: (out / LOCK).is_file() and (out / LOCK).read_text().strip(), 60), log.read_text()
        assert json.loads((out / LOCK).read_text())["pid"] == proc.pid
        assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"another capsim is writing to this result folder (`capsim sweep {f}" in err
        assert f"pid {proc.pid}" in err and "Traceback" not in err
        assert proc.poll() is None, "the first sweep goes on"
        proc.terminate()
        assert proc.wait(30) == 143
    finally:
        proc.kill()
    assert ResultStore(out).load_checked(all_runs=True)[1] == {}
    assert "Traceback" not in log.read_text()


def _stamps(out: Path) -> dict[str, float]:
    """Each finished run's fingerprint: its decisions' wall time (a run done again measures another)."""
    if not ResultStore(out).is_store():
        return {}
    summary = ResultStore(out).load_checked(all_runs=True, tables=("summary",))[0]["summary"]
    return dict(zip(summary.run_id, summary.decision_wall_sum)) if not summary.empty else {}


@pytest.mark.slow
def test_a_sweep_killed_at_20_random_points_loses_nothing(tmp_path: Path, monkeypatch) -> None:
    f, out, log = sweep_file(tmp_path), tmp_path / "out", tmp_path / "err.log"
    monkeypatch.setenv("CAPSIM_SLEEPY", "0")
    ref = tmp_path / "ref"
    assert main(["sweep", str(f), "--out", str(ref), "--workers", "1", "--quiet"]) == 0
    rng = random.Random(20)
    first_seen: dict[str, tuple[int, int]] = {}
    history = []
    for i in range(20):
        proc = start(f, out, sleepy=0.1, log=log)
        at = rng.uniform(0.3, 4.0)  # start-up (imports, lock, checks) takes 1-2 s, then a few runs finish
        time.sleep(at)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert wait_for(lambda: not processes_of(out), 10), f"kill {i} at {at:.2f} s left {processes_of(out)}"
        if ResultStore(out).is_store():
            tables, skipped = ResultStore(out).load_checked(all_runs=True)
            assert skipped == {}, f"kill {i} at {at:.2f} s left damaged runs: {skipped}"
        now = _stamps(out)
        assert all(now.get(k) == v for k, v in first_seen.items()), f"kill {i}: a finished run was lost or redone"
        first_seen.update({k: v for k, v in now.items() if k not in first_seen})
        history.append((round(at, 2), len(now)))
    final = subprocess.run([sys.executable, "-m", "tests.fault_sweep", "sweep", str(f), "--out", str(out),
                            "--workers", "2"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "CAPSIM_SLEEPY": "0.1", "PYTHONPATH": str(ROOT)})
    assert final.returncode == 0, final.stderr
    resumed = next(line for line in final.stderr.splitlines() if "already done" in line)
    print(f"\n20 SIGKILLs (at s, runs finished): {history}; then: {resumed}")
    assert f"{len(first_seen)} already done" in final.stderr and "will run again" not in final.stderr
    assert all(_stamps(out)[k] == v for k, v in first_seen.items()), "a run finished before a kill was redone"
    assert not processes_of(out) and "Traceback" not in log.read_text()
    assert not (out / ".spool").exists(), "the last command stored every spooled run in batches"
    a, b = read_results(ref).tables, read_results(out).tables
    assert len(b["summary"]) == 40
    for table in ("summary", "jobs", "nodes", "segments", "decisions"):  # batches differ, the rows may not
        cols = [c for c in a[table].columns if "wall" not in c]
        pd.testing.assert_frame_equal(a[table][cols], b[table][cols], check_exact=True)
