"""Sweeps whose cost per run is flat: 1,000, 5,000 and 20,000 tiny runs on the process pool and on Dask.

    .venv/bin/python benchmarks/sweep_scale.py [--sizes 1000,5000,20000] [--modes processes,dask,store] [--workers 2]

Each size is one ``capsim sweep`` (a subprocess, ``--workers N`` or ``--dask local:N``) of tiny runs (4 jobs on one
node, EDF, the measured predictor; the runs differ by seed) into an empty folder, then one ``capsim report`` of it.
Printed per size: runs/s over the whole command; CPU per run of the command and every process under it (sampled from
``/proc`` every 0.1 s); the same less the CPU the run itself takes (measured in this process on a sample of the same
runs: ``execute``, the engine and the lower bound), which is the overhead per run; the command's peak RSS; the
report's wall and CPU time (wall swings with the machine's load, CPU does not). Targets (issue 18): overhead <= 20 ms
of CPU per run, peak RSS < 300 MB growing < 10 % from the smallest size to the largest, ``capsim report`` on the
largest folder under 15 s.

Mode ``store`` runs no simulation: one tiny run's tables, labelled for each run of the sweep, go through the result
folder's writer in this process (spool, batches, journal, ``summary.csv``), to show the folder's own memory against
runs in a minute: the process's RSS after the plan, its peak while the runs are written, and the peak of the
command's end (the last compaction and ``summary.csv``, measured from a reset of the peak: ``/proc/self/clear_refs``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TICK = os.sysconf("SC_CLK_TCK")


def sweep_file(d: Path, runs: int) -> Path:
    p = d / f"tiny{runs}.yaml"
    data = {"name": f"tiny{runs}",
            "scenario": {"cluster": {"nodes": 1}, "workload": {"jobs": 4, "mean_interarrival": 60},
                         "predictor": {"kind": "measured"}},
            "policies": [{"kind": "edf"}], "seeds": f"0-{runs - 1}"}
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def tree(pid: int) -> set[int]:
    out = {pid}
    try:
        for t in Path(f"/proc/{pid}/task").glob("*/children"):
            for c in t.read_text().split():
                out |= tree(int(c))
    except OSError:
        pass
    return out


def cpu_of(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
    except (OSError, IndexError):
        return None


def hwm_of(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def measured(argv: list[str]) -> tuple[float, float, int, int]:
    """Wall seconds, CPU seconds of the command's whole process tree, its peak RSS (bytes), exit code."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    last: dict[int, float] = {}
    peak = 0
    while proc.poll() is None:
        for pid in tree(proc.pid):
            c = cpu_of(pid)
            if c is not None:
                last[pid] = c
        peak = max(peak, hwm_of(proc.pid) or 0)
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err}")
    return wall, sum(last.values()), peak, proc.returncode


def run_cpu(file: Path, sample: int) -> float:
    """CPU seconds one run takes in this process (mean over ``sample`` runs of the sweep, after a warm-up)."""
    from experiments.running.tasks import execute
    from experiments.runs import plan
    from experiments.scenario.sweep import load_sweep

    tasks = plan(load_sweep(file)).tasks
    execute(tasks[0])
    t0 = time.process_time()
    for t in tasks[1:sample + 1]:
        execute(t)
    return (time.process_time() - t0) / sample


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def store_only(file: Path, out: Path) -> tuple[int, int, int, int]:
    """The result folder's writer alone on the runs of ``file``: RSS after the plan, peak while writing, RSS before
    the end and the end's peak (bytes)."""
    from experiments.results.store import ResultStore
    from experiments.running.tasks import Outcome, execute
    from experiments.runs import plan
    from experiments.scenario.sweep import load_sweep

    p = plan(load_sweep(file))
    one = execute(p.tasks[0])
    planned = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here
    store = ResultStore(out, label_types=p.label_types)
    with store.writing(p.manifest()):
        store.verify({t.run_id: t for t in p.tasks})
        store.expect([t.run_id for t in p.tasks])
        for t in p.tasks:
            store.write(Outcome(t, one.tables, one.summary).encoded())
        writing, before = _status("VmHWM"), _status("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")
    return planned, writing, before, _status("VmHWM")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000")
    ap.add_argument("--modes", default="processes,dask")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--sample", type=int, default=200, help="runs timed in this process for the per-run CPU")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    capsim = [sys.executable, "-m", "experiments.cli"]
    with tempfile.TemporaryDirectory(prefix="capsim-scale-") as tmp:
        d = Path(tmp)
        per_run = run_cpu(sweep_file(d, args.sample + 1), args.sample)
        print(f"one tiny run alone: {per_run * 1000:.1f} ms CPU (mean of {args.sample}, this process)")
        print(f"{'mode':<10} {'runs':>7} {'wall s':>8} {'runs/s':>7} {'CPU/run ms':>11} {'overhead ms':>12} "
              f"{'peak RSS MB':>12} {'report s':>9} {'report CPU s':>13}")
        for mode in args.modes.split(","):
            if mode == "store":
                for n in sizes:
                    planned, writing, before, end = (x / 2**20 for x in store_only(sweep_file(d, n), d / f"s{n}"))
                    print(f"store {n:>7,}: RSS after the plan {planned:.0f} MB, peak while writing {writing:.0f} MB, "
                          f"before the end {before:.0f} MB, peak of the end {end:.0f} MB ({end - before:+.0f} MB)",
                          flush=True)
                continue
            how = ["--dask", f"local:{args.workers}"] if mode == "dask" else ["--workers", str(args.workers)]
            first_rss = None
            for n in sizes:
                out = d / f"{mode}{n}"
                wall, cpu, peak, _ = measured(capsim + ["sweep", str(sweep_file(d, n)), "--out", str(out), "--quiet",
                                                        *how])
                report, report_cpu, _, _ = measured(capsim + ["report", str(out)])
                first_rss = first_rss or peak
                print(f"{mode:<10} {n:>7,} {wall:>8.1f} {n / wall:>7.1f} {cpu / n * 1000:>11.1f} "
                      f"{(cpu / n - per_run) * 1000:>12.1f} {peak / 2**20:>12.0f} {report:>9.1f} {report_cpu:>13.1f}"
                      f"{'' if peak == first_rss else f'   RSS {peak / first_rss - 1:+.1%} vs {sizes[0]:,}'}",
                      flush=True)


if __name__ == "__main__":
    main()
