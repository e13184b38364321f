"""The structured regression family: per GPU type, time per iteration as a non-negative sum of physical terms.

For one application, the time per iteration ``y = runtime / iterations`` of a run with global batch ``B`` on ``n``
GPUs with ``c`` CPU threads, ``I`` iterations and network depth ``d`` is modelled per GPU type as ``y = Σ_k θ_k x_k``
with ``θ ≥ 0`` and terms ``x`` among:

- ``fixed`` 1 — per-iteration work that does not depend on the batch (kernel launches, optimizer step);
- ``work`` B/n — the per-GPU forward and backward pass;
- ``allreduce`` (n−1)/n — the ring all-reduce of the gradients (0 on one GPU);
- ``input`` B/c and ``input_gpu`` B/(n·c) — decoding and augmenting samples on the CPU threads, from one pool for all
  GPUs (PyTorch's loader) or per GPU (TensorFlow's benchmark pipeline); ``input_serial`` B — the part of the global
  batch's host work that does not spread over the threads (Amdahl: collating the batch and copying it to the GPUs from
  one process), so that the input time B·(a + b/c) saturates as threads are added, as the measured runs do;
- ``startup`` 1/I — a fixed start-up time spread over the iterations (runtime = startup + I × the rest);
- with a depth: ``depth_fixed`` d, ``depth_work`` d·B/n, ``depth_allreduce`` d·(n−1)/n (every module adds launches,
  work and gradients).

The terms combine in one of two ways (``combine``): ``sum`` (everything adds up), or ``max``: the input pipeline
overlaps the GPU (the loader prepares the next batch while the GPU trains on this one), so ``y = max(G, P)`` with
``G`` the GPU side (every term but the input ones) and ``P`` the input side (the input terms and ``startup``).

A GPU type measured on several machines (hosts told apart by the runs' disk speed, the publication's feature) gets
one coefficient per machine for each host term (``input``, ``input_gpu``, ``startup``: the host's CPUs and start-up)
and shares the others; a row naming no known machine (a catalogue query) is read on the GPU type's most measured one.

Fitted by non-negative least squares in relative error (rows weighted by 1/y); ``max`` by alternating: each run is
assigned to the side that is larger under the current fit, each side is refitted on its runs, until the assignment
settles (at most ``MAX_ROUNDS``; the best fit seen is kept). A GPU type measured at a single GPU count cannot
separate the all-reduce from the rest: its all-reduce terms take the median of the GPU types that can (0 if none). A
GPU type never measured is answered by one pooled model over all GPU types in which the GPU-side terms (``fixed``,
``work``, ``depth_*`` except the all-reduce) are divided by the GPU's speed to the power ``alpha``; ``alpha`` (from
``ALPHAS``) is chosen by holding out the fastest measured GPU and predicting it from the others. The speed is the
per-die GFLOP/s that identifies the GPU in the measurements (board figure over dies: K80 and M60 rows are per die,
at their base clock), else the datasheet FP32 TFLOP/s × 1000.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from sim.catalogue import gpu_models
from sim.model import GPUModel

__all__ = ["TERMS", "TERM_SETS", "LEVELS", "HOST", "COMM_SHAPES", "with_comm", "StructuredModel", "fit_structured",
           "speed", "row_speeds", "row_machines", "input_scaling"]

TERMS: dict[str, Callable[[dict[str, np.ndarray]], np.ndarray]] = {
    "fixed": lambda v: np.ones_like(v["B"]),
    "work": lambda v: v["B"] / v["n"],
    "allreduce": lambda v: (v["n"] - 1) / v["n"],
    "input": lambda v: v["B"] / v["cpu"],
    "input_gpu": lambda v: v["B"] / (v["n"] * v["cpu"]),
    "input_serial": lambda v: v["B"],
    "startup": lambda v: 1.0 / v["I"],
    "depth_fixed": lambda v: v["d"],
    "depth_work": lambda v: v["d"] * v["B"] / v["n"],
    "depth_allreduce": lambda v: v["d"] * (v["n"] - 1) / v["n"],
    "allreduce_tree": lambda v: np.log2(v["n"]),
    "depth_allreduce_tree": lambda v: v["d"] * np.log2(v["n"]),
    "allreduce_linear": lambda v: v["n"] - 1,
    "depth_allreduce_linear": lambda v: v["d"] * (v["n"] - 1),
}
GPU_SIDE = {"fixed", "work", "depth_fixed", "depth_work"}
"""Terms that run on the GPU and scale with its speed in the pooled model."""
COMM_SHAPES = ("ring", "tree", "linear")
"""How the gradient exchange grows with the GPU count n: ``ring`` (n−1)/n (ring all-reduce: each GPU sends 2(n−1)/n
of the gradients), ``tree`` log2 n (tree all-reduce), ``linear`` n−1 (one GPU sends the parameters to and gathers the
gradients from every other, as PyTorch's single-process DataParallel does)."""
ALLREDUCE = {"allreduce", "depth_allreduce", "allreduce_tree", "depth_allreduce_tree", "allreduce_linear",
             "depth_allreduce_linear"}
CORE = ("fixed", "work", "allreduce", "startup")
DEPTH = ("depth_fixed", "depth_work", "depth_allreduce")
INPUTS = {"input", "input_gpu", "input_serial"}
HOST = INPUTS | {"startup"}
"""Terms run by the host (loader threads, start-up): their coefficients are per machine where a GPU type was measured
on several machines (``row_machines``), the other terms are shared by the GPU type."""
MACHINE = "disk_speed"
"""The runs' column that tells the machines apart: the publication's disk-speed feature, one value per host."""
TERM_SETS: dict[str, tuple[tuple[str, ...], str]] = {
    "core": (CORE, "sum"),
    "input": (CORE + ("input",), "sum"),
    "input_gpu": (CORE + ("input_gpu",), "sum"),
    "both_inputs": (CORE + ("input", "input_gpu"), "sum"),
    "input_max": (CORE + ("input",), "max"),
    "input_gpu_max": (CORE + ("input_gpu",), "max"),
    "input_amdahl": (CORE + ("input", "input_serial"), "sum"),
    "input_amdahl_max": (CORE + ("input", "input_serial"), "max"),
}
"""The candidates: name → (terms, combine); depth terms are added for an application measured at several depths."""
MAX_ROUNDS = 12


def with_comm(terms: Sequence[str], shape: str) -> tuple[str, ...]:
    """``terms`` with the all-reduce terms in the given shape (``COMM_SHAPES``)."""
    if shape not in COMM_SHAPES:
        raise ValueError(f"unknown communication shape {shape!r}: choose from {', '.join(COMM_SHAPES)}")
    suffix = "" if shape == "ring" else "_" + shape
    return tuple(t + suffix if t in ("allreduce", "depth_allreduce") else t for t in terms)

LEVELS = ("", "+cell")
"""Candidate suffixes: ``+cell`` multiplies the answer on a measured cell by the median ratio of measured to fitted
time over that cell's runs, the most specific measured cell of ``CELL_KEYS`` that contains the query, so the terms give
the shape and the cell's own runs the level; where no cell was measured (a count, GPU type or host never measured) it
changes nothing. A measured configuration (its batch, threads, count, host) thus takes the level of its own runs."""
CELL_KEYS = (("g", "n"), ("g", "n", "c"), ("g", "m", "n"), ("g", "m", "n", "c"), ("g", "m", "n", "c", "b", "d"))
"""Cells, from the coarsest: (GPU type, count), + CPU threads; (GPU type, machine, count), + threads, + batch and
depth (one measured configuration)."""
ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25)


def speed(gpu: GPUModel) -> float:
    """The GPU's speed in GFLOP/s for the pooled model (module docstring)."""
    if gpu.measured_gflops:
        return gpu.measured_gflops / gpu.dies_per_board
    return gpu.fp32_tflops * 1000.0


def row_speeds(rows: pd.DataFrame) -> np.ndarray:
    """Each row's GPU speed: its ``speed`` column if it has one (query rows), else from the GPU table by name."""
    if "speed" in rows:
        return rows["speed"].to_numpy(float)
    models = gpu_models()
    return rows["gpu"].map(lambda g: speed(models[g])).to_numpy(float)


def row_machines(rows: pd.DataFrame) -> np.ndarray:
    """Each row's machine (its disk speed, the host's label in the measurements); NaN where not known (a query for a
    catalogue configuration names no host)."""
    if MACHINE in rows:
        return rows[MACHINE].to_numpy(float)
    return np.full(len(rows), np.nan)


def input_scaling(rows: pd.DataFrame) -> dict[bool, tuple[float, float]]:
    """How the CPU cost of the input pipeline scales, read off the runs: for samples = the global batch (False) and
    the per-GPU batch (True), (smallest ``time per iteration × threads / samples``, its spread across GPU counts as a
    coefficient of variation of the per-count minima). The scaling whose minima agree across counts is the pipeline's:
    one pool of loader workers for the whole batch (PyTorch) or one pipeline per GPU (TensorFlow's benchmarks)."""
    tpi = (rows["runtime_s"] / rows["iterations"]).to_numpy(float)
    cpu, n = rows["cpu_threads"].to_numpy(float), rows["gpus"].to_numpy(float)
    out = {}
    for per_gpu in (False, True):
        samples = rows["batch_size"].to_numpy(float) / (n if per_gpu else 1.0)
        c = pd.Series(tpi * cpu / samples).groupby(n).min()
        out[per_gpu] = (float(c.min()), float(c.std(ddof=0) / c.mean()) if len(c) > 1 else 0.0)
    return out


def _values(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    d = rows["depth"].to_numpy(float)
    return {"B": rows["batch_size"].to_numpy(float), "n": rows["gpus"].to_numpy(float),
            "cpu": rows["cpu_threads"].to_numpy(float), "I": rows["iterations"].to_numpy(float),
            "d": np.where(d < 0, 0.0, d)}


def design(rows: pd.DataFrame, terms: Sequence[str]) -> np.ndarray:
    """The term columns for ``rows`` (a runs table, or query rows with the same columns)."""
    v = _values(rows)
    return np.column_stack([TERMS[t](v) for t in terms]) if terms else np.empty((len(rows), 0))


def _nnls(x: np.ndarray, y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Non-negative least squares in relative error: minimise Σ((x·θ − y)/w)², θ ≥ 0 (``w`` defaults to ``y``)."""
    if x.shape[1] == 0:
        return np.empty(0)
    w = y if w is None else w
    a = x / w[:, None]
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    theta, _ = nnls(a / scale, y / w, maxiter=50 * x.shape[1])
    return theta / scale


@dataclass(frozen=True)
class Hosts:
    """The machines one GPU type was measured on and the expanded term list of its coefficients: a host term gets one
    column per machine (``term@machine``), the others one column. ``default`` answers rows naming no known machine."""

    machines: tuple[float, ...] = ()
    default: float = -1.0

    def names(self, terms: Sequence[str]) -> list[str]:
        """The base term of every expanded column (``_fit`` reads roles off these)."""
        return [t for t in terms for _ in (self.machines if t in HOST and len(self.machines) > 1 else (0,))]

    def expand(self, x: np.ndarray, terms: Sequence[str], machines: np.ndarray) -> np.ndarray:
        """The expanded design: each host column split by machine (unknown machines count as ``default``)."""
        if len(self.machines) < 2:
            return x
        m = np.where(np.isin(machines, self.machines), machines, self.default)
        cols = []
        for k, t in enumerate(terms):
            cols += [x[:, k] * (m == h) for h in self.machines] if t in HOST else [x[:, k]]
        return np.column_stack(cols)


@dataclass
class StructuredModel:
    """One application's fitted structured model: coefficients per GPU type and the pooled fallback.

    Coefficients are a pair (GPU side, input side) of vectors over the GPU type's expanded terms (``hosts``); with
    ``combine="sum"`` the input side is None and the GPU side holds every term."""

    terms: tuple[str, ...]
    combine: str = "sum"
    per_gpu: dict[str, tuple[np.ndarray, np.ndarray | None]] = field(default_factory=dict)
    pooled: tuple[np.ndarray, np.ndarray | None] | None = None
    alpha: float = 1.0
    cells: dict[tuple, float] | None = None
    source: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    """(design, target, speeds, GPU names) of the training runs, for fitting the pooled model on first need."""
    hosts: dict[str, Hosts] = field(default_factory=dict)

    def pool(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The pooled model (fitted on first call: only a GPU type never measured needs it)."""
        if self.pooled is None and self.source is not None:
            x, y, s, names = self.source
            self.alpha = _choose_alpha(x, y, s, names, self.terms, self.combine)
            self.pooled = _fit(_pooled_design(x, self.terms, s, self.alpha), y, self.terms, self.combine)
        return self.pooled

    def machine_of(self, gpus: np.ndarray, machines: np.ndarray) -> np.ndarray:
        """Each row's machine as the model reads it: its own if measured on its GPU type, else the type's default."""
        out = np.nan_to_num(machines.astype(float), nan=-1.0)
        for g in np.unique(gpus):
            h = self.hosts.get(g)
            if h is not None:
                sel = (gpus == g) & ~np.isin(out, h.machines)
                out[sel] = h.default
        return out

    def per_iteration(self, rows: pd.DataFrame) -> np.ndarray:
        """Seconds per iteration for query rows (columns of a runs table; ``gpu`` names a catalogue GPU)."""
        x = design(rows, self.terms)
        out = np.full(len(rows), np.nan)
        gpus = rows["gpu"].to_numpy()
        mach = self.machine_of(gpus, row_machines(rows))
        known = np.isin(gpus, list(self.per_gpu))
        for g in np.unique(gpus[known]):
            sel = gpus == g
            h = self.hosts.get(g, Hosts())
            out[sel] = _combine(h.expand(x[sel], self.terms, mach[sel]), self.per_gpu[g])
        pooled = self.pool() if not known.all() else None
        if pooled is not None:
            xp = _pooled_design(x[~known], self.terms, row_speeds(rows)[~known], self.alpha)
            out[~known] = _combine(xp, pooled)
        if self.cells:
            keys = zip(gpus, mach, rows["gpus"].to_numpy(int), rows["cpu_threads"].to_numpy(int),
                       rows["batch_size"].to_numpy(int), rows["depth"].to_numpy(int))
            out *= np.array([_level(self.cells, k) for k in keys])
        return out

    def with_cells(self, rows: pd.DataFrame) -> StructuredModel:
        """A copy that corrects its level on every measured cell of ``rows`` (``CELL_KEYS``): the median ratio of
        measured to fitted time over the cell's runs."""
        ratio = (rows["runtime_s"] / rows["iterations"]).to_numpy(float) / self.per_iteration(rows)
        gpus = rows["gpu"].to_numpy()
        frame = pd.DataFrame({"g": gpus, "m": self.machine_of(gpus, row_machines(rows)),
                              "n": rows["gpus"].to_numpy(int), "c": rows["cpu_threads"].to_numpy(int),
                              "b": rows["batch_size"].to_numpy(int), "d": rows["depth"].to_numpy(int),
                              "r": ratio})
        cells: dict[tuple, float] = {}
        for keys in CELL_KEYS:  # several keys each: every index label is a tuple (pandas-stubs: Hashable)
            cells.update({cast(tuple, k): float(v) for k, v in frame.groupby(list(keys))["r"].median().items()})
        return StructuredModel(self.terms, self.combine, self.per_gpu, self.pooled, self.alpha, cells, self.source,
                               self.hosts)


def _level(cells: dict[tuple, float], key: tuple) -> float:
    """The level of the most specific measured cell containing ``key`` = (GPU type, machine, count, threads, batch,
    depth)."""
    g, m, n, c, b, d = key
    for k in ((g, m, n, c, b, d), (g, m, n, c), (g, m, n), (g, n, c), (g, n)):
        if k in cells:
            return cells[k]
    return 1.0


def _combine(x: np.ndarray, theta: tuple[np.ndarray, np.ndarray | None]) -> np.ndarray:
    g = x @ theta[0]
    return g if theta[1] is None else np.maximum(g, x @ theta[1])


def _pooled_design(x: np.ndarray, terms: Sequence[str], s: float | np.ndarray, alpha: float) -> np.ndarray:
    """The term columns with the GPU-side ones divided by (speed / 1000 GFLOP/s) ** alpha."""
    f = (np.asarray(s, dtype=float) / 1e3) ** -alpha
    out = x.copy()
    for k, t in enumerate(terms):
        if t in GPU_SIDE:
            out[:, k] = x[:, k] * f
    return out


def _sum_fit(x: np.ndarray, y: np.ndarray, cols: list[int], offset: np.ndarray | None) -> np.ndarray:
    """Full-length coefficients: ``cols`` fitted to ``y − offset·x`` (relative to ``y``), ``offset`` elsewhere."""
    theta = np.zeros(x.shape[1]) if offset is None else offset.copy()
    target = y - x @ theta
    if len(y) and cols:
        theta[cols] = _nnls(x[:, cols], target, y)
    return theta


def _fit(x: np.ndarray, y: np.ndarray, terms: Sequence[str], combine: str, fixed: dict[int, float] | None = None
         ) -> tuple[np.ndarray, np.ndarray | None]:
    """Fit one GPU type (or the pooled rows): ``fixed`` pins some GPU-side coefficients (a borrowed all-reduce)."""
    pin = np.zeros(len(terms))
    for k, v in (fixed or {}).items():
        pin[k] = v
    gcols = [k for k, t in enumerate(terms) if t not in INPUTS and k not in (fixed or {})]
    if combine == "sum" or not any(t in INPUTS for t in terms):
        return _sum_fit(x, y, gcols + [k for k, t in enumerate(terms) if t in INPUTS], pin), None
    pcols = [k for k, t in enumerate(terms) if t in INPUTS or t == "startup"]
    first = _sum_fit(x, y, gcols + [k for k, t in enumerate(terms) if t in INPUTS], pin)
    inputs = [k for k, t in enumerate(terms) if t in INPUTS]
    side = x[:, inputs] @ first[inputs] > x @ np.where(np.isin(np.arange(len(terms)), inputs), 0.0, first)
    best: tuple[float, tuple[np.ndarray, np.ndarray | None]] = (np.inf, (first, None))
    for _ in range(MAX_ROUNDS):
        tg = _sum_fit(x[~side], y[~side], gcols, pin) if (~side).sum() >= len(gcols) else best[1][0]
        tp = _sum_fit(x[side], y[side], pcols, None) if side.sum() >= len(pcols) else np.zeros(len(terms))
        err = float(np.sum(((_combine(x, (tg, tp)) - y) / y) ** 2))
        if err < best[0]:
            best = (err, (tg, tp))
        new = x @ tp > x @ tg
        if np.array_equal(new, side):
            break
        side = new
    return best[1]


def _choose_alpha(x: np.ndarray, y: np.ndarray, s: np.ndarray, names: np.ndarray, terms: Sequence[str],
                  combine: str) -> float:
    """The speed exponent that best predicts the fastest GPU type from the others (1 with a single GPU type)."""
    if len(set(names)) < 2:
        return 1.0
    held = names == names[np.argmax(s)]
    best = (np.inf, 1.0)
    for a in ALPHAS:
        theta = _fit(_pooled_design(x[~held], terms, s[~held], a), y[~held], terms, combine)
        pred = _combine(_pooled_design(x[held], terms, s[held], a), theta)
        best = min(best, (float(np.mean(np.abs(pred - y[held]) / y[held])), a))
    return best[1]


def _hosts(rows: pd.DataFrame) -> Hosts:
    """The machines of one GPU type's runs (none if one); the default is the most measured (the smaller on a tie)."""
    m = pd.Series(row_machines(rows)).dropna()
    if m.nunique() < 2:
        return Hosts()
    counts = m.value_counts()
    best = counts[counts == counts.max()].index.min()
    return Hosts(tuple(sorted(float(v) for v in counts.index)), float(best))


def fit_structured(rows: pd.DataFrame, terms: Sequence[str], combine: str = "sum", pooled: bool = True
                   ) -> StructuredModel:
    """Fit the structured model with ``terms`` combined by ``combine`` on one application's runs (module docstring)."""
    terms = tuple(terms)
    y = (rows["runtime_s"] / rows["iterations"]).to_numpy(float)
    x = design(rows, terms)
    model = StructuredModel(terms, combine)
    gpus = rows["gpu"].to_numpy()
    mach = row_machines(rows)
    counts = rows.groupby("gpu")["gpus"].nunique()
    single: list[str] = []
    for g in np.unique(gpus):
        sel = gpus == g
        model.hosts[g] = h = _hosts(rows[sel])
        if counts[g] > 1 or not any(t in ALLREDUCE for t in terms):
            model.per_gpu[g] = _fit(h.expand(x[sel], terms, mach[sel]), y[sel], h.names(terms), combine)
        else:
            single.append(g)
    comm = [t for t in terms if t in ALLREDUCE]
    shared = (np.median([[model.per_gpu[g][0][model.hosts[g].names(terms).index(t)] for t in comm]
                         for g in model.per_gpu], axis=0) if model.per_gpu and comm else np.zeros(len(comm)))
    for g in single:
        sel = gpus == g
        h = model.hosts[g]
        names = h.names(terms)
        pins = {names.index(t): float(v) for t, v in zip(comm, shared)}
        model.per_gpu[g] = _fit(h.expand(x[sel], terms, mach[sel]), y[sel], names, combine, pins)
    if pooled:
        model.source = (x, y, row_speeds(rows), gpus)
    return model
