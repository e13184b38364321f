"""Evaluation protocols: which runs a predictor is fitted on, which it must predict, and how the answers are grouped.

A protocol is a list of splits (training rows, test rows) over the runs table; each split's test rows are grouped into
cells, the unit a MAPE is reported for. The variable-depth ResNet runs are the application ``resnet_depth`` (framework
``pytorch``). The DeepSpeech runs with a depth column (Quadro P600 and GT 750M, another network size) stay in every
training set but are in no cell: no published protocol covers them.

Published protocols (Gianniti, Zhang and Ardagna, CLOSER 2019; Lattuada et al., Cluster Computing 2022):
- ``batch``: per (application, GPU type, GPU count) cell with two or more batch sizes, the largest batch is predicted
  from the smaller ones. The largest batch of *every* cell is held out at once (one fit), which is at least as strict
  as holding out one cell at a time: no cell's largest batch is ever seen, on any GPU type or count.
- ``gpus``: per (application, GPU type) with two or more GPU counts, the largest count is predicted; again every GPU
  type's largest count is held out at once.
- ``compute``: trained on the Quadro P600, K80 and M60 runs, predict the GTX 1080 Ti; one cell per application.
- ``depth``: the variable-depth ResNet, trained on depth ≤ k (every GPU count), predict the deeper runs, for
  k ∈ {4, 5, 6, 8}; one cell per (GPU count, k).
- ``interpolation``: five random folds of every application's runs (fold i of every application held out together);
  one cell per application, over all its runs.
capsim's own protocols ask the two kinds of question the expected errors (``predictors.uncertainty.provenance``)
need and no publication holds out:
- ``batch_below`` mirrors ``batch`` downwards: the smallest batch of every cell predicted from the larger ones.
- ``between``: configurations between measured ones. Split 0 holds out every other interior batch size of each
  (application, GPU type, GPU count) with three or more (the 2nd, 4th, ...: each has measured sizes on both sides);
  split 1 every other interior GPU count of each (application, GPU type) with three or more. One cell per (application,
  GPU type, GPU count) held out.
capsim's former, harder protocols are kept under ``*_hard``: ``batch_hard`` (per application, the upper half of its
batch sizes, on every GPU at once, predicted from the lower half), ``gpus_hard`` (the upper half of its GPU counts),
``compute_hard`` (each GPU type in turn left out of every application; one cell per application × GPU type).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from predictors.measurements import NO_DEPTH
from sim.model import CapsimError

__all__ = ["PUBLISHED", "DEFAULT", "HARD", "PROTOCOLS", "DEPTH_KS", "COMPUTE_TRAIN", "COMPUTE_TEST", "Cell", "Split",
           "splits", "application_name", "CELL_KEYS"]

PUBLISHED = ("batch", "gpus", "compute", "depth", "interpolation")
DEFAULT = PUBLISHED + ("batch_below", "between")
"""What ``capsim predict evaluate`` runs by default: the published protocols, and capsim's ``batch_below`` and
``between`` for the expected errors of those kinds of answer."""
HARD = ("batch_hard", "gpus_hard", "compute_hard")
PROTOCOLS = DEFAULT + HARD
DEPTH_KS = (4, 5, 6, 8)
COMPUTE_TRAIN = ("QuadroP600", "K80", "M60")
COMPUTE_TEST = "GTX1080Ti"
CELL_KEYS = ("protocol", "application", "framework", "gpu", "gpus", "depth_k")


@dataclass(frozen=True)
class Cell:
    """One reported group of test runs: its key (``CELL_KEYS``; None where a field does not apply) and positions."""

    key: tuple
    rows: np.ndarray


@dataclass(frozen=True)
class Split:
    """One fit: positions of the training runs and of the test runs, and the test runs' cells."""

    protocol: str
    index: int
    train: np.ndarray
    test: np.ndarray
    cells: tuple[Cell, ...]


def application_name(application: str, has_depth: bool) -> str | None:
    """The application a run reports under: ``resnet_depth`` for the depth runs; None for DeepSpeech's depth runs."""
    if application == "resnet":
        return "resnet_depth"
    return None if has_depth else application


def _named(df: pd.DataFrame) -> pd.Series:
    return pd.Series([application_name(a, d != NO_DEPTH) for a, d in zip(df["application"], df["depth"])],
                     index=df.index, dtype=object)


def _cells(protocol: str, df: pd.DataFrame, test: np.ndarray, by: list[str], fixed: dict | None = None
           ) -> tuple[Cell, ...]:
    """Group test positions by ``by`` (columns of ``df`` plus ``application``) into cells keyed by ``CELL_KEYS``."""
    sub = df.iloc[test].assign(_pos=test, application=_named(df).iloc[test].to_numpy())
    sub = sub[sub["application"].notna()]
    out = []
    for vals, g in sub.groupby(by, sort=True):
        vals = vals if isinstance(vals, tuple) else (vals,)
        key = {"protocol": protocol, "application": None, "framework": None, "gpu": None, "gpus": None,
               "depth_k": None, **dict(zip(by, vals)), **(fixed or {})}
        key = {k: (int(v) if isinstance(v, (np.integer,)) else v) for k, v in key.items()}
        out.append(Cell(tuple(key[k] for k in CELL_KEYS), g["_pos"].to_numpy()))
    return tuple(out)


def _positions(mask: pd.Series | np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.asarray(mask, dtype=bool))


def splits(df: pd.DataFrame, protocol: str, seed: int = 0) -> Iterator[Split]:
    """The splits of ``protocol`` over the runs table ``df`` (positions into ``df``; module docstring)."""
    if protocol not in PROTOCOLS:
        raise CapsimError(f"unknown evaluation protocol {protocol!r}: choose from {', '.join(PROTOCOLS)}")
    everything = np.arange(len(df))
    named = _named(df)
    std = (df["depth"] == NO_DEPTH).to_numpy()
    app = ["application", "framework"]
    if protocol == "interpolation":
        fold = np.full(len(df), -1)
        for _, g in df.groupby(["application", "framework", df["depth"] != NO_DEPTH], sort=True):
            pos = df.index.get_indexer(g.index)
            perm = np.random.default_rng(np.random.SeedSequence(seed)).permutation(len(pos))
            fold[pos[perm]] = np.arange(len(pos)) % 5
        for k in range(5):
            test = _positions(fold == k)
            yield Split(protocol, k, np.setdiff1d(everything, test), test, _cells(protocol, df, test, app))
    elif protocol in ("batch", "gpus", "batch_below"):
        col, by = ("gpus", ["gpu"]) if protocol == "gpus" else ("batch_size", ["gpu", "gpus"])
        grp = df[std].groupby(app + by)[col]
        top = grp.transform("min" if protocol == "batch_below" else "max").reindex(df.index)
        many = grp.transform("nunique").reindex(df.index) > 1
        test = _positions(std & (df[col] == top).to_numpy() & many.to_numpy())
        yield Split(protocol, 0, np.setdiff1d(everything, test), test, _cells(protocol, df, test, app + by))
    elif protocol == "compute":
        train = _positions(df["gpu"].isin(COMPUTE_TRAIN))
        test = _positions(std & (df["gpu"] == COMPUTE_TEST).to_numpy())
        yield Split(protocol, 0, train, test, _cells(protocol, df, test, app, {"gpu": COMPUTE_TEST}))
    elif protocol == "depth":
        deep = (named == "resnet_depth").to_numpy()
        for i, k in enumerate(DEPTH_KS):
            test = _positions(deep & (df["depth"] > k).to_numpy())
            yield Split(protocol, i, np.setdiff1d(everything, test), test,
                        _cells(protocol, df, test, app + ["gpus"], {"depth_k": k}))
    elif protocol == "between":
        for i, (col, by) in enumerate((("batch_size", ["gpu", "gpus"]), ("gpus", ["gpu"]))):
            held = np.zeros(len(df), dtype=bool)
            for _, g in df[std].groupby(app + by):
                vals = sorted(g[col].unique())
                inner = set(vals[1:-1:2])
                held[df.index.get_indexer(g.index[g[col].isin(inner)])] = True
            test = _positions(held)
            yield Split(protocol, i, np.setdiff1d(everything, test), test,
                        _cells(protocol, df, test, app + ["gpu", "gpus"]))
    elif protocol in ("batch_hard", "gpus_hard"):
        col = "batch_size" if protocol == "batch_hard" else "gpus"
        upper = np.zeros(len(df), dtype=bool)
        for _, g in df[std].groupby(app):
            vals = sorted(g[col].unique())
            if len(vals) > 1:
                lower = set(vals[: max(1, len(vals) // 2)])
                upper[df.index.get_indexer(g.index[~g[col].isin(lower)])] = True
        test = _positions(upper)
        yield Split(protocol, 0, np.setdiff1d(everything, test), test, _cells(protocol, df, test, app))
    else:
        for i, gpu in enumerate(sorted(df.loc[std, "gpu"].unique())):
            test = _positions(std & (df["gpu"] == gpu).to_numpy())
            train = _positions((df["gpu"] != gpu).to_numpy())
            yield Split(protocol, i, train, test, _cells(protocol, df, test, app, {"gpu": gpu}))
