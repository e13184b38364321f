"""Run the test suite several times in a row while other processes hold every core.

Issue 18 asks that the README's test command keep passing when the machine is busy: no hang, no test that
depends on having a core to itself. This script starts ``--load`` busy loops (plain Python processes spinning
at full speed, by default one per core), runs ``pytest -q -n 2`` ``--runs`` times in a row, prints one line
per run (exit code, wall time, pytest's summary line, the load average at its start) and stops the loops
however it ends. Each run's whole output is kept in ``--logs``.

    .venv/bin/python benchmarks/suite_under_load.py --runs 5

It exits 0 only if every run passed. Ctrl-C or SIGTERM stops the loops and the current run.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPIN = "while True: pass"


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "(no output)"


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="suites in a row (default 5)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="busy loops held for the whole time (default: one per core)")
    parser.add_argument("--workers", default="2", help="pytest-xdist workers (default 2)")
    parser.add_argument("--logs", type=Path, default=Path("suite_under_load"),
                        help="folder for each run's whole output (default ./suite_under_load)")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest (after --)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.load < 0:
        parser.error("--runs must be at least 1 and --load at least 0")
    args.logs.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    loops = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.load)]
    passed = 0
    try:
        print(f"{args.load} busy loops; pytest -q -n {args.workers}, {args.runs} runs", flush=True)
        for run in range(1, args.runs + 1):
            load, start = _load(), time.monotonic()
            command = [sys.executable, "-m", "pytest", "-q", "-n", args.workers, "-p", "no:cacheprovider",
                       *args.pytest_args]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            wall = time.monotonic() - start
            (args.logs / f"run_{run}.log").write_text(done.stdout + done.stderr)
            passed += done.returncode == 0
            print(f"run {run}: exit {done.returncode}, {wall:.0f} s, load at start {load}: "
                  f"{_last_line(done.stdout)}", flush=True)
    except KeyboardInterrupt:
        print("stopped", flush=True)
        return 130
    finally:
        for loop in loops:
            loop.kill()
        for loop in loops:
            loop.wait()
    print(f"{passed} of {args.runs} runs passed", flush=True)
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
