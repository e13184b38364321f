"""The figure gallery in ``docs/``: every figure of ``capsim plot``, drawn from the quickstart and paper sweeps.

    python -m studies.gallery        # runs what is missing of both sweeps into results/, then draws

Writes ``docs/img/<sweep>_<figure>.png`` (column width, small PNGs) and ``docs/gallery.md``, so a reader sees every
figure before running anything. The runs are the ones ``capsim sweep`` makes (same ids, resumed if present), so the
same results give the same images; only fresh runs redraw the decision-time figures differently (they show measured
wall-clock times).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["main", "CAPTIONS"]

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "experiments"
DPI = 130

CAPTIONS = {
    "cost_breakdown": "Total cost and its two parts per policy and grid point: mean over seeds with its 95% "
                      "t-interval (clipped at 0). Each part has its own scale (log where the values span orders of "
                      "magnitude), so VM cost stays visible next to a tardiness cost fifty times larger.",
    "cost_breakdown_page": "The same figure at page width (`--width page`, 6.9 in): the panels side by side.",
    "tardiness_late": "Tardiness cost and the share of jobs that finish after their deadline; the share compares "
                      "grid points with different job counts.",
    "pareto": "VM cost against tardiness cost, one panel per grid point, since each is a different problem: every "
              "run small, the mean per policy large; the dashed staircase bounds what the Pareto-optimal means "
              "dominate.",
    "cdf": "Distributions of job completion time and of lateness (end − deadline; right of the dotted line is "
           "late), every job of every run pooled; markers at the deciles.",
    "cost_vs_mean_interarrival": "Total cost against the mean inter-arrival time, a line per policy with its "
                                 "intervals (dodged, so none hides another), a panel per value of the other grid "
                                 "fields.",
    "cost_vs_nodes": "Total cost against the number of node slots, a panel per mean inter-arrival time.",
    "decision_time": "Wall time of the decisions that had jobs waiting, per policy (median, quartiles and 95th "
                     "percentile, one row each); then, over the decisions that started a job, the median against "
                     "the jobs in the system and, for the MILP, against the model's variables (measured wall-clock "
                     "times: new runs give a slightly different figure).",
    "timeline": "One run: each node slot's VMs over time (colour by VM type, boot time hatched), one row per GPU, "
                "and the stretch of each job over the GPUs it held (blue on time, red late; job ids where they "
                "fit). Jobs sharing a VM sit side by side; idle GPUs show the VM's colour. Where GPU rows would "
                "print thinner than 4 points (200 jobs on 8-GPU VMs at column width), it shows one band per slot "
                "instead, with the share of its GPUs held by jobs on time and late.",
    "metric_gpu_utilisation": "Any declared metric, here GPU utilisation (busy over billed GPU-seconds, interval "
                              "clipped at 1), with `capsim plot DIR --metrics gpu_utilisation`.",
}


@dataclass
class Source:
    """A sweep the gallery draws: its file, the grid point its timeline shows, extra figures."""

    name: str
    file: Path
    timeline_at: dict[str, Any] | None = None
    metrics: list[str] = field(default_factory=list)
    page: list[str] = field(default_factory=list)

    def commands(self, run_id: str | None) -> str:
        """The commands that make this sweep's figures by hand."""
        out = f"results/{self.name}"
        lines = [f"capsim sweep experiments/{self.file.name} --out {out}",
                 f"capsim plot {out}" + (f" --run {run_id}" if self.timeline_at and run_id else "")
                 + (f" --metrics {','.join(self.metrics)}" if self.metrics else "")]
        lines += [f"capsim plot {out} --width page --only {','.join(self.page)}"] if self.page else []
        return "\n".join(lines)


SOURCES = [
    Source("quickstart", HERE / "quickstart.yaml"),
    Source("paper", HERE / "paper.yaml", {"workload.mean_interarrival": 30, "cluster.nodes": 5},
           ["gpu_utilisation"], ["cost_breakdown"]),
]


def draw(src: Source, results: Path, img: Path, workers: int) -> tuple[list[tuple[str, Path]], str]:
    """Run what is missing of ``src`` into ``results/<name>``, draw its figures into ``img``; (figure, file) pairs
    and the run the timeline shows."""
    from experiments import api
    from experiments.plots import FIGURES, PlotData, render, specs
    from experiments.plots.layout import save
    from experiments.plots.timeline import default_run

    runs = api.run(src.file, out=results / src.name, workers=workers)
    data = PlotData(runs.tables, runs.fields, runs.policies)
    run_id = default_run(data, src.timeline_at)
    out: list[tuple[str, Path]] = []
    todo = [(n, "column") for n in FIGURES] + [(n, "page") for n in src.page] + ([("metric", "column")]
                                                                                if src.metrics else [])
    for name, width in todo:
        for spec in specs(name, data, width, run_id=run_id, metrics=src.metrics):
            stem = spec.name + ("_page" if width == "page" else "")
            (path,) = save(render(spec, width), img, f"{src.name}_{stem}", width, DPI, formats=("png",))
            out.append((stem, path))
    return out, run_id


def page(drawn: list[tuple[Source, list[tuple[str, Path]], str]], docs: Path) -> str:
    """The text of ``docs/gallery.md``."""
    lines = ["# Figure gallery", "",
             "Every figure `capsim plot` draws, from the two example sweeps, at column width (3.3 in) unless noted.",
             "Regenerate all of it (the missing runs, then every image and this page) with:", "", "```bash",
             "python -m studies.gallery", "```", "",
             f"PNGs here are small ({DPI} dpi); `capsim plot` writes 200 dpi PNGs and PDFs with embedded fonts.", ""]
    for src, figs, run_id in drawn:
        lines += [f"## {src.name}", "", "```bash", src.commands(run_id), "```", ""]
        for stem, path in figs:
            lines += [f"### {src.name}: {stem}", "", CAPTIONS.get(stem, ""), "",
                      f"![{src.name} {stem}]({path.relative_to(docs).as_posix()})", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from sim.model import CapsimError

    p = argparse.ArgumentParser(prog="python -m studies.gallery", description=__doc__.splitlines()[0])
    p.add_argument("--results", default="results", metavar="DIR",
                   help="where the sweeps' results go (default: results)")
    p.add_argument("--docs", default=str(ROOT / "docs"), metavar="DIR", help="the docs folder (default: docs/)")
    p.add_argument("--workers", type=int, default=2, metavar="N", help="worker processes for missing runs (default 2)")
    args = p.parse_args(argv)
    docs = Path(args.docs)
    try:
        drawn = [(s, *draw(s, Path(args.results), docs / "img", args.workers)) for s in SOURCES]
    except CapsimError as e:
        print(f"gallery: error: {e}", file=sys.stderr)
        return 2
    (docs / "gallery.md").write_text(page(drawn, docs), encoding="utf-8")
    print(f"{sum(len(figs) for _, figs, _ in drawn)} figures in {docs / 'img'}; {docs / 'gallery.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
