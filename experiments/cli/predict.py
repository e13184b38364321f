"""``capsim predict``: score the runtime predictors on the measurements, or show one job's predictions."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sim.model import CapsimError

if TYPE_CHECKING:
    import pandas as pd

HELP = ("evaluate the runtime predictors (published protocols, MAPE per cell), show one job's predictions with "
        "their expected error, the time/cost Pareto front of its configurations, or the cross-GPU scaling's "
        "leave-one-GPU-out error")

SHOW_DEFAULT = ("measured", "regression", "analytical", "wave", "hybrid", "cloud")
DEFAULT_PROTOCOLS = ("batch", "gpus", "compute", "depth", "interpolation", "batch_below", "between")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="predict_command", required=True, metavar="ACTION")
    ev = sub.add_parser("evaluate", help="fit and score predictors under the named protocols; write CSV and plots")
    ev.add_argument("--out", metavar="DIR", default="results/predict", help="output directory (default: %(default)s)")
    ev.add_argument("--protocols", metavar="NAMES",
                    help=f"comma-separated (default: {','.join(DEFAULT_PROTOCOLS)}, the published five and "
                         "capsim's batch_below and between; harder variants: batch_hard,gpus_hard,compute_hard; "
                         "'interference': the learned interference model left out by job type, docs/sharing.md)")
    ev.add_argument("--predictors", metavar="SPECS",
                    help="comma-separated kinds, each optionally with parameters, e.g. hybrid(anchor=true) "
                         "(default: every trainable predictor of the registry)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the interpolation folds (default: 0)")
    ev.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="processes fitting splits in parallel (default: %(default)s)")
    ev.add_argument("--quiet", action="store_true", help="no progress output")
    ev.add_argument("--ship", action="store_true",
                    help="also write the expected-error table into the package (predictors/data/expected_errors.csv, "
                         "what predict show and pareto state); needs the default protocols and predictors")
    sh = sub.add_parser("show", help="one job's runtime from every predictor, and which model answers it")
    sh.add_argument("app", metavar="APP", help="application key like resnet50_pt, or a network with --framework")
    sh.add_argument("--framework", choices=("pytorch", "tensorflow"), help="framework when APP is a bare network")
    sh.add_argument("--gpu", required=True, help="GPU model name from the GPU table, e.g. M60, V100")
    sh.add_argument("--gpus", type=int, default=1, help="GPU count (default: 1)")
    sh.add_argument("--batch", type=int, required=True, help="batch size")
    sh.add_argument("--iterations", type=int, required=True, help="training iterations")
    sh.add_argument("--depth", type=int, help="network depth (variable-depth ResNet runs)")
    sh.add_argument("--predictors", metavar="KINDS", help=f"comma-separated kinds (default: {','.join(SHOW_DEFAULT)})")
    pa = sub.add_parser("pareto", help="one job on every configuration of a catalogue or cloud selection: predicted "
                                       "time and cost with their intervals, deadline met, the time/cost Pareto front")
    pa.add_argument("app", metavar="APP", help="application key like resnet50_pt, or a network with --framework")
    pa.add_argument("--framework", choices=("pytorch", "tensorflow"), help="framework when APP is a bare network")
    pa.add_argument("--batch", type=int, required=True, help="batch size")
    pa.add_argument("--iterations", type=int, required=True, help="training iterations")
    pa.add_argument("--depth", type=int, help="network depth (variable-depth ResNet runs)")
    pa.add_argument("--deadline", type=float, metavar="HOURS", help="deadline in hours from submission (optional)")
    pa.add_argument("--predictor", default="hybrid", metavar="KIND",
                    help="the predictor that answers, a kind or kind(param=value, ...) (default: %(default)s)")
    pa.add_argument("--catalogue", choices=("paper", "cloud"),
                    help="VM types: the paper's catalogue, or the cloud catalogue (default: paper, or cloud when a "
                         "--provider, --region or --gpu filter is given)")
    pa.add_argument("--provider", help="cloud provider (aws, azure, gcp)")
    pa.add_argument("--region", help="cloud region")
    pa.add_argument("--gpu", metavar="MODELS", help="comma-separated GPU models to keep")
    pa.add_argument("--out", metavar="DIR", default="results/pareto",
                    help="where pareto.csv and pareto.png are written (default: %(default)s)")
    sub.add_parser("crossgpu", help="the cross-GPU scaling of the 'cloud' predictor: its fit, its leave-one-GPU-out "
                                    "error per model and the candidate features (docs/predictors.md)")


def split_specs(text: str | None) -> list[str]:
    """Comma-separated items, commas inside parentheses kept: ``a,b(x=1,y=2)`` → ``["a", "b(x=1,y=2)"]``."""
    if not text:
        return []
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [x for x in out if x]


def parse_app(app: str, framework: str | None) -> tuple[str, str]:
    """(application, framework) from ``resnet50_pt`` or ``resnet50`` + ``--framework``."""
    short = {"pt": "pytorch", "tf": "tensorflow"}
    if "_" in app and app.rsplit("_", 1)[1] in short:
        name, fw = app.rsplit("_", 1)
        if framework and framework != short[fw]:
            raise CapsimError(f"APP {app!r} says {short[fw]} but --framework says {framework}; give one of them")
        return name, short[fw]
    if framework is None:
        raise CapsimError(f"APP {app!r}: give the framework, e.g. {app}_pt, or --framework pytorch|tensorflow")
    return app, framework


def answer_text(t: float, src: Any) -> str:
    """An answer's interval and source: ``443.0–690.6 s (compute, error 21.9 %)``, or the source alone where its
    error was never measured."""
    from predictors.uncertainty.provenance import KINDS

    label = src.kind if src.kind in KINDS else f"{src.kind}?"
    if not math.isfinite(src.error):
        return f"{label}, error not measured"
    lo, hi = src.interval(t)
    return f"{lo:.1f}–{hi:.1f} s ({label}, error {100 * src.error:.1f} %)"


def _show(args: argparse.Namespace) -> int:
    from predictors import build
    from predictors.evaluation import parse_label
    from sim.catalogue import gpu
    from sim.model import JobSpec, VMType

    application, framework = parse_app(args.app, args.framework)
    if args.gpus < 1 or args.batch < 1 or args.iterations < 1:
        raise CapsimError("--gpus, --batch and --iterations must be positive integers")
    spec = JobSpec(application, framework, args.iterations, args.batch, name=args.app, depth=args.depth)
    vm = VMType(name=f"{args.gpu}x{args.gpus}", gpu=gpu(args.gpu), gpus=args.gpus, price_per_hour=0.0)
    kinds = split_specs(args.predictors) or list(SHOW_DEFAULT)
    built = []
    for kind in kinds:
        try:
            _, name, params = parse_label(kind)
            built.append(build(name, **params))
        except CapsimError as e:
            raise CapsimError(f"--predictors: {e}") from None
    print(f"{application}/{framework} batch {args.batch}, {args.iterations} iterations on {args.gpus} x {args.gpu}; "
          f"the interval holds the times within the answer's expected error (capsim predict evaluate)")
    errors: list[CapsimError] = []
    answered = False
    for kind, p in zip(kinds, built):
        try:
            reason = p.support(spec, vm, args.gpus)
            t = p.runtime(spec, vm, args.gpus)
            src = p.source(spec, vm, args.gpus) if math.isfinite(t) else None
        except CapsimError as e:  # this predictor does not know the job (another one may: cloud knows BERT)
            errors.append(e)
            t, reason = math.nan, str(e)
        except Exception as e:  # noqa: BLE001 (one predictor failing on this job must not hide the others' answers)
            first = str(e).splitlines()[0] if str(e) else ""
            t, reason = math.nan, f"the predictor failed: {type(e).__name__}: {first}"
        if math.isfinite(t):
            shown = f"{t:12.1f} s  ({t / 3600:.2f} h)  {answer_text(t, src)}"
        else:
            shown = f"{'unsupported':>12}: {reason}"
        how = getattr(p, "explain", None)
        extra = f"  [{how(spec, vm, args.gpus)}]" if how is not None and math.isfinite(t) else ""
        print(f"  {kind:<12} {shown}{extra}")
        answered |= math.isfinite(t)
    if errors and not answered:
        raise errors[0]
    return 0


class Progress:
    """Splits done out of the total: a bar redrawn in place on a terminal, one plain line per split otherwise."""

    def __init__(self, quiet: bool, stream: TextIO | None = None, width: int = 28):
        self.quiet, self.width, self.stream = quiet, width, stream or sys.stderr
        self.t0 = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.quiet:
            return
        elapsed = time.monotonic() - self.t0
        if self.tty:
            fill = int(self.width * done / max(total, 1))
            bar = "#" * fill + "." * (self.width - fill)
            end = "\n" if done == total else ""
            self.stream.write(f"\r[{bar}] {done}/{total} splits  {elapsed:5.0f} s  {label:<28}{end}")
        else:
            self.stream.write(f"[{elapsed:6.1f} s] {done}/{total} splits done: {label}\n")
        self.stream.flush()


def _plot(pred: pd.DataFrame, protocol: str, path: Path) -> None:
    """Predicted vs measured runtime, one panel per predictor that answered, one colour per application."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sub = pred[(pred["protocol"] == protocol) & np.isfinite(pred["predicted"]) & (pred["predicted"] > 0)]
    names = list(dict.fromkeys(sub["predictor"]))
    if not names:
        return
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.2 * rows), squeeze=False)
    label = sub["application"] + "_" + sub["framework"].map({"pytorch": "pt", "tensorflow": "tf"})
    colours = dict(zip(sorted(label.unique()), plt.get_cmap("tab10")(np.arange(10))))
    lo, hi = pred["measured"].min() * 0.7, pred["measured"].max() * 1.4
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        mine = sub["predictor"] == name
        for app in sorted(label[mine].unique()):
            g = sub[mine & (label == app)]
            ax.scatter(g["measured"], g["predicted"], s=4, alpha=0.5, color=colours[app], label=app, rasterized=True)
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), title=name, xlabel="measured (s)",
               ylabel="predicted (s)")
    handles = {lab: h for ax in axes.flat for h, lab in zip(*ax.get_legend_handles_labels())}
    fig.legend(handles.values(), handles.keys(), fontsize=7, markerscale=2, loc="upper center",
               ncol=min(4, len(handles)), bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"predicted vs measured runtime, protocol: {protocol}")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", dpi=110, metadata={"Software": None})
    plt.close(fig)


def _percent(v: Any) -> str:
    return "-" if v is None or v != v else f"{100 * v:.1f}"


def summary_table(summary: pd.DataFrame) -> str:
    """Mean MAPE % over cells per protocol (rows) and predictor (columns), with the noise floor, the published mean,
    the cells whose floor is above it, the target, and, for interpolation, the applications at target (≤ 5 % or at
    their floor) per predictor."""
    s = summary.copy()
    s["cell"] = [_percent(m) + ("" if c > 0.995 else f" ({100 * c:.0f}%)")
                 for m, c in zip(s["mean_mape"], s["coverage"])]
    s.loc[s["apps_at_target"] != "", "cell"] += " [" + s["apps_at_target"] + "]"
    order = list(dict.fromkeys(s["protocol"]))
    table = s.pivot_table(index="protocol", columns="predictor", values="cell", aggfunc="first").reindex(order)
    table = table[list(dict.fromkeys(s["predictor"]))]
    first = s.groupby("protocol", sort=False).first()
    table["floor"] = first["noise_floor"].map(_percent)
    table["published"] = first["published"].map(_percent)
    table["floor>published"] = [f"{k}/{n}" if p == p else "-"
                                for k, n, p in zip(first["floor_above_published"], first["cells"], first["published"])]
    table["target"] = first["target"].map(_percent)
    return table.fillna("-").to_string()


def application_table(cells: pd.DataFrame) -> str:
    """Mean MAPE % over cells per protocol × application × framework (rows, in evaluation order) and predictor."""
    keys = ["protocol", "application", "framework"]
    t = cells.groupby(keys + ["predictor"], sort=False)["mape"].mean().unstack("predictor")
    t = t[list(dict.fromkeys(cells["predictor"]))].map(_percent)
    t["floor"] = cells.groupby(keys, sort=False)["noise_floor"].mean().map(_percent)
    return t.to_string()


def _evaluate(args: argparse.Namespace) -> int:
    from experiments.results.files import write_csv
    from experiments.running.pool import run_parallel
    from predictors.evaluation import evaluate, expected_errors, parse_predictor, protocol_summary
    from predictors.protocols import PROTOCOLS
    from predictors.uncertainty.provenance import format_table, shipped_path
    from sim.registry import did_you_mean

    if args.ship and (args.protocols or args.predictors or args.seed != 0):
        raise CapsimError("--ship writes the expected errors every predictor states: it needs the default "
                          "evaluation (no --protocols, --predictors or --seed)")
    protocols = split_specs(args.protocols) or list(DEFAULT_PROTOCOLS)
    interference = "interference" in protocols
    protocols = [x for x in protocols if x != "interference"]
    bad = [x for x in protocols if x not in PROTOCOLS]
    if bad:
        known = [*PROTOCOLS, "interference"]
        raise CapsimError(f"--protocols: unknown protocol {bad[0]!r}{did_you_mean(bad[0], known)} (the "
                          f"protocols: {', '.join(known)})")
    names = split_specs(args.predictors) or None
    for n in names or []:
        try:
            parse_predictor(n)
        except CapsimError as e:
            raise CapsimError(f"--predictors: {e}") from None
    if args.workers < 1:
        raise CapsimError(f"--workers must be at least 1, got {args.workers}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if interference:
        _evaluate_interference(out)
        if not protocols:
            return 0
    t0 = time.perf_counter()
    ev = evaluate(protocols, names, seed=args.seed, workers=args.workers, progress=Progress(args.quiet),
                  parallel=run_parallel)
    summary = protocol_summary(ev)
    write_csv(ev.cells, out / "cells.csv")
    write_csv(ev.coverage, out / "coverage.csv")
    write_csv(summary, out / "summary.csv")
    write_csv(ev.predictions, out / "predictions.csv")
    errors = expected_errors(ev)
    write_csv(errors, out / "expected_errors.csv")
    if args.ship:
        write_csv(errors, shipped_path())
    for protocol in protocols:
        if len(ev.predictions) and (ev.predictions["protocol"] == protocol).any():
            _plot(ev.predictions, protocol, out / f"pred_vs_measured_{protocol}.png")
    print("Mean MAPE % over each protocol's cells (coverage in brackets when below 100 %; interpolation: "
          "applications at <= 5 % or their noise floor); floor = mean noise floor of the cells; floor>published = "
          "cells whose noise floor is above the published mean")
    print(summary_table(summary))
    print()
    print(application_table(ev.cells))
    print("\nExpected error per kind of answer (what predict show and predict pareto state):\n")
    print(format_table(errors))
    shipped = f"; the expected errors also to {shipped_path()}" if args.ship else ""
    print(f"\nwrote {out}/cells.csv (MAPE per cell), summary.csv, coverage.csv, predictions.csv, "
          f"expected_errors.csv and plots in {time.perf_counter() - t0:.0f} s{shipped}")
    return 0


def _pareto(args: argparse.Namespace) -> int:
    from experiments.cli.predict_pareto import Job, figure, format_table, pareto_table
    from experiments.results.files import write_csv
    from predictors import build
    from predictors.evaluation import parse_label
    from sim.catalogue import select_vm_types, vm_types
    from sim.model import JobSpec

    application, framework = parse_app(args.app, args.framework)
    if args.batch < 1 or args.iterations < 1:
        raise CapsimError("--batch and --iterations must be positive integers")
    if args.deadline is not None and not (math.isfinite(args.deadline) and args.deadline > 0):
        raise CapsimError(f"--deadline must be a positive number of hours, got {args.deadline}")
    filters = {"provider": args.provider, "region": args.region,
               "gpu": split_specs(args.gpu) or None}
    cloud = args.catalogue == "cloud" or (args.catalogue is None and any(v is not None for v in filters.values()))
    if cloud:
        types = select_vm_types(**filters)
    else:
        if any(v is not None for v in filters.values()):
            raise CapsimError("--provider, --region and --gpu select from the cloud catalogue; drop --catalogue "
                              "paper or them")
        types = tuple(vm_types().values())
    _, kind, params = parse_label(args.predictor)
    predictor = build(kind, **params)
    job = Job(JobSpec(application, framework, args.iterations, args.batch, name=args.app, depth=args.depth),
              math.inf if args.deadline is None else args.deadline * 3600)
    table = pareto_table(job, types, predictor)
    where = "the cloud catalogue" + "".join(f" {k}={v}" for k, v in filters.items() if v) if cloud else \
        "the paper's catalogue"
    deadline = f", deadline {args.deadline:g} h" if args.deadline is not None else ""
    print(f"{application}/{framework} batch {args.batch}, {args.iterations} iterations{deadline}: {len(table)} "
          f"configurations of {where} answered by {predictor.describe()}; * = Pareto front (no other is both faster "
          f"and cheaper); intervals: the times within the answer's expected error (capsim predict evaluate)")
    print(format_table(table, job))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(table, out / "pareto.csv")
    figure(table, job, f"{args.app} b{args.batch} x{args.iterations} ({predictor.describe()})", out / "pareto.png")
    print(f"\nwrote {out}/pareto.csv and pareto.png")
    return 0


def _evaluate_interference(out: Path) -> None:
    from experiments.results.files import write_csv
    from predictors.interference.learned import SEED_RMSLE, leave_family_out

    t0 = time.perf_counter()
    table = leave_family_out()
    write_csv(table, out / "interference.csv")
    print("Learned interference model (random forest on layer-graph features), each job family left out of the "
          "training and predicted: slowdowns of its measured pairs (RMSLE, MAPE; 'constant': the training pairs' "
          "median) and utilisation alone (RMSLE in %; 'constant': the training types' median)")
    print(table.round(3).to_string(index=False))
    print(f"the seed (Yeung et al., HotCloud'20) reports RMSLE {SEED_RMSLE} for utilisation on its own workloads; "
          f"wrote {out}/interference.csv in {time.perf_counter() - t0:.0f} s\n")


def _crossgpu() -> int:
    """Print the scaling fitted on every measured GPU, its leave-one-GPU-out errors per model, and the candidate
    feature sets compared."""
    from predictors.crossgpu import compare_features, default_scaling, format_table, leave_one_gpu_out, shipped_speeds

    speeds = shipped_speeds()
    s = default_scaling()
    print(f"speed ∝ {s.describe()}  (fitted on {', '.join(s.models)}; peak single-GPU samples/s)\n")
    print(format_table(leave_one_gpu_out(speeds, s.features)))
    print("\nCandidate features (speed relative to the A100-40GB for the GPUs no table measured):\n")
    print(compare_features(speeds))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.predict_command == "pareto":
        return _pareto(args)
    if args.predict_command == "crossgpu":
        return _crossgpu()
    return _show(args) if args.predict_command == "show" else _evaluate(args)
