"""``capsim predict``: score the runtime predictors on the measurements, or show one job's predictions."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the heavy libraries are imported where they are used, so `capsim --help` starts at once
    import pandas as pd

HELP = "evaluate the runtime predictors (MAPE per application x GPU x protocol) or show one job's predictions"

SHOW_DEFAULT = ("measured", "regression", "analytical", "wave")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="predict_command", required=True, metavar="ACTION")
    ev = sub.add_parser("evaluate", help="fit and score predictors under the named protocols; write CSV and plots")
    ev.add_argument("--out", metavar="DIR", default="results/predict", help="output directory (default: %(default)s)")
    ev.add_argument("--protocols", metavar="NAMES", help="comma-separated: interpolation,batch,gpus,compute,depth")
    ev.add_argument("--predictors", metavar="NAMES",
                    help="comma-separated: measured,regression,analytical,analytical_app,wave (default: all)")
    ev.add_argument("--seed", type=int, default=0, help="seed of the interpolation folds (default: 0)")
    ev.add_argument("--by-app", dest="by_gpu", action="store_false",
                    help="print only the per-application table (the per-GPU one is always in mape.csv)")
    ev.add_argument("--quiet", action="store_true", help="no progress line")
    sh = sub.add_parser("show", help="one job's runtime from every predictor")
    sh.add_argument("app", metavar="APP", help="application key like resnet50_pt, or a network with --framework")
    sh.add_argument("--framework", choices=("pytorch", "tensorflow"), help="framework when APP is a bare network")
    sh.add_argument("--gpu", required=True, help="GPU model name from the GPU table, e.g. M60, V100")
    sh.add_argument("--gpus", type=int, default=1, help="GPU count (default: 1)")
    sh.add_argument("--batch", type=int, required=True, help="batch size")
    sh.add_argument("--iterations", type=int, required=True, help="training iterations")
    sh.add_argument("--depth", type=int, help="network depth (variable-depth ResNet runs)")
    sh.add_argument("--predictors", metavar="KINDS", help=f"comma-separated kinds (default: {','.join(SHOW_DEFAULT)})")


def _names(text: str | None, default: tuple[str, ...]) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()] if text else list(default)


def parse_app(app: str, framework: str | None) -> tuple[str, str]:
    """(application, framework) from ``resnet50_pt`` or ``resnet50`` + ``--framework``."""
    from sim.model import CapsimError

    short = {"pt": "pytorch", "tf": "tensorflow"}
    if "_" in app and app.rsplit("_", 1)[1] in short:
        name, fw = app.rsplit("_", 1)
        if framework and framework != short[fw]:
            raise CapsimError(f"APP {app!r} says {short[fw]} but --framework says {framework}; give one of them")
        return name, short[fw]
    if framework is None:
        raise CapsimError(f"APP {app!r}: give the framework, e.g. {app}_pt, or --framework pytorch|tensorflow")
    return app, framework


def _show(args: argparse.Namespace) -> int:
    from predictors import build
    from sim.catalogue import gpu
    from sim.model import CapsimError, JobSpec, VMType

    application, framework = parse_app(args.app, args.framework)
    if args.gpus < 1 or args.batch < 1 or args.iterations < 1:
        raise CapsimError("--gpus, --batch and --iterations must be positive integers")
    spec = JobSpec(application, framework, args.iterations, args.batch, name=args.app, depth=args.depth)
    vm = VMType(name=f"{args.gpu}x{args.gpus}", gpu=gpu(args.gpu), gpus=args.gpus, price_per_hour=0.0)
    print(f"{application}/{framework} batch {args.batch}, {args.iterations} iterations on {args.gpus} x {args.gpu}")
    for kind in _names(args.predictors, SHOW_DEFAULT):
        p = build(kind)
        try:
            reason = p.support(spec, vm, args.gpus)
            t = p.runtime(spec, vm, args.gpus)
        except CapsimError:
            raise
        except Exception as e:  # noqa: BLE001 (one predictor failing on this job must not hide the others' answers)
            first = str(e).splitlines()[0] if str(e) else ""
            t, reason = math.nan, f"the predictor failed: {type(e).__name__}: {first}"
        shown = f"{t:12.1f} s  ({t / 3600:.2f} h)" if math.isfinite(t) else f"{'unsupported':>12}: {reason}"
        print(f"  {kind:<12} {shown}")
    return 0


def _plot(pred: pd.DataFrame, protocol: str, path: Path) -> None:
    """Predicted vs measured runtime, one panel per predictor that answered, one colour per application."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sub = pred[(pred["protocol"] == protocol) & np.isfinite(pred["predicted"]) & (pred["predicted"] > 0)]
    names = sorted(sub["predictor"].unique())
    if not names:
        return
    cols = min(4, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.0 * cols, 3.0 * rows), squeeze=False)
    colours = dict(zip(sorted(pred["app"].unique()), plt.get_cmap("tab10").colors))
    lo, hi = pred["measured"].min() * 0.7, pred["measured"].max() * 1.4
    for ax in axes.flat[len(names):]:
        ax.set_visible(False)
    for ax, name in zip(axes.flat, names):
        for app, g in sub[sub["predictor"] == name].groupby("app"):
            ax.scatter(g["measured"], g["predicted"], s=4, alpha=0.5, color=colours[app], label=app, rasterized=True)
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), title=name, xlabel="measured (s)",
               ylabel="predicted (s)")
    handles = {lab: h for ax in axes.flat for h, lab in zip(*ax.get_legend_handles_labels())}
    fig.legend(handles.values(), handles.keys(), fontsize=7, markerscale=2, loc="upper center",
               ncol=min(5, len(handles)), bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"predicted vs measured runtime, protocol: {protocol}")
    fig.tight_layout()
    fig.savefig(path, bbox_inches="tight", dpi=120)
    plt.close(fig)


def format_table(summary: pd.DataFrame, rows: tuple[str, ...] = ("protocol", "app")) -> str:
    """MAPE % per ``rows`` (protocol × application [× GPU]) and predictor (columns), coverage when below 100 %,
    the repeat noise floor and the best predictor (lowest MAPE among those answering over half the runs)."""
    import numpy as np

    s = summary.copy()
    s["cell"] = [
        "-" if not np.isfinite(m) else f"{100 * m:.1f}" + ("" if c > 0.995 else f" ({100 * c:.0f}%)")
        for m, c in zip(s["mape"], s["coverage"])
    ]
    keys = list(rows)
    table = s.pivot_table(index=keys, columns="predictor", values="cell", aggfunc="first")
    floor = s.groupby(keys)["noise_floor"].first().map(lambda v: "-" if not np.isfinite(v) else f"{100 * v:.1f}")
    best = s[np.isfinite(s["mape"]) & (s["coverage"] > 0.5)]
    best = best.loc[best.groupby(keys)["mape"].idxmin()].set_index(keys)["predictor"]
    table["floor"] = floor
    table["best"] = best
    return table.fillna("-").to_string()


def _evaluate(args: argparse.Namespace) -> int:
    from experiments.results import write_csv
    from sim.model import CapsimError
    from predictors.evaluation import PREDICTORS, PROTOCOLS, evaluate, summarise

    protocols = _names(args.protocols, PROTOCOLS)
    names = _names(args.predictors, PREDICTORS)
    for given, known, what in ((protocols, PROTOCOLS, "--protocols"), (names, PREDICTORS, "--predictors")):
        bad = [x for x in given if x not in known]
        if bad:
            raise CapsimError(f"{what}: unknown {', '.join(bad)}; choose from {', '.join(known)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    tty = sys.stderr.isatty()
    last = [-math.inf]

    def progress(msg: str) -> None:
        """On a terminal one line rewritten in place; in a log a line every 5 s at most."""
        now = time.perf_counter()
        if args.quiet or (not tty and now - last[0] < 5.0):
            return
        last[0] = now
        line = f"{now - start:6.0f}s {msg:<70}"
        print(f"\r{line}" if tty else line.rstrip(), end="" if tty else "\n", file=sys.stderr, flush=True)

    pred = evaluate(protocols, names, seed=args.seed, progress=progress)
    if not args.quiet and tty:
        print(file=sys.stderr)
    by_app = summarise(pred, by=("protocol", "app", "predictor"))
    by_gpu = summarise(pred, by=("protocol", "app", "gpu", "predictor"))
    write_csv(pred, out / "predictions.csv")
    write_csv(by_app, out / "mape_by_app.csv")
    write_csv(by_gpu, out / "mape.csv")
    for protocol in protocols:
        if (pred["protocol"] == protocol).any():
            _plot(pred, protocol, out / f"pred_vs_measured_{protocol}.png")
    print("MAPE % over the runs each predictor answered (coverage in brackets when not all);"
          " floor = MAPE of the mean of a run's repeats")
    if args.by_gpu:
        print(format_table(by_gpu, ("protocol", "app", "gpu")))
        print()
    print(format_table(by_app))
    print(f"\nwrote {out}/mape.csv (per application x GPU x protocol), mape_by_app.csv, predictions.csv, plots")
    return 0


def run(args: argparse.Namespace) -> int:
    return _show(args) if args.predict_command == "show" else _evaluate(args)
