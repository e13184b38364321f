"""Scoring predictors on the measurements: fit on each split's training runs, predict its test runs, MAPE per cell.

The predictors scored are the trainable kinds of the registry (``Predictor.trainable()``), each built with its default
parameters, or the ones named (``kind`` or ``kind(param=value, ...)``). Each is fitted with ``fit`` on a split's
training runs and answers its test runs with ``predict_runs`` (every run with its own GPU, GPU count, batch size,
iterations, CPU threads and depth). A predictor may decline a run (unsupported): a cell's MAPE is over the runs it
answered, and ``coverage`` (in ``coverage.csv`` and the tables) says which fraction that was.

A run's noise floor is how far it lies from the mean of its repeats (same application, framework, depth, GPU, GPU
count, batch, iterations, CPU threads and machine: the publication's disk-speed feature, which tells apart the hosts a
GPU type was measured on; the M60 AlexNet/PyTorch runs come from two hosts whose input pipelines differ 1.7×),
scaled by √(k/(k−1)) for k repeats so that it estimates the spread of a run around its true mean rather than around a
sample mean that includes it; a cell's floor is the mean over its runs that have repeats. No predictor can beat it on
average, so a figure below it is luck, and a target below it cannot be met honestly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from predictors.base import TrainablePredictor, build, registry
from predictors.measurements import NO_DEPTH, runs
from predictors.protocols import CELL_KEYS, DEFAULT, PROTOCOLS, Split, application_name, splits
from predictors.trace import Series
from predictors.uncertainty.provenance import ERROR_COLUMNS, PROTOCOL_OF
from sim.model import CapsimError
from sim.registry import did_you_mean

__all__ = ["PUBLISHED_MEANS", "TARGETS", "trainable_kinds", "parse_label", "parse_predictor", "noise_floor", "evaluate",
           "Evaluation", "protocol_summary", "expected_errors", "crossgpu_errors", "leave_one_series_out",
           "trace_scaling_errors", "TRACE_PROTOCOL", "CELL_COLUMNS"]

PUBLISHED_MEANS = {"batch": 0.084, "gpus": 0.138, "compute": 0.107, "depth": 0.20}
"""Mean MAPE per protocol of the published end-to-end regression on these runs."""
TARGETS = {"batch": 0.084, "gpus": 0.138, "compute": 0.107, "depth": 0.05, "interpolation": 0.05}
"""capsim's targets (issue 10); interpolation's is per application, or the application's noise floor."""
CELL_COLUMNS = list(CELL_KEYS) + ["predictor", "mape", "test_runs", "noise_floor"]
RUN_FEATURES = ["application", "framework", "gpu", "gpus", "batch_size", "iterations", "cpu_threads", "depth"]
MACHINE = "disk_speed"


def trainable_kinds() -> list[str]:
    """Every registered predictor kind that learns from runs (each class once, under its own name)."""
    from sim.contracts import PREDICTORS

    return [k for k, cls in PREDICTORS.kinds(aliases=False).items() if getattr(cls, "trainable", lambda: False)()]


def parse_label(text: str) -> tuple[str, str, dict[str, Any]]:
    """(label, kind, params) from ``kind`` or ``kind(param=value, ...)`` (values: numbers, true/false, null, words;
    ``a|b|c`` is a list), for any registered kind."""
    m = re.fullmatch(r"\s*([A-Za-z_][\w]*)\s*(?:\((.*)\))?\s*", text)
    if not m:
        raise CapsimError(f"predictor {text!r}: write a kind, or kind(param=value, ...)")
    kind, args = m.group(1), m.group(2)
    params: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in (args or "").split(","))):
        if "=" not in part:
            raise CapsimError(f"predictor {text!r}: {part!r} is not param=value")
        k, v = (x.strip() for x in part.split("=", 1))
        params[k] = _value(v)
    kinds = registry()
    if kind not in kinds:
        raise CapsimError(f"unknown predictor {kind!r}{did_you_mean(kind, kinds)} (the predictor kinds: "
                          f"{', '.join(sorted(kinds))})")
    return text.strip(), kind, params


def parse_predictor(text: str) -> tuple[str, str, dict[str, Any]]:
    """``parse_label`` for a predictor that can be evaluated: a trainable kind."""
    label, kind, params = parse_label(text)
    if not getattr(registry()[kind], "trainable", lambda: False)():
        raise CapsimError(f"predictor {kind!r} does not learn from runs and cannot be evaluated; trainable kinds: "
                          f"{', '.join(trainable_kinds())}")
    return label, kind, params


def _value(v: str) -> Any:
    if "|" in v:
        return [_value(x.strip()) for x in v.split("|") if x.strip()]
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v.strip("'\"")


def noise_floor(df: pd.DataFrame) -> np.ndarray:
    """Each run's distance to the mean of its repeats, relative and corrected (module docstring); NaN if alone."""
    keys = RUN_FEATURES + ([MACHINE] if MACHINE in df else [])
    grp = df.groupby(keys, dropna=False)["runtime_s"]
    k = grp.transform("size").to_numpy(float)
    mean = grp.transform("mean").to_numpy(float)
    y = df["runtime_s"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(k > 1, np.abs(y - mean) / y * np.sqrt(k / (k - 1)), np.nan)


Answers = list[tuple[str, np.ndarray, list[str]]]
"""Per predictor: its label, its answers to a split's test runs (seconds, NaN = declined) and each answer's source."""


def run_split(df: pd.DataFrame, split: Split, predictors: Sequence[tuple[str, str, dict[str, Any]]]) -> Answers:
    """Every predictor fitted on the split's training runs and asked its test runs, with the kind of each answer."""
    train, test = df.iloc[split.train], df.iloc[split.test]
    out = []
    for label, kind, params in predictors:
        p = build(kind, **params)
        assert isinstance(p, TrainablePredictor)
        with np.errstate(all="ignore"):
            pred = np.array(p.fit(train).predict_runs(test), dtype=np.float64)
            kinds = getattr(p, "run_sources", None)
            out.append((label, pred, kinds(test) if kinds is not None else ["model"] * len(test)))
    return out


@dataclass
class Evaluation:
    """Per-run predictions and per-cell scores of one evaluation."""

    predictions: pd.DataFrame
    cells: pd.DataFrame
    coverage: pd.DataFrame


Parallel = Callable[[Callable[[Any], Any], Sequence[Any], Callable[[int, Any], None], int], None]
"""How splits run on several processes: ``parallel(fn, items, on_result, workers)`` computes ``fn(item)`` for every
item and hands ``on_result(index, result)`` each result (the command line passes its one process pool,
``experiments.running.pool.run_parallel``, so its rules on signals and orphans hold here too)."""


def _run_item(item: tuple[pd.DataFrame | None, Split, Sequence[tuple[str, str, dict[str, Any]]]]) -> Answers:
    """``run_split`` of one parallel item; the shipped runs are read in the worker rather than sent with each."""
    data, split, specs = item
    return run_split(runs().reset_index(drop=True) if data is None else data, split, specs)


def evaluate(protocols: Sequence[str] = DEFAULT, predictors: Sequence[str] | None = None, seed: int = 0,
             data: pd.DataFrame | None = None, workers: int = 1,
             progress: Callable[[int, int, str], None] | None = None, parallel: Parallel | None = None) -> Evaluation:
    """Score ``predictors`` (default: every trainable kind) under ``protocols`` (module docstring); splits run on
    ``workers`` processes through ``parallel`` (in this process without it). ``progress(done, total, label)`` is
    called as splits finish."""
    df = (runs() if data is None else data).reset_index(drop=True)
    specs = [parse_predictor(p) for p in (predictors or trainable_kinds())]
    bad = [p for p in protocols if p not in PROTOCOLS]
    if bad:
        raise CapsimError(f"unknown evaluation protocol {bad[0]!r}: choose from {', '.join(PROTOCOLS)}")
    todo = [s for p in protocols for s in splits(df, p, seed) if len(s.test)]
    results: dict[int, Answers] = {}
    label = lambda s: f"{s.protocol} split {s.index + 1}"  # noqa: E731
    if workers <= 1 or parallel is None:
        for i, s in enumerate(todo):
            results[i] = run_split(df, s, specs)
            if progress:
                progress(len(results), len(todo), label(s))
    else:
        order = sorted(range(len(todo)), key=lambda i: -len(todo[i].train) * (todo[i].protocol == "interpolation"))
        items = [(None if data is None else df, todo[i], specs) for i in order]

        def arrived(k: int, result: Answers) -> None:
            results[order[k]] = result
            if progress:
                progress(len(results), len(todo), label(todo[order[k]]))

        parallel(_run_item, items, arrived, workers)
    return _assemble(df, todo, results)


def _assemble(df: pd.DataFrame, todo: list[Split], results: dict[int, Answers]) -> Evaluation:
    """Per-run predictions and per-cell scores; a cell spread over several splits (interpolation's folds) pools
    its runs from all of them."""
    floor = noise_floor(df)
    y_all = df["runtime_s"].to_numpy(float)
    preds = []
    pooled: dict[tuple, list[tuple[np.ndarray, np.ndarray]]] = {}
    for i, s in enumerate(todo):
        for label, pred, kinds in results[i]:
            cols = RUN_FEATURES + ([MACHINE] if MACHINE in df else []) + ["runtime_s"]
            frame = df.iloc[s.test][cols].rename(columns={"runtime_s": "measured"})
            preds.append(frame.assign(protocol=s.protocol, split=s.index, predictor=label, predicted=pred,
                                      source=kinds))
            where = {p: j for j, p in enumerate(s.test)}
            for c in s.cells:
                pooled.setdefault((*c.key, label), []).append((c.rows, pred[[where[p] for p in c.rows]]))
    cells, cover = [], []
    for key, parts in pooled.items():
        rows = np.concatenate([r for r, _ in parts])
        p = np.concatenate([q for _, q in parts])
        y = y_all[rows]
        ok = np.isfinite(p) & (p > 0)
        m = float(np.mean(np.abs(p[ok] - y[ok]) / y[ok])) if ok.any() else np.nan
        f = floor[rows]
        cells.append((*key, m, len(rows), float(np.nanmean(f)) if np.isfinite(f).any() else np.nan))
        cover.append((*key, float(ok.mean())))
    out = pd.DataFrame(cells, columns=CELL_COLUMNS)
    cov = pd.DataFrame(cover, columns=list(CELL_KEYS) + ["predictor", "coverage"])
    for frame in (out, cov):
        for col in ("gpus", "depth_k"):
            frame[col] = frame[col].astype("Int64")
    return Evaluation(pd.concat(preds, ignore_index=True) if preds else pd.DataFrame(), out, cov)


def protocol_summary(ev: Evaluation) -> pd.DataFrame:
    """Per protocol × predictor: mean MAPE over cells, cells, mean coverage, mean noise floor, published mean, the
    cells whose noise floor is above the published mean (there the published figure is below what the data allow),
    target, and (interpolation) the applications at or below 5 % or their noise floor."""
    c = ev.cells.merge(ev.coverage, on=list(CELL_KEYS) + ["predictor"])
    rows = []
    for (protocol, name), g in c.groupby(["protocol", "predictor"], sort=False):
        met = ""
        if protocol == "interpolation":
            ok = (g["mape"] <= TARGETS["interpolation"]) | (g["mape"] <= g["noise_floor"])
            met = f"{int(ok.sum())}/{len(g)}"
        published = PUBLISHED_MEANS.get(str(protocol), np.nan)
        rows.append({"protocol": protocol, "predictor": name, "mean_mape": g["mape"].mean(), "cells": len(g),
                     "coverage": g["coverage"].mean(), "noise_floor": g["noise_floor"].mean(),
                     "published": published, "floor_above_published": int((g["noise_floor"] > published).sum()),
                     "target": TARGETS.get(str(protocol), np.nan), "apps_at_target": met})
    return pd.DataFrame(rows)


def crossgpu_errors() -> dict[str, Any]:
    """The ``cloud`` predictor's cross-GPU scaling scored as an expected error, in runtime terms: the mean over its
    leave-one-GPU-out predictions of the calibrating models (``predictors.crossgpu``) of ``|measured speed /
    predicted speed − 1|`` (a runtime is iterations over a speed)."""
    from predictors.crossgpu import CALIBRATION, leave_one_gpu_out, shipped_speeds

    rows = [r for r in leave_one_gpu_out(shipped_speeds()) if r["calibrates"]]
    errs = np.array([abs(r["measured"] / r["predicted"] - 1.0) for r in rows])
    models = {r["model"] for r in rows} & set(CALIBRATION)
    return {"predictor": "cloud", "source": "scaled", "protocol": PROTOCOL_OF["scaled"], "error": float(errs.mean()),
            "cells": len(models), "runs": len(rows)}


def leave_one_series_out(series: Series | None = None) -> pd.DataFrame:
    """The ``trace`` predictor's scaling laws tested on the throughput tables' multi-GPU series
    (``predictors.trace.scaling_series``), each held out in turn: every other count n of the series predicted from its
    smallest m as runtime(n) / runtime(m), measured ``rate(m) / rate(n)``. ``linear`` is S(m) / S(n) with S(n) = n;
    ``amdahl`` uses the median serial share of the other series (the held-out one is not in its own default);
    ``measured`` reads the same job's ratio on another GPU model of the same table (the first by name that measured
    both counts), else falls back to that Amdahl. ``error`` is ``|predicted / measured − 1|``, in runtime terms."""
    from predictors.trace import SCALINGS, scaling_series, serial_share, speedup

    series = scaling_series() if series is None else series
    shares = {k: serial_share(r) for k, r in series.items()}
    rows = []
    for key, rates in series.items():
        table, gpu, job = key
        s = float(np.median([v for k, v in shares.items() if k != key]))
        m = min(rates)
        others = sorted(g for t, g, j in series if t == table and j == job and g != gpu)
        for n in sorted(x for x in rates if x != m):
            truth = rates[m] / rates[n]
            for law in SCALINGS:
                amdahl = float(speedup("linear" if law == "linear" else "amdahl", s, m)
                               / speedup("linear" if law == "linear" else "amdahl", s, n))
                pred = amdahl
                if law == "measured":
                    pred = next((series[(table, g, job)][m] / series[(table, g, job)][n] for g in others
                                 if n in series[(table, g, job)]), amdahl)
                rows.append({"law": law, "table": table, "gpu": gpu, "job": job, "m": m, "n": n, "serial": s,
                             "predicted": pred, "measured": truth, "error": abs(pred / truth - 1.0)})
    return pd.DataFrame(rows)


def trace_scaling_errors(series: Series | None = None) -> list[dict[str, Any]]:
    """The ``trace`` predictor's expected error of a GPU-count answer (kind ``gpus``) under each scaling law, at the
    default serial share: over ``leave_one_series_out``'s predictions, the mean over series (cells) of each series'
    mean error. The predictor is named by its ``describe()`` label, as ``Predictor.source`` looks it up."""
    loo = leave_one_series_out(series)
    rows = []
    for law, g in loo.groupby("law", sort=False):
        cells = g.groupby(["table", "gpu", "job"])["error"].mean()
        rows.append({"predictor": build("trace", scaling=str(law)).describe(), "source": "gpus",
                     "protocol": TRACE_PROTOCOL, "error": float(cells.mean()), "cells": len(cells), "runs": len(g)})
    return rows


TRACE_PROTOCOL = "series_loo"
"""The protocol name of ``trace_scaling_errors``'s rows: leave one throughput series out."""


def expected_errors(ev: Evaluation, crossgpu: bool = True) -> pd.DataFrame:
    """The expected relative error of each (predictor, kind of answer) (``predictors.uncertainty.provenance``): over
    the test runs of the protocol that asks that kind of question (``PROTOCOL_OF``), the mean over its cells of the mean
    ``|predicted − measured| / measured`` of the runs the predictor answered with that kind. The predictor is named
    by its ``describe()`` label (``hybrid(anchor=True)``), as ``Predictor.source`` looks it up. ``crossgpu`` adds the
    ``cloud`` predictor's cross-GPU scaling, scored by its leave-one-GPU-out test, and the ``trace`` predictor's
    scaling laws across GPU counts, scored by leaving one throughput series out (``trace_scaling_errors``)."""
    p = ev.predictions
    rows = []
    if len(p):
        ok = np.isfinite(p["predicted"]) & (p["predicted"] > 0)
        p = p[ok].assign(err=(p["predicted"] - p["measured"]).abs() / p["measured"])
        apps = pd.Series([application_name(a, d != NO_DEPTH) for a, d in zip(p["application"], p["depth"])],
                         index=p.index, dtype=object)
        p = p.assign(cell_app=apps)
        names = {label: build(kind, **params).describe() for label, kind, params in
                 (parse_predictor(x) for x in dict.fromkeys(p["predictor"]))}
        for (label, kind), g in p.groupby(["predictor", "source"], sort=False):
            protocol = PROTOCOL_OF.get(str(kind))
            g = g[(g["protocol"] == protocol) & g["cell_app"].notna()]
            if g.empty:
                continue
            keys = ["cell_app", "framework"] + CELL_GROUPS.get(str(protocol), [])
            cells = g.groupby(keys, dropna=False)["err"].mean()
            rows.append({"predictor": names[str(label)], "source": kind, "protocol": protocol,
                         "error": float(cells.mean()), "cells": len(cells), "runs": len(g)})
    if crossgpu:
        rows.append(crossgpu_errors())
        rows.extend(trace_scaling_errors())
    out = pd.DataFrame(rows, columns=ERROR_COLUMNS)
    return out.sort_values(["predictor", "source"], kind="stable", ignore_index=True)


CELL_GROUPS = {"batch": ["gpu", "gpus"], "batch_below": ["gpu", "gpus"], "gpus": ["gpu"], "depth": ["gpus", "split"],
               "between": ["gpu", "gpus", "split"]}
"""Columns beyond (application, framework) that tell a protocol's cells apart in the predictions table
(``predictors.protocols``; a depth cell is one GPU count at one depth threshold, i.e. one split)."""
