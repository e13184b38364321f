"""Runtimes from measured throughputs: a job's iterations over the iterations per second its type achieves on a
number of GPUs of one model, read from a named throughput table (no per-job table to build).

A table maps (GPU model, job type, GPU count) to iterations per second of the whole job (not per GPU). A job type is
``"<application> (batch size <b>)"``, or the application alone for a table that names it so (Gavel's ``A3C``,
``CycleGAN``). A configuration the table does not list, or lists at 0 iterations per second, is unsupported.

Named tables (``TABLES``):

- ``gavel``: Gavel's ``simulation_throughputs.json`` (MIT licence, ``predictors/data/gavel/ATTRIBUTION.md``): 26 job
  types × 1, 2, 4, 8 GPUs on V100, P100 and K80, the isolated (``"null"``) rates; co-location pairs and the
  ``*_unconsolidated`` worker types are not read (Gavel's simulator does not read them either). Gavel's worker types
  ``v100``/``p100``/``k80`` are capsim's GPU models ``V100``/``P100``/``K80``.

- ``elasticflow``: ElasticFlow's tables (Apache-2.0, ``predictors/data/elasticflow/ATTRIBUTION.md``): iterations per
  second per model × global batch size × 1–64 GPUs, measured on A100-40GB (the six models of the ElasticFlow traces
  and ``resnet50_cifar10``) and on T4 (Pollux's ``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``, ``ncf``,
  ``yolov3``); ``elasticflow_a100`` and ``elasticflow_t4`` hold one GPU each. A job type is ``"<model> (batch size
  <global batch>)"``, so a trace job (model name as application) is looked up by its model, batch size and GPU count.

- ``mlperf``: Takayama et al.'s times of one run of each of nine MLPerf training benchmarks on a P100 server and a V100
  server (``predictors/data/mlperf/ATTRIBUTION.md``), one server being one unit: job type ``IC`` ... ``RF``, GPU count
  1, one iteration = one run (``docs/mlperf.md``).

Any other file in Gavel's layout is read with ``path``. Another family of measurements joins as one more loader in
``TABLES`` that returns the same ``ThroughputTable``.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from predictors.base import Predictor, Source, register
from sim.model import INFEASIBLE, CapsimError, Config, GPUModel, JobSpec, VMType

__all__ = ["ThroughputTable", "ThroughputPredictor", "TABLES", "read_gavel_json", "gavel_table", "read_elasticflow_csv",
           "elasticflow_table", "mlperf_table", "ELASTICFLOW_GPUS", "runtimes_from_rates"]


class ThroughputTable:
    """Iterations per second of whole jobs: ``rates[(gpu model, job type, gpus)]``; ``source`` names it in messages."""

    def __init__(self, rates: Mapping[tuple[str, str, int], float], source: str):
        self.rates = dict(rates)
        self.source = source
        self.job_types = frozenset(k[1] for k in self.rates)

    def job_type(self, application: str, batch_size: int) -> str:
        """The table's job type of an application at a batch size: ``"<application> (batch size <b>)"``, or the
        application alone when only that is listed."""
        named = f"{application} (batch size {batch_size})"
        return application if named not in self.job_types and application in self.job_types else named

    def rate(self, gpu: str, job_type: str, gpus: int) -> float:
        """Iterations per second, 0 where the table has no entry."""
        return self.rates.get((gpu, job_type, gpus), 0.0)

    def by_gpu(self, gpu: str) -> dict[tuple[str, int], float]:
        """``{(job type, GPUs): iterations/s}`` on one GPU model (what Gavel's trace generator reads for V100)."""
        return {(k, g): r for (m, k, g), r in self.rates.items() if m == gpu}


def read_gavel_json(path: str | Path) -> ThroughputTable:
    """A table from a file in Gavel's layout: ``{worker type: {"('<job type>', <GPUs>)": {"null": rate, ...}}}``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CapsimError(f"{path}: cannot read the throughput file: {e}") from None
    rates: dict[tuple[str, str, int], float] = {}
    if not isinstance(raw, dict):
        raise CapsimError(f"{path}: expected Gavel's layout {{worker type: {{job key: {{'null': rate}}}}}}")
    for worker, jobs in raw.items():
        if "unconsolidated" in worker:
            continue
        for key, entry in (jobs or {}).items():
            try:
                job_type, gpus = ast.literal_eval(key)
                rate = float(entry["null"])
            except (ValueError, SyntaxError, TypeError, KeyError):
                raise CapsimError(f"{path}: worker type {worker!r}: expected keys like \"('ResNet-50 (batch size 64)', "
                                  f"1)\" with a 'null' rate, found {key!r}") from None
            if not (math.isfinite(rate) and rate >= 0):
                raise CapsimError(f"{path}: {worker} {key}: expected a rate >= 0, found {rate}")
            rates[(worker.upper(), str(job_type), int(gpus))] = rate
    return ThroughputTable(rates, str(path))


@cache
def gavel_table() -> ThroughputTable:
    """Gavel's measured throughputs, shipped with capsim."""
    path = resources.files("predictors").joinpath("data", "gavel", "simulation_throughputs.json")
    table = read_gavel_json(Path(str(path)))
    table.source = "gavel"
    return table


ELASTICFLOW_GPUS = {"A100": "A100-40GB", "T4": "T4"}
"""ElasticFlow's table folders (file prefixes) and the GPU model each is taken to describe (see the attribution)."""


def read_elasticflow_csv(text: str, gpu: str, model: str, source: str) -> dict[tuple[str, str, int], float]:
    """Rates of one ElasticFlow table (header ``global_batch_size,1,2,4,...``; one row per global batch size) as
    ``{(gpu, "<model> (batch size <b>)", GPUs): iterations/s}``; empty, ``nan`` and 0 cells are left out."""
    lines = [ln.split(",") for ln in text.splitlines() if ln.strip()]
    if not lines or lines[0][0].strip() != "global_batch_size":
        raise CapsimError(f"{source}: expected a header 'global_batch_size,1,2,4,...', found {lines[:1]}")
    try:
        counts = [int(c) for c in lines[0][1:]]
    except ValueError:
        raise CapsimError(f"{source}: the header's GPU counts must be whole numbers, found {lines[0][1:]}") from None
    rates: dict[tuple[str, str, int], float] = {}
    for row in lines[1:]:
        try:
            batch = int(row[0])
            cells = [float(c) if c.strip() else math.nan for c in row[1:]]
        except ValueError:
            raise CapsimError(f"{source}: expected a batch size and rates, found {row}") from None
        for n, rate in zip(counts, cells):
            if math.isfinite(rate) and rate > 0:
                rates[(gpu, f"{model} (batch size {batch})", n)] = rate
    return rates


@cache
def elasticflow_table(which: str = "all") -> ThroughputTable:
    """ElasticFlow's measured throughputs shipped with capsim: ``which`` is ``A100``, ``T4`` or ``all``."""
    folder = resources.files("predictors").joinpath("data", "elasticflow")
    rates: dict[tuple[str, str, int], float] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        prefix, _, rest = entry.name.partition("_")
        if not entry.name.endswith(".csv") or prefix not in ELASTICFLOW_GPUS or which not in ("all", prefix):
            continue
        rates.update(read_elasticflow_csv(entry.read_text(encoding="utf-8"), ELASTICFLOW_GPUS[prefix],
                                          rest[: -len(".csv")], f"predictors/data/elasticflow/{entry.name}"))
    return ThroughputTable(rates, "elasticflow" if which == "all" else f"elasticflow_{which.lower()}")


@cache
def mlperf_table() -> ThroughputTable:
    """Takayama et al.'s MLPerf job times (``predictors/data/mlperf``): one run of each of nine benchmarks on a P100
    server and a V100 server, as a rate of 1 / (seconds of one run) for one server (GPU count 1); a job of type
    ``IC`` with one iteration is one run. The time is the whole server's: a server runs one job at a time."""
    import csv

    path = resources.files("predictors").joinpath("data", "mlperf", "job_times.csv")
    rates: dict[tuple[str, str, int], float] = {}
    with path.open("r", encoding="utf-8") as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            for gpu in ("P100", "V100"):
                h, m, sec = (int(x) for x in row[gpu].split(":"))
                rates[(gpu, row["benchmark"], 1)] = 1.0 / (3600 * h + 60 * m + sec)
    return ThroughputTable(rates, "mlperf")


TABLES: dict[str, Callable[[], ThroughputTable]] = {
    "gavel": gavel_table,
    "mlperf": mlperf_table,
    "elasticflow": elasticflow_table,
    "elasticflow_a100": lambda: elasticflow_table("A100"),
    "elasticflow_t4": lambda: elasticflow_table("T4"),
}
"""The shipped throughput tables by name (``throughput`` predictor's ``table``)."""


@register("throughput")
class ThroughputPredictor(Predictor):
    """Runtime = iterations / measured iterations per second of the job's type on ``gpus`` GPUs of the VM's GPU model.

    ``table`` names a shipped table (``TABLES``, Gavel's by default); ``path`` reads a file in Gavel's layout instead
    (absolute, or relative to the working directory). The GPU count is the configuration's, however the GPUs are
    spread over servers (as in Gavel, which uses the consolidated rate wherever a job is placed).
    """

    def __init__(self, table: str = "gavel", path: str | None = None):
        if table not in TABLES:
            raise CapsimError(f"predictor 'throughput': unknown table {table!r}: shipped tables are "
                              f"{', '.join(sorted(TABLES))} (or give path: to a file in Gavel's layout)")
        if path is not None and table != "gavel":
            raise CapsimError("predictor 'throughput': give a shipped table or a path, not both")
        self.table = table
        self.path = path
        self._table: ThroughputTable | None = None

    @property
    def data(self) -> ThroughputTable:
        """The throughput table this predictor answers from (read on first use)."""
        if self._table is None:
            self._table = read_gavel_json(self.path) if self.path is not None else TABLES[self.table]()
        return self._table

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        data = self.data
        rate = data.rate(vm.gpu.name, data.job_type(spec.application, spec.batch_size), gpus)
        return spec.iterations / rate if rate > 0 else INFEASIBLE

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        data = self.data
        key = data.job_type(spec.application, spec.batch_size)
        if key not in data.job_types:
            return f"the throughput table {data.source!r} has no job type {key!r}"
        rate = data.rate(vm.gpu.name, key, gpus)
        if (vm.gpu.name, key, gpus) not in data.rates:
            return f"the throughput table {data.source!r} has no rate for {key} on {gpus} x {vm.gpu.name}"
        return None if rate > 0 else f"{key} does not run on {gpus} x {vm.gpu.name} (measured 0 iterations/s)"

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """``measured``: a rate of the table (its error is not measured: the tables have no repeats)."""
        return Source("measured" if self.support(spec, vm, gpus) is None else "unsupported")

    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        """Every spec on every configuration at once: one rate lookup per (job type, GPU model, GPU count)."""
        data = self.data
        return runtimes_from_rates(specs, configs, data.job_type, lambda g, name, n: data.rate(g.name, name, n))


def runtimes_from_rates(specs: Sequence[JobSpec], configs: Sequence[Config], job_type: Callable[[str, int], str],
                        rate: Callable[[GPUModel, str, int], float]) -> np.ndarray:
    """``iterations / rate`` of every spec on every configuration (inf where the rate is 0), calling ``rate(GPU model,
    job type, GPUs)`` once per distinct (job type, GPU model, count); ``job_type(application, batch size)`` names
    a spec's type."""
    types: dict[tuple[str, int], int] = {}
    row = np.fromiter((types.setdefault((s.application, s.batch_size), len(types)) for s in specs),
                      dtype=np.int64, count=len(specs))
    cols: dict[tuple[str, int], int] = {}
    col = np.fromiter((cols.setdefault((c.vm.gpu.name, c.gpus), len(cols)) for c in configs), dtype=np.int64,
                      count=len(configs))
    gpu_of = {c.vm.gpu.name: c.vm.gpu for c in configs}
    names = [job_type(a, b) for a, b in types]
    rates = np.array([[rate(gpu_of[g], name, n) for g, n in cols] for name in names], dtype=float)
    rates = rates.reshape(len(names), len(cols))[row][:, col]
    iterations = np.fromiter((s.iterations for s in specs), dtype=float, count=len(specs))
    out = np.full(rates.shape, INFEASIBLE)
    np.divide(iterations[:, None], rates, out=out, where=rates > 0)
    return out
