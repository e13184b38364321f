"""Replaying ElasticFlow's simulator (``experiments/elasticflow/replay.yaml``) and measuring the agreement with its own
runs.

``python -m studies.elasticflow_replay`` prints, for the development settings (cluster10 on 32 x 8 A100, the
Fig. 8a testbed trace on 16 x 4 T4) and every policy ElasticFlow's simulator ran there, capsim's deadline ratio,
average JCT and makespan against the reference (``experiments/elasticflow/reference``), the share of jobs with the same
verdict and the per-job completion error; ``--plot FILE`` draws the Fig. 8-style bars (capsim beside the reference)
of ``docs/elasticflow.md``. ``--fig8b DIR`` replays every setting of the paper's Fig. 8b instead (the ten traces
``DIR/cluster01.csv`` ... ``cluster10.csv`` of ``microsoft/elasticflow-traces`` on their clusters, all six policies),
prints each run's deadline ratio and wall time and the total, and with ``--plot`` draws them.
"""

from __future__ import annotations

import argparse
import copy
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.running import interrupts
from experiments.scenario import build_policy, validate_scenario
from experiments.scenario.loading import raise_problems, read_yaml
from sim.elasticflow.vocabulary import SLOT

__all__ = ["EF_DIR", "REPLAY", "SETTINGS", "POLICIES", "REFERENCE_NAMES", "FIG8B", "build", "replay", "reference",
           "agreement", "agreement_table", "fig8b", "fig8b_table", "rigid_bounds", "rigid_bounds_table",
           "FIG8B_PUBLISHED", "plot", "main"]

EF_DIR = Path(__file__).resolve().parents[1] / "experiments" / "elasticflow"
REPLAY = EF_DIR / "replay.yaml"
DATA = Path(__file__).resolve().parents[1] / "sim" / "data" / "elasticflow"
SETTINGS = {"cluster10": (DATA / "cluster10.csv", "32x8", "A100-40GB", "n32g8"),
            "elasticVpollux_e": (DATA / "elasticVpollux_e.csv", "16x4", "T4", "n16g4")}
"""The development settings: trace file, servers, GPU model, and the reference runs' cluster name."""
POLICIES = ("elasticflow_edf", "tiresias", "elasticflow_gandiva", "themis", "chronus", "elasticflow")
REFERENCE_NAMES = {"elasticflow_edf": "edf", "tiresias": "dlas-gpu", "elasticflow_gandiva": "gandiva",
                   "themis": "themis", "elasticflow": "ef-accessctrl"}
"""capsim's policy kinds and the names ElasticFlow's simulator runs them under (Chronus has no reference run)."""
LABELS = {"elasticflow_edf": "EDF", "tiresias": "Tiresias", "elasticflow_gandiva": "Gandiva", "themis": "Themis",
          "chronus": "Chronus", "elasticflow": "ElasticFlow"}
COLOURS = {"elasticflow_edf": "#4C72B0", "tiresias": "#DD8452", "elasticflow_gandiva": "#55A868", "themis": "#8172B3",
           "chronus": "#937860", "elasticflow": "#C44E52"}
"""One colour per policy, in every figure of these replays (bars: colour alone tells them apart)."""
FIG8B = {"cluster01": "64x8", "cluster02": "64x8", "cluster03": "64x8", "cluster04": "128x8", "cluster05": "64x8",
         "cluster06": "64x8", "cluster07": "128x8", "cluster08": "128x8", "cluster09": "128x8", "cluster10": "32x8"}
"""Fig. 8b's clusters per trace (ElasticFlow's ``run_fig8b.sh``): servers of 8 A100s."""
FIG8B_PUBLISHED = {"elasticflow_edf": (0.182, 0.228, 0.095, 0.007, 0.375, 0.105, 0.046, 0.252, 0.800, 0.769),
                   "tiresias": (0.478, 0.470, 0.401, 0.120, 0.420, 0.466, 0.346, 0.373, 0.468, 0.473),
                   "elasticflow_gandiva": (0.246, 0.286, 0.314, 0.228, 0.228, 0.381, 0.351, 0.325, 0.329, 0.354),
                   "themis": (0.464, 0.431, 0.389, 0.432, 0.430, 0.425, 0.437, 0.423, 0.456, 0.431),
                   "chronus": (0.474, 0.445, 0.426, 0.450, 0.453, 0.432, 0.460, 0.447, 0.466, 0.454),
                   "elasticflow": (0.788, 0.822, 0.455, 0.631, 0.832, 0.607, 0.665, 0.896, 0.938, 0.981)}
"""The deadline ratios the paper plots in Fig. 8b, traces 1-10 (``pkusys/ElasticFlow``,
``plot_figure/scripts/plot_fig8b.py``, Apache-2.0)."""


def build(trace: str | Path, servers: str, gpu: str, policy: str,
          params: dict[str, Any] | None = None) -> tuple[Any, list[Any], Any, Any, Any]:
    """(cluster, jobs, policy, estimator, truth) of replaying ``trace`` on ``servers`` of ``gpu`` with ``policy``,
    through the replay scenario (so exactly what ``capsim run`` does)."""
    src = read_yaml(REPLAY, "scenario file")
    data = copy.deepcopy(src.data)
    data["workload"]["trace"]["path"] = str(Path(trace).resolve())
    data["cluster"].update(servers=servers, gpu=gpu)
    data["policies"] = [{"kind": policy, **(params or {})}]
    sc, problems = validate_scenario(data, str(REPLAY), EF_DIR)
    raise_problems(src, problems)
    assert sc is not None and sc.policies is not None
    estimator, truth = sc.predictors()
    c = sc.build_cluster()
    return c, sc.build_jobs(0, truth, c.configs), build_policy(sc.policies[0]), estimator, truth


def replay(trace: str | Path, servers: str, gpu: str, policy: str, params: dict[str, Any] | None = None) -> Any:
    """The run's records (``sim.engine.RunResult``) of one replay."""
    from sim.engine import Simulation

    c, jobs, pol, estimator, truth = build(trace, servers, gpu, policy, params)
    return Simulation(c, jobs, pol, estimator, truth).run()


def reference(setting: str, policy: str) -> pd.DataFrame:
    """ElasticFlow's own run of ``policy`` on ``setting``: one row per job (``job_id``, ``status``, ``end_time``)."""
    name = f"{setting}__{SETTINGS[setting][3]}__{REFERENCE_NAMES[policy]}.csv"
    return pd.read_csv(EF_DIR / "reference" / name, dtype={"job_id": str})


def agreement(setting: str, policy: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """capsim against ElasticFlow on one development run: ratios, average JCT, makespan, verdicts, completions."""
    trace, servers, gpu, _ = SETTINGS[setting]
    t0 = time.perf_counter()
    res = replay(trace, servers, gpu, policy, params)
    wall = time.perf_counter() - t0
    ours = res.jobs.set_index("name")
    row: dict[str, Any] = {"setting": setting, "policy": policy, "deadline_met": res.summary["deadline_met"],
                           "rejected": int(res.summary["rejected"]), "mean_jct": res.summary["mean_jct"],
                           "makespan": res.summary["makespan"], "wall_s": wall}
    if policy not in REFERENCE_NAMES:
        return row
    ref = reference(setting, policy).set_index("job_id")
    ours = ours.loc[ref.index]
    done = ref["end_time"].notna() & ours["end_time"].notna()
    err = (ours["end_time"][done] - ref["end_time"][done]).abs() / (ref["end_time"][done] - ours["submit_time"][done])
    ref_jct = (ref["end_time"] - ours["submit_time"])[ref["end_time"].notna()]
    row.update(ref_deadline_met=float((ref["status"] == "on_time").mean()),
               verdicts=float((ours["status"] == ref["status"]).mean()),
               ref_mean_jct=float(ref_jct.mean()),
               ref_makespan=float(ref["end_time"].max() - ours["submit_time"].min()),
               median_error=float(err.median()), p95_error=float(np.percentile(err, 95)),
               exact=float((ours["end_time"][done] == ref["end_time"][done]).mean()))
    return row


def agreement_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of ``agreement`` rows."""
    head = ("| setting | policy | deadline ratio (capsim / ElasticFlow) | same verdict | avg JCT s (capsim / "
            "ElasticFlow) | makespan s (capsim / ElasticFlow) | completion error, median / p95 | exact |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "ref_deadline_met" not in r:
            lines.append(f"| {r['setting']} | {LABELS[r['policy']]} | {r['deadline_met']:.3f} / – | – | "
                         f"{r['mean_jct']:,.0f} / – | {r['makespan']:,.0f} / – | – | – |")
            continue
        lines.append(f"| {r['setting']} | {LABELS[r['policy']]} | {r['deadline_met']:.3f} / {r['ref_deadline_met']:.3f}"
                     f" | {r['verdicts']:.1%} | {r['mean_jct']:,.0f} / {r['ref_mean_jct']:,.0f} | "
                     f"{r['makespan']:,.0f} / {r['ref_makespan']:,.0f} | {r['median_error']:.2%} / "
                     f"{r['p95_error']:.2%} | {r['exact']:.0%} |")
    return "\n".join(lines)


def _fig8b_run(task: tuple[str, str, str, int]) -> dict[str, Any]:
    """One Fig. 8b run (in a pool worker): its ratio, rejected jobs, mean JCT, CPU and wall time and the load."""
    path, name, policy, slot = task
    servers = FIG8B[name]
    c0, t0 = time.process_time(), time.perf_counter()
    res = replay(path, servers, "A100-40GB", policy, _slot_params(policy, slot))
    return {"setting": name, "servers": servers, "policy": policy, "jobs": len(res.jobs),
            "deadline_met": res.summary["deadline_met"], "rejected": int(res.summary["rejected"]),
            "mean_jct": res.summary["mean_jct"], "cpu_s": time.process_time() - c0,
            "wall_s": time.perf_counter() - t0, "load": os.getloadavg()[0], "slot": slot}


def _slot_params(policy: str, slot: int) -> dict[str, Any]:
    """The policy's parameters for ElasticFlow's scheduling slot ``slot`` (none for Chronus, whose own simulator has
    leases of 240 s instead, nor at the default)."""
    import optim

    return {"slot": slot} if slot != SLOT and "slot" in optim.registry()[policy].param_names() else {}


def _slot_of(row: Any) -> int:
    """A row's scheduling slot (rows written before the slot was recorded are ElasticFlow's default, 60 s)."""
    slot = row.get("slot") if isinstance(row, dict) else getattr(row, "slot", None)
    return SLOT if slot is None or slot != slot else int(slot)


def _expected_cost(path: Path, name: str, policy: str) -> float:
    """A run's expected CPU, only to start the longest first: ElasticFlow's hand-out grows with jobs x GPUs and
    is far the slowest; the other policies grow with the jobs alone."""
    with path.open() as f:
        jobs = sum(1 for _ in f) - 1
    gpus = int(FIG8B[name].split("x")[0]) * int(FIG8B[name].split("x")[1])
    return jobs * gpus * (1000.0 if policy == "elasticflow" else 1.0)


def fig8b(traces: Path, policies: tuple[str, ...] = POLICIES, settings: tuple[str, ...] = tuple(FIG8B),
          out: Path | None = None, workers: int = 1, slot: int = SLOT) -> list[dict[str, Any]]:
    """Fig. 8b settings: each trace of ``traces`` on its cluster with every policy; ratio, CPU and wall time each
    (a row appended to the CSV ``out`` as each run ends, so a long sweep keeps what it finished, and runs already in
    ``out`` are not run again). The runs go to ``workers`` processes of capsim's pool, the longest expected first.
    ``slot``: ElasticFlow's scheduling slot for every policy that has one (``ReplayPolicy``)."""
    from experiments.running.pool import run_parallel

    done: set[tuple[str, str]] = set()
    if out is not None and out.exists():
        done = {(r.setting, r.policy) for r in pd.read_csv(out).itertuples() if _slot_of(r) == slot}
    tasks = []
    for name in settings:
        if name not in FIG8B:
            raise SystemExit(f"fig8b: unknown trace {name!r} (the traces: {', '.join(FIG8B)})")
        path = traces / f"{name}.csv"
        if not path.exists():
            raise SystemExit(f"fig8b: {path} is missing (the ten traces of microsoft/elasticflow-traces)")
        tasks += [(str(path), name, p, slot) for p in policies if (name, p) not in done]
    tasks.sort(key=lambda t: -_expected_cost(Path(t[0]), t[1], t[2]))
    rows: list[dict[str, Any]] = []

    def keep(_: int, row: dict[str, Any]) -> None:
        rows.append(row)
        if out is not None:
            _append(out, row)
        print(f"{row['setting']:10s} {row['servers']:6s} {LABELS[row['policy']]:12s} deadline ratio "
              f"{row['deadline_met']:.3f}  rejected {row['rejected']:5d}  {row['cpu_s']:7.1f} s CPU  "
              f"{row['wall_s']:7.1f} s wall  load {row['load']:.1f}", flush=True)

    if workers > 1 and len(tasks) > 1:
        run_parallel(_fig8b_run, tasks, keep, workers)
    else:
        for k, t in enumerate(tasks):
            keep(k, _fig8b_run(t))
    return rows


def _append(out: Path, row: dict[str, Any]) -> None:
    """Append ``row`` to the CSV ``out`` under its header; a header without one of the row's columns (a file written
    before the slot was recorded) is widened first, its rows taking ElasticFlow's default slot."""
    new = pd.DataFrame([row])
    if not out.exists():
        new.to_csv(out, index=False)
        return
    head = list(pd.read_csv(out, nrows=0).columns)
    if set(new.columns) - set(head):
        old = pd.read_csv(out)
        if "slot" not in old.columns:
            old["slot"] = SLOT
        pd.concat([old, new], ignore_index=True).to_csv(out, index=False)
    else:
        new.reindex(columns=head).to_csv(out, mode="a", header=False, index=False)


def fig8b_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of Fig. 8b rows: per trace, capsim's deadline ratio / the paper's for each policy run, and
    the CPU seconds of the runs."""
    policies = [p for p in POLICIES if any(r["policy"] == p for r in rows)]
    lines = ["| trace | cluster | jobs | " + " | ".join(LABELS[p] for p in policies) + " | CPU s |",
             "|---|---|---:|" + "---|" * len(policies) + "---:|"]
    for name in FIG8B:
        mine = {r["policy"]: r for r in rows if r["setting"] == name}
        if not mine:
            continue
        k = int(name[-2:]) - 1
        cells = [f"{mine[p]['deadline_met']:.3f} / {FIG8B_PUBLISHED[p][k]:.3f}" if p in mine else
                 f"– / {FIG8B_PUBLISHED[p][k]:.3f}" for p in policies]
        first = next(iter(mine.values()))
        lines.append(f"| {name} | {FIG8B[name]} | {int(first['jobs']):,} | " + " | ".join(cells) +
                     f" | {sum(float(r['cpu_s']) for r in mine.values()):,.1f} |")
    return "\n".join(lines)


def rigid_bounds(traces: Path, settings: tuple[str, ...] = tuple(FIG8B)) -> list[dict[str, Any]]:
    """Per Fig. 8b trace, what bounds a rigid policy's deadline ratio: the offered load (GPU-seconds the jobs ask for,
    on their requested GPUs, per second of the trace's arrivals and per GPU of its cluster), the share of jobs whose
    deadline leaves room for their duration (what a policy that starts every job on arrival can meet, less its
    overheads), and, from capsim's Tiresias run, the shares of jobs that waited more than a slot or were preempted."""
    rows = []
    for name in settings:
        path = traces / f"{name}.csv"
        t = pd.read_csv(path)
        servers, per = (int(x) for x in FIG8B[name].split("x"))
        span = float(t.submission_time.max() - t.submission_time.min())
        jobs = replay(path, FIG8B[name], "A100-40GB", "tiresias").jobs
        k = int(name[-2:]) - 1
        rows.append({"setting": name, "servers": FIG8B[name],
                     "load": float((t.duration * t.num_gpu).sum()) / span / (servers * per),
                     "room": float((t.deadline - t.submission_time >= t.duration).mean()),
                     "tiresias": float((jobs.status == "on_time").mean()),
                     "waited": float((jobs.start_time - jobs.submit_time > SLOT).mean()),
                     "preempted": float((jobs.runs > 1).mean()), "paper": FIG8B_PUBLISHED["tiresias"][k]})
    return rows


def rigid_bounds_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| trace | cluster | offered load | deadline leaves room for the duration | Tiresias (capsim / paper) | "
             "waited > 60 s | preempted |", "|---|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r['setting']} | {r['servers']} | {r['load']:.2f} | {r['room']:.3f} | {r['tiresias']:.3f} / "
              f"{r['paper']:.3f} | {r['waited']:.1%} | {r['preempted']:.1%} |" for r in rows]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, with_reference: bool = True,
         reference: str = "ElasticFlow's simulator") -> None:
    """Fig. 8-style bars: the deadline ratio per policy, one group per setting (the reference hatched beside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(r["setting"] for r in rows))
    policies = [p for p in POLICIES if any(r["policy"] == p for r in rows)]
    width = 0.8 / len(policies)
    fig, ax = plt.subplots(figsize=(6.9, 2.6), constrained_layout=True)
    for k, p in enumerate(policies):
        colour = COLOURS[p]
        for i, s in enumerate(settings):
            r = next((r for r in rows if r["setting"] == s and r["policy"] == p), None)
            if r is None:
                continue
            x = i + (k - (len(policies) - 1) / 2) * width
            ax.bar(x, r["deadline_met"], width * (0.5 if with_reference else 0.9), color=colour,
                   label=LABELS[p] if i == 0 else None, align="edge" if with_reference else "center")
            if with_reference and "ref_deadline_met" in r:
                ax.bar(x, r["ref_deadline_met"], -width * 0.5, color="white", edgecolor=colour, hatch="////",
                       align="edge", linewidth=0.6)
    ax.set_xticks(range(len(settings)), settings, **({"fontsize": 6.5} if len(settings) > 6 else {}))
    ax.set_ylabel("deadline satisfactory ratio")
    ax.set_ylim(0, 1.05)
    ax.legend(ncols=len(policies), fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    if with_reference:
        ax.text(0.99, 0.97, f"capsim solid, {reference} hatched", transform=ax.transAxes, fontsize=7,
                ha="right", va="top")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=200)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plot", type=Path, help="draw the figure to this PNG")
    ap.add_argument("--fig8b", type=Path, help="replay every Fig. 8b setting from this folder of traces")
    ap.add_argument("--policies", help="with --fig8b: these policies only (comma-separated kinds)")
    ap.add_argument("--traces", help="with --fig8b: these traces only (comma-separated, e.g. cluster01,cluster10)")
    ap.add_argument("--out", type=Path, help="with --fig8b: append each run's row to this CSV (runs already in it "
                    "are not run again)")
    ap.add_argument("--workers", type=int, default=1, help="with --fig8b: runs at once, on capsim's process pool")
    ap.add_argument("--slot", type=int, default=SLOT, help="with --fig8b: ElasticFlow's scheduling slot in seconds "
                    "(60, its released scripts; 240, its earlier Fig. 8b script); with --rows: the rows of this slot")
    ap.add_argument("--bounds", type=Path, help="what bounds a rigid policy on each Fig. 8b trace in this folder "
                    "(offered load, deadlines with room for the duration, capsim's Tiresias: waits, preemptions)")
    ap.add_argument("--rows", type=Path, nargs="+", help="Fig. 8b rows (--out files): print the table against the "
                    "paper's values and, with --plot, draw them")
    a = ap.parse_args(argv)
    if a.bounds:
        print(rigid_bounds_table(rigid_bounds(a.bounds, tuple(a.traces.split(",")) if a.traces else tuple(FIG8B))))
        return
    if a.rows:
        table = pd.concat([pd.read_csv(f) for f in a.rows])
        rows = [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]
        rows = [r for r in rows if _slot_of(r) == a.slot]
        for r in rows:
            r["ref_deadline_met"] = FIG8B_PUBLISHED[r["policy"]][int(r["setting"][-2:]) - 1]
        print(fig8b_table(rows))
        if a.plot:
            plot(sorted(rows, key=lambda r: list(FIG8B).index(r["setting"])), a.plot, reference="the paper's Fig. 8b")
        return
    if a.fig8b is not None:
        t0, c0 = time.perf_counter(), time.process_time()
        if a.workers < 1:
            raise SystemExit(f"--workers must be at least 1, got {a.workers}")
        try:
            with interrupts.install():
                rows = fig8b(a.fig8b, tuple(a.policies.split(",")) if a.policies else POLICIES,
                             tuple(a.traces.split(",")) if a.traces else tuple(FIG8B), a.out, a.workers, a.slot)
        except (KeyboardInterrupt, interrupts.Terminated):
            raise SystemExit("fig8b: stopped; the runs that ended are in --out") from None
        print(f"Fig. 8b ({len(rows)} runs): {sum(r['cpu_s'] for r in rows):.0f} s CPU in the runs, "
              f"{time.process_time() - c0:.0f} s CPU in this process, {time.perf_counter() - t0:.0f} s wall")
        if a.plot:
            plot(rows, a.plot, with_reference=False)
        return
    rows = [agreement(s, p) for s in SETTINGS for p in POLICIES
            if p in REFERENCE_NAMES and (s != "elasticVpollux_e" or p != "themis") or p == "chronus"]
    print(agreement_table(rows))
    if a.plot:
        plot(rows, a.plot)


if __name__ == "__main__":
    main()
