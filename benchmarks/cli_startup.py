"""Start-up of the command line: wall time and peak memory of whole ``capsim ... --help`` processes, median of N.

    .venv/bin/python benchmarks/cli_startup.py [--runs 5] [--against OTHER/capsim] [-- ARGS ...]

Runs this environment's ``capsim`` (next to the Python running this script) with ``--help`` (or the ARGS after
``--``) N times and prints the median wall time and the largest peak RSS; ``--against`` times another ``capsim``
executable the same way, interleaved, and prints the ratio. Target (issue 8): ``capsim --help`` under 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(exe: str, args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one process running ``exe args``."""
    t0 = time.perf_counter()
    pid = subprocess.Popen([exe, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{exe} {' '.join(args)} failed")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--against", metavar="CAPSIM", help="another capsim executable to compare with")
    p.add_argument("args", nargs="*", default=["--help"])
    a = p.parse_args()
    exes = {"this": str(Path(sys.executable).with_name("capsim"))}
    if a.against:
        exes["other"] = a.against
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in exes}
    measure(exes["this"], a.args)  # warm the file cache once
    for _ in range(a.runs):
        for k, exe in exes.items():
            results[k].append(measure(exe, a.args))
    medians = {}
    for k, exe in exes.items():
        medians[k] = statistics.median(w for w, _ in results[k])
        peak = max(m for _, m in results[k])
        print(f"{k:<6} capsim {' '.join(a.args)}: median {medians[k]:.3f} s over {a.runs} runs, peak RSS {peak:.0f} MiB"
              f"  ({exe})")
    if "other" in medians:
        print(f"ratio other / this: {medians['other'] / medians['this']:.1f}x")


if __name__ == "__main__":
    main()
