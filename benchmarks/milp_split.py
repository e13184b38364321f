"""Benchmark the MILP on decisions after a whole spot zone is revoked: one model against the same decision solved in
groups of waiting jobs (``split_above``, docs/milp.md "Large decisions: a zone's VMs revoked at once").

Each instance (tests/instances.py ``revoked``) has S empty slots and J waiting jobs of the J1–J6 mix on the paper's
catalogue, runtimes from the measured predictor. Both plans are priced by the full model's objective (x of the
starts, y of their VMs, h the larger of the longest span and the GPU-area, z of the jobs left waiting), so the
difference is what the groups cost; CPU seconds of ``MILP.decide`` (default node limit and gap, one thread) are
measured in this run, one after the other.

Usage: .venv/bin/python benchmarks/milp_split.py [--sizes 12x20:1500,16x24:2000,20x40:2500] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from optim.common import config_table  # noqa: E402
from optim.milp import build_model  # noqa: E402
from optim.milp.policy import MILP  # noqa: E402
from sim.catalogue import configurations, vm_types  # noqa: E402
from sim.model import Plan, Snapshot  # noqa: E402
from sim.risk import expected_snapshot  # noqa: E402
from tests.instances import revoked, runtime_table  # noqa: E402


def full_objective(snap: Snapshot, plan: Plan) -> tuple[float, int]:
    """The full model's objective at ``plan`` and its model's placements (every slot is kept: all are empty and
    there are at least as many jobs as slots, so plan nodes are model nodes)."""
    m = build_model(expected_snapshot(snap))
    lp, index = m.lp, config_table(snap.configs).index
    at = {(pl.job, pl.node, pl.config): i for i, pl in enumerate(m.placements)}
    v = np.zeros(len(lp.names))
    for c in lp.z.values():
        v[c] = 1.0
    spans: dict[tuple[int, str], float] = {}
    area: dict[tuple[int, str], float] = {}
    for a in plan.start:
        vm = plan.vms[a.node]
        assert vm is not None
        i = at[a.job_id, a.node, index[vm, a.gpus]]
        pl = m.placements[i]
        v[lp.x[i]], v[lp.z[a.job_id]] = 1.0, 0.0
        if (a.node, vm) in lp.y:
            v[lp.y[a.node, vm]] = 1.0
        spans[a.node, vm] = max(spans.get((a.node, vm), 0.0), pl.span)
        area[a.node, vm] = area.get((a.node, vm), 0.0) + pl.gpus * pl.span / snap.vm_type(vm).gpus
    for key, span in spans.items():
        v[lp.h[key]] = max(span, area[key])
    return float(lp.cost @ v) + lp.constant, len(m.placements)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="12x20:1500,16x24:2000,20x40:2500",
                    help="slots x jobs : split_above, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    table, source = runtime_table(configurations(tuple(vm_types().values())))
    print(f"runtimes: {source}; seed {args.seed}")
    print("| slots × jobs | placements | one model: objective, CPU s | groups (split_above): objective, CPU s "
          "| objective difference | CPU ratio |")
    print("|---|---:|---|---|---:|---:|")
    for item in args.sizes.split(","):
        shape, limit = item.split(":")
        slots, jobs = (int(x) for x in shape.split("x"))
        snap = revoked(slots, jobs, args.seed, table)
        c0 = time.process_time()
        one = MILP(split_above=None).decide(snap)
        t_one = time.process_time() - c0
        c0 = time.process_time()
        parts = MILP(split_above=int(limit)).decide(snap)
        t_parts = time.process_time() - c0
        v_one, n = full_objective(snap, one)
        v_parts, _ = full_objective(snap, parts)
        print(f"| {slots} × {jobs} | {n:,} | {v_one:.3f}, {t_one:.2f} | {v_parts:.3f} ({limit}), {t_parts:.2f} "
              f"| {100 * (v_parts / v_one - 1):+.2f} % | {t_one / max(t_parts, 1e-9):.1f}× |", flush=True)


if __name__ == "__main__":
    main()
