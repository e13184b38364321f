"""Interrupting capsim many times in a row: every stop within 2 s, exit 130/143, no traceback, no process left, every
finished run intact; and no process left after a SIGKILL of any command (read from the process table).

The long version (``-m slow``) interrupts ``CAPSIM_STRESS_N`` times (default 100) per mode: ``--workers 1``,
``--workers 2``, ``--dask local:2`` and ``predict evaluate --workers 2`` (mode ``evaluate``); the default suite runs a
few of each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.results.files import TMP_PREFIX
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


@dataclass
class Stopped:
    """How a command ended after a signal: seconds until it ended, its exit code (None: it had not ended
    ``10 * STOP_WITHIN`` s later), and of those seconds the CPU its main thread used and the time it waited, ready
    to run, for a CPU (``/proc/PID/schedstat``, read from the exited process before it is reaped)."""

    took: float
    code: int | None
    cpu: float = 0.0
    queued: float = 0.0

    def within(self) -> bool:
        """Stopped within ``STOP_WITHIN`` seconds, not counting time spent waiting for a CPU while ready to run: on
        a machine loaded past its cores a stop is delayed by the load, not by capsim (on an idle machine ``queued`` is
        about 0 and this is the plain 2-s rule)."""
        return self.code is not None and self.took - self.queued <= STOP_WITHIN

    def __str__(self) -> str:
        return f"{self.took:.2f} s ({self.cpu:.2f} s CPU, {self.queued:.2f} s waiting for a CPU)"


def _schedstat(pid: int) -> tuple[float, float]:
    try:
        run, wait, _ = Path(f"/proc/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(run) / 1e9, int(wait) / 1e9


def stop(proc: subprocess.Popen, sig: signal.Signals) -> Stopped:
    """Send ``sig`` as a terminal or a scheduler would (SIGINT to the whole group, SIGTERM to the command) and wait
    for the command to end (a stuck one has its stacks dumped: ``dump_stuck``)."""
    before = _schedstat(proc.pid)
    t0 = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    while time.monotonic() - t0 < 10 * STOP_WITHIN:
        if proc.returncode is not None:  # reaped already: send_signal polls first, and it had ended before the signal
            return Stopped(time.monotonic() - t0, proc.returncode, 0.0, 0.0)
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG):  # ended, not yet reaped
            took = time.monotonic() - t0
            after = _schedstat(proc.pid)
            return Stopped(took, proc.wait(), after[0] - before[0], after[1] - before[1])
        time.sleep(0.01)
    took = time.monotonic() - t0
    dump_stuck(proc)
    return Stopped(took, None)


def dump_stuck(proc: subprocess.Popen) -> None:
    """A command that did not end: have it write every thread's stack to its stderr (``tests.fault_sweep`` registers
    SIGUSR1 with faulthandler), and print its session's process table, for the failure's message."""
    rows = []
    for pid in sorted(session_processes(proc.pid)):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            wchan = Path(f"/proc/{pid}/wchan").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:150]
        except OSError:
            continue
        rows.append(f"{pid} ppid={stat[1]} state={stat[0]} wchan={wchan} {cmd}")
    print("stuck session:\n" + "\n".join(rows))
    signals = []
    for task in sorted(Path(f"/proc/{proc.pid}/task").glob("*")):  # masks: which thread could take a signal
        try:
            status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        signals.append(f"{task.name} {status.get('Name', '').strip()}: " + " ".join(
            f"{k}={status.get(k, '').strip()}" for k in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
    print("signal masks of the command's threads (SIGINT = 0x2, SIGTERM = 0x4000):\n" + "\n".join(signals))
    try:
        proc.send_signal(signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(2.0)


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


def interrupt_many(mode: str, n: int, tmp_path: Path) -> list[Stopped]:
    """Start and interrupt the sweep (or ``predict evaluate``: mode ``evaluate``) ``n`` times in a row into one
    folder; the stop times."""
    rng = np.random.default_rng(18)
    f, out = sweep_file(tmp_path, seeds="0-40"), tmp_path / f"out-{mode}"
    times = []
    for k in range(n):
        log = tmp_path / f"err-{mode}-{k}.log"
        proc = _evaluate(tmp_path, k, out) if mode == "evaluate" else start(
            ["sweep", str(f), "--out", str(out), *MODES[mode], "--quiet"], log)
        sig = signal.SIGINT if k % 2 else signal.SIGTERM
        try:
            time.sleep(float(rng.uniform(1.0, 6.0)))
            stopped = stop(proc, sig)
        finally:
            os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
        text = log.read_text(errors="replace")
        code = stopped.code
        if code == 0:  # it finished first: start again from an empty folder next time
            import shutil

            shutil.rmtree(out)
            continue
        if code is None:
            keep = tmp_path.parent / f"stuck-{mode}-{k}.log"  # outlives the test's folder clean-up
            keep.write_text(text)
        assert code == (130 if sig == signal.SIGINT else 143), f"{mode} #{k} {sig.name}: exit {code}\n{text}"
        assert stopped.within(), f"{mode} #{k} {sig.name}: stopped after {stopped}\n{text}"
        assert "Traceback" not in text and "Error" not in text.replace("capsim: error", ""), text
        left = gone(proc.pid)
        assert not left, f"{mode} #{k}: left {left}"
        if mode == "evaluate":  # it writes its files at the end, each whole or not at all
            assert not list(out.glob(f"{TMP_PREFIX}*")) and all(len(pd.read_csv(c)) for c in out.glob("*.csv"))
        elif out.exists():
            assert ResultStore(out).load_checked(all_runs=True)[1] == {}, "every finished run is intact"
        times.append(stopped)
    return times


SLOW_UNDER_LOAD = pytest.param("dask", marks=pytest.mark.slow)
"""A local Dask cluster takes seconds to start under load (it stops in 0.1-1.8 s): its cases run with the slow tests."""


@pytest.mark.parametrize("mode", ["workers1", "workers2", SLOW_UNDER_LOAD])
def test_a_few_interrupts_in_a_row(mode: str, tmp_path: Path) -> None:
    assert interrupt_many(mode, 2, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [*MODES, "evaluate"])
def test_a_hundred_interrupts_in_a_row(mode: str, tmp_path: Path) -> None:
    n = int(os.environ.get("CAPSIM_STRESS_N", "100"))
    stops = interrupt_many(mode, n, tmp_path)
    took, cpu, queued = (np.array([getattr(s, f) for s in stops]) for f in ("took", "cpu", "queued"))
    print(f"{mode}: {len(stops)} interrupts; stop time median {np.median(took):.2f} s, max {took.max():.2f} s; "
          f"CPU after the signal median {np.median(cpu):.2f} s, max {cpu.max():.2f} s; waiting for a CPU median "
          f"{np.median(queued):.2f} s, max {queued.max():.2f} s; over {STOP_WITHIN} s: {(took > STOP_WITHIN).sum()}")


def _evaluate(tmp_path: Path, k: int, out: Path | None = None) -> subprocess.Popen:
    return start(["predict", "evaluate", "--workers", "2", "--protocols", "interpolation", "--out",
                  str(out or tmp_path / f"ev{k}"), "--quiet"], tmp_path / (f"err-evaluate-{k}.log" if out else
                                                                           f"ev{k}.log"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_predict_evaluate_stops_and_leaves_nothing(sig: signal.Signals, tmp_path: Path) -> None:
    proc = _evaluate(tmp_path, 0)
    try:
        assert wait_for(lambda: len(session_processes(proc.pid)) >= 4, 60)  # command, server, tracker, workers
        time.sleep(1.0)
        stopped = stop(proc, sig)
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
    text = (tmp_path / "ev0.log").read_text(errors="replace")
    assert stopped.code == (130 if sig == signal.SIGINT else 143) and stopped.within(), (str(stopped), text)
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


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_line_is_still_importing_is_one_line(sig: signal.Signals) -> None:
    """The entry point handles Ctrl-C and SIGTERM before it imports the command line: a signal sent the moment its
    first module starts importing (Python's own SIGINT handler printed a traceback there) is one line and 130/143."""
    prog = ("import os, sys\n"
            "def hook(event, args):\n"
            "    if event == 'import' and args[0] == 'experiments.cli':\n"
            f"        os.kill(os.getpid(), {int(sig)})\n"
            "sys.addaudithook(hook)\n"
            "sys.argv = ['capsim', '--version']\n"
            "from experiments.entry import console\n"
            "console()\n")
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120, cwd=ROOT)
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert (r.returncode, r.stderr, r.stdout) == (128 + int(sig), f"capsim: {word}\n", "")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_command_has_put_its_handlers_back_is_one_line(sig: signal.Signals) -> None:
    """Between the end of a command's own handling and the end of the process (results written, Python shutting
    down) a signal is still one line and 130/143, not a traceback or a death by the signal (-15: the fault harness
    once showed it): the early handlers stay for the life of the process."""
    prog = ("import os, time\n"
            "from experiments.entry import handle_early\n"
            "handle_early()\n"
            "from experiments.running import interrupts\n"
            "with interrupts.install():\n"
            "    pass\n"
            f"os.kill(os.getpid(), {int(sig)})\n"
            "time.sleep(30)\n")
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120, cwd=ROOT)
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert (r.returncode, r.stderr, r.stdout) == (128 + int(sig), f"capsim: {word}\n", "")
