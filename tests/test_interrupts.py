"""Interrupting capsim many times in a row: every stop within 2 s, exit 130/143, no traceback, no process left, every
finished run intact; and no process left after a SIGKILL of any command (read from the process table).

The long version (``-m slow``) interrupts ``CAPSIM_STRESS_N`` times (default 100) per mode: ``--workers 1``,
``--workers 2``, ``--dask local:2`` and ``predict evaluate --workers 2``; the default suite runs a few of each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from experiments.results.store import ResultStore

from .test_faults import ROOT, sweep_file

STOP_WITHIN = 2.0
MODES = {"workers1": ["--workers", "1"], "workers2": ["--workers", "2"], "dask": ["--dask", "local:2"]}


def session_processes(sid: int) -> set[int]:
    """Live processes of session ``sid`` (a command started in a session of its own, and everything under it)."""
    found = set()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.add(int(d.name))
    return found


def start(argv: list[str], log: Path, sleepy: float = 0.2) -> subprocess.Popen:
    env = {**os.environ, "CAPSIM_SLEEPY": str(sleepy), "PYTHONPATH": str(ROOT),
           "DASK_DISTRIBUTED__WORKER__PRELOAD": '["tests.fault_sweep"]'}
    with open(log, "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "tests.fault_sweep", *argv], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


def stop(proc: subprocess.Popen, sig: signal.Signals) -> tuple[float, int | None]:
    """Send ``sig`` as a terminal or a scheduler would (SIGINT to the whole group, SIGTERM to the command) and wait;
    return the seconds until the command ended (capped) and its exit code (None if it did not end)."""
    t0 = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    try:
        code = proc.wait(10 * STOP_WITHIN)
    except subprocess.TimeoutExpired:
        return time.monotonic() - t0, None
    return time.monotonic() - t0, code


def wait_for(cond, timeout: float) -> bool:  # noqa: ANN001
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def gone(sid: int) -> set[int]:
    """The processes of session ``sid`` still there ``STOP_WITHIN`` seconds from now (empty once all have ended)."""
    wait_for(lambda: not session_processes(sid), STOP_WITHIN)
    return session_processes(sid)


def interrupt_many(mode: str, n: int, tmp_path: Path) -> list[float]:
    """Start and interrupt the sweep ``n`` times in a row into one folder; the stop times."""
    rng = np.random.default_rng(18)
    f, out = sweep_file(tmp_path, seeds="0-40"), tmp_path / f"out-{mode}"
    times = []
    for k in range(n):
        log = tmp_path / f"err-{mode}-{k}.log"
        proc = start(["sweep", str(f), "--out", str(out), *MODES[mode], "--quiet"], log)
        sig = signal.SIGINT if k % 2 else signal.SIGTERM
        try:
            time.sleep(float(rng.uniform(1.0, 6.0)))
            took, code = stop(proc, sig)
        finally:
            os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
        text = log.read_text(errors="replace")
        if code == 0:  # it finished first: start again from an empty folder next time
            import shutil

            shutil.rmtree(out)
            continue
        assert code == (130 if sig == signal.SIGINT else 143), f"{mode} #{k} {sig.name}: exit {code}\n{text}"
        assert took <= STOP_WITHIN, f"{mode} #{k} {sig.name}: stopped after {took:.2f} s\n{text}"
        assert "Traceback" not in text and "Error" not in text.replace("capsim: error", ""), text
        left = gone(proc.pid)
        assert not left, f"{mode} #{k}: left {left}"
        if out.exists():
            assert ResultStore(out).load_checked(all_runs=True)[1] == {}, "every finished run is intact"
        times.append(took)
    return times


SLOW_UNDER_LOAD = pytest.param("dask", marks=pytest.mark.slow)
"""A local Dask cluster takes seconds to start under load (it stops in 0.1-1.8 s): its cases run with the slow tests."""


@pytest.mark.parametrize("mode", ["workers1", "workers2", SLOW_UNDER_LOAD])
def test_a_few_interrupts_in_a_row(mode: str, tmp_path: Path) -> None:
    assert interrupt_many(mode, 2, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_a_hundred_interrupts_in_a_row(mode: str, tmp_path: Path) -> None:
    n = int(os.environ.get("CAPSIM_STRESS_N", "100"))
    times = interrupt_many(mode, n, tmp_path)
    print(f"{mode}: {len(times)} interrupts, stop time median {np.median(times):.2f} s, max {max(times):.2f} s")


def _evaluate(tmp_path: Path, k: int) -> subprocess.Popen:
    return start(["predict", "evaluate", "--workers", "2", "--protocols", "interpolation", "--out",
                  str(tmp_path / f"ev{k}"), "--quiet"], tmp_path / f"ev{k}.log")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_predict_evaluate_stops_and_leaves_nothing(sig: signal.Signals, tmp_path: Path) -> None:
    proc = _evaluate(tmp_path, 0)
    try:
        assert wait_for(lambda: len(session_processes(proc.pid)) >= 4, 60)  # command, server, tracker, workers
        time.sleep(1.0)
        took, code = stop(proc, sig)
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
    text = (tmp_path / "ev0.log").read_text(errors="replace")
    assert code == (130 if sig == signal.SIGINT else 143) and took <= STOP_WITHIN, (code, took, text)
    assert "Traceback" not in text
    assert wait_for(lambda: not session_processes(proc.pid), STOP_WITHIN), session_processes(proc.pid)


@pytest.mark.parametrize("command", ["run", "sweep2", SLOW_UNDER_LOAD, "evaluate"])
def test_no_process_outlives_a_sigkill_of_any_command(command: str, tmp_path: Path) -> None:
    f = sweep_file(tmp_path, seeds="0-40")
    argv = {"run": ["run", str(tmp_path / "s.yaml"), "--workers", "2", "--out", str(tmp_path / "r"), "--quiet"],
            "sweep2": ["sweep", str(f), "--out", str(tmp_path / "o"), "--workers", "2", "--quiet"],
            "dask": ["sweep", str(f), "--out", str(tmp_path / "d"), "--dask", "local:2", "--quiet"]}
    if command == "run":
        import yaml

        data = yaml.safe_load(f.read_text())
        (tmp_path / "s.yaml").write_text(yaml.safe_dump({**data["scenario"], "name": "r", "seeds": "0-40",
                                                         "policies": data["policies"]}))
    proc = _evaluate(tmp_path, 1) if command == "evaluate" else start(argv[command], tmp_path / "err.log")
    try:
        assert wait_for(lambda: len(session_processes(proc.pid)) >= 3, 60)
        time.sleep(2.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert wait_for(lambda: not session_processes(proc.pid), STOP_WITHIN), \
            f"left after SIGKILL: {session_processes(proc.pid)}"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
