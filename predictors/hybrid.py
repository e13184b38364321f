"""A predictor that covers the catalogue: the measurements inside their range, the best extrapolating model outside.

``inside`` (default ``measured``) answers every configuration it supports: the measured runs and the interpolation
between them. Everywhere else ``outside`` (default ``regression``, whose model for each kind of extrapolation was
chosen by a validation that asks that kind of question) answers. With ``anchor`` (off by default), an outside answer is
taken relative to the nearest measured configuration of the same GPU type: ``outside(q) × inside(q0) / outside(q0)``,
where ``q0`` clamps the GPU count into the counts measured on that GPU type and then the batch into the range
measured at that count, so the model supplies the trend and the measurements the level, and answers are continuous
at the edge of the measured range. A GPU type never measured has no anchor and takes the outside answer as it is.
``explain`` says which answered and why; ``support`` is the outside predictor's where the inside one has none.
Outside the measured range a configuration that would not fit in its GPUs' memory (``predictors.memory``) is
unsupported, whatever the outside predictor answers; inside it the runs show it fits. ``predict_runs`` answers runs
that did run and asks no memory question.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from predictors.base import Predictor, TrainablePredictor, register
from predictors.measured import MeasuredPredictor
from predictors.measurements import data_key, measured_gpu_name, row_configs, row_specs
from predictors.memory import guard
from predictors.regression import RegressionPredictor
from predictors.uncertainty.provenance import source
from sim.contracts import Source
from sim.model import INFEASIBLE, CapsimError, Config, JobSpec, VMType

__all__ = ["HybridPredictor"]


@register("hybrid")
class HybridPredictor(TrainablePredictor):
    """Measured runs inside their range, the extrapolating model outside (module docstring)."""

    def __init__(self, inside: Predictor | None = None, outside: Predictor | None = None, anchor: bool = False):
        if inside is not None and not isinstance(inside, MeasuredPredictor):
            raise CapsimError("predictor 'hybrid': inside must be a 'measured' predictor "
                              "(it defines the measured range)")
        if outside is not None and not isinstance(outside, TrainablePredictor):
            raise CapsimError("predictor 'hybrid': outside must be a trainable predictor, e.g. {kind: regression}")
        self.inside, self.outside, self.anchor = inside, outside, anchor
        self.check_param("anchor", bool)

    def _fit(self, runs: pd.DataFrame) -> None:
        inside = self.inside.clone() if self.inside is not None else MeasuredPredictor()
        outside = self.outside.clone() if self.outside is not None else RegressionPredictor()
        assert isinstance(inside, MeasuredPredictor) and isinstance(outside, TrainablePredictor)
        inside.fit(runs)
        self.inside_: MeasuredPredictor = inside
        self.outside_: TrainablePredictor = outside.fit(runs)

    def parts(self) -> tuple[MeasuredPredictor, TrainablePredictor]:
        """(inside, outside) predictors, fitted on the shipped runs if this one was never fitted."""
        self.training_runs()
        return self.inside_, self.outside_

    # ----- anchors --------------------------------------------------------------------------------------------------
    def anchor_of(self, spec: JobSpec, gpu_name: str | None, gpus: int, cpu: str | int | None = None
                  ) -> tuple[int, int] | None:
        """(GPU count, batch) of the nearest measured configuration of the same GPU type, or None."""
        if not self.anchor or gpu_name is None:
            return None
        inside = self.parts()[0]
        fits = inside.fits(data_key(spec), cpu).get(gpu_name)
        if not fits:
            return None
        counts = sorted(fits)
        n0 = min(max(gpus, counts[0]), counts[-1])
        if n0 not in fits:
            n0 = max(c for c in counts if c < n0)
        sizes = sorted(fits[n0])
        return n0, min(max(spec.batch_size, sizes[0]), sizes[-1])

    def _kind(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        """The outside predictor's kind of question for a configuration, if it has kinds (``regression`` does)."""
        ask = getattr(self.parts()[1], "question", None)
        q = ask(spec, vm, gpus) if ask is not None else None
        return None if q is None else q[0]

    def _outside_as(self, kind: str | None, specs: list[JobSpec], configs: list[Config]) -> float:
        outside = self.parts()[1]
        if kind is None:
            return float(outside.runtimes(specs, configs)[0, 0])
        return float(outside.runtimes(specs, configs, kind=kind)[0, 0])  # type: ignore[call-arg]

    def _ratios(self, pairs: list[tuple[JobSpec, Config]]) -> np.ndarray:
        """inside(q0) / outside(q0) for each (spec, config) needing an outside answer (1 without an anchor); the
        outside answer at ``q0`` comes from the model that answers ``q``, so the ratio carries that model's trend."""
        inside = self.parts()[0]
        out = np.ones(len(pairs))
        for i, (s, c) in enumerate(pairs):
            a = self.anchor_of(s, measured_gpu_name(c.vm.gpu), c.gpus)
            if a is None:
                continue
            s0 = JobSpec(s.application, s.framework, s.iterations, a[1], name=s.name, depth=s.depth)
            c0 = Config(VMType(f"{c.vm.name}-anchor", c.vm.gpu, max(a[0], c.vm.gpus), 0.0), a[0])
            m0 = float(inside.runtimes([s0], [c0])[0, 0])
            r0 = self._outside_as(self._kind(s, c.vm, c.gpus), [s0], [c0])
            if np.isfinite(m0) and np.isfinite(r0) and r0 > 0:
                out[i] = m0 / r0
        return out

    # ----- answers --------------------------------------------------------------------------------------------------
    def runtimes(self, specs: Sequence[JobSpec], configs: Sequence[Config]) -> np.ndarray:
        inside, outside = self.parts()
        out = np.array(inside.runtimes(specs, configs), dtype=float)
        need = ~np.isfinite(out)
        if not need.any():
            return out
        room = guard(self)
        shapes: dict[tuple, list[int]] = {}
        for i, s in enumerate(specs):
            shapes.setdefault((s.application, s.framework, s.depth, s.batch_size), []).append(i)
        for idx in shapes.values():
            sub = [specs[i] for i in idx]
            # the measured range depends on the spec's shape, not its iterations; what does not fit stays inf
            todo = [int(k) for k in np.flatnonzero(need[idx[0]])]
            cols = np.array([k for k in todo if room.reason(sub[0], configs[k].vm, configs[k].gpus) is None], np.intp)
            if not len(cols):
                continue
            r = outside.runtimes(sub, [configs[int(k)] for k in cols])
            if self.anchor:
                pairs = [(s, configs[int(k)]) for s in sub for k in cols]
                r = r * self._ratios(pairs).reshape(r.shape)
            out[np.ix_(np.asarray(idx), cols)] = np.where(np.isfinite(r), r, INFEASIBLE)
        return out

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return float(self.runtimes([spec], [Config(vm, gpus)])[0, 0])

    def fits_memory(self, spec: JobSpec, config: Config) -> bool:
        """Whether the job fits in the configuration's GPU memory (``predictors.memory``), whatever the outside
        predictor says."""
        return guard(self).reason(spec, config.vm, config.gpus) is None

    def support(self, spec: JobSpec, vm: VMType, gpus: int) -> str | None:
        inside, outside = self.parts()
        if inside.support(spec, vm, gpus) is None:
            return None
        why = outside.support(spec, vm, gpus) or guard(self).reason(spec, vm, gpus)
        if why is None and not np.isfinite(self.runtime(spec, vm, gpus)):
            return "the anchored extrapolation gives no finite time"
        return why

    def explain(self, spec: JobSpec, vm: VMType, gpus: int) -> str:
        """Which predictor answers this configuration: ``measured`` or the outside one with its reason and anchor;
        ``unsupported: why`` where neither may."""
        inside, outside = self.parts()
        if inside.support(spec, vm, gpus) is None:
            return "measured"
        why = self.support(spec, vm, gpus)
        if why is not None:
            return f"unsupported: {why}"
        how = outside.explain(spec, vm, gpus) if hasattr(outside, "explain") else outside.describe()
        a = self.anchor_of(spec, measured_gpu_name(vm.gpu), gpus)
        return f"{outside.name}: {how}" + (f", anchored on the measured {a[0]} GPUs at batch {a[1]}" if a else "")

    def source(self, spec: JobSpec, vm: VMType, gpus: int) -> Source:
        """The inside predictor's kind of answer where it answers (``measured``, ``interpolated``), else the outside
        predictor's (the extrapolation it makes), with the error measured for this hybrid on that kind."""
        inside, outside = self.parts()
        kind = inside.how(spec, vm, gpus)
        if kind == "unsupported" and self.support(spec, vm, gpus) is None:
            kind = outside.source(spec, vm, gpus).kind
        return source(self.describe(), kind)

    def run_sources(self, rows: pd.DataFrame) -> list[str]:
        """The inside predictor's kinds, the outside predictor's where the inside one has no answer."""
        inside, outside = self.parts()
        kinds = inside.run_sources(rows)
        need = [i for i, k in enumerate(kinds) if k == "unsupported"]
        ask = getattr(outside, "run_sources", None)
        if need:
            for i, k in zip(need, ask(rows.iloc[need]) if ask is not None else ["model"] * len(need)):
                kinds[i] = k
        return kinds

    def predict_runs(self, rows: pd.DataFrame) -> np.ndarray:
        """Each row at its own CPU-thread count: measured where it answers, else the anchored outside answer."""
        inside, outside = self.parts()
        out = inside.predict_runs(rows)
        need = np.flatnonzero(~np.isfinite(out))
        if len(need) == 0:
            return out
        q = rows.iloc[need].reset_index(drop=True)
        r = outside.predict_runs(q)
        anchors = q.copy()
        has = np.zeros(len(q), dtype=bool)
        # pandas-stubs types every field of a row as any scalar; these columns hold str and int
        for j, row in enumerate(cast(Iterable[Any], q.itertuples(index=False))):
            spec = JobSpec(row.application, row.framework, int(row.iterations), int(row.batch_size),
                           depth=None if row.depth < 0 else int(row.depth))
            a = self.anchor_of(spec, str(row.gpu), int(row.gpus), int(row.cpu_threads))
            if a is not None:
                anchors.loc[j, ["gpus", "batch_size"]] = a
                has[j] = True
        ratio = np.ones(len(q))
        if has.any():
            m0 = np.full(len(q), np.nan)
            r0 = np.full(len(q), np.nan)
            m0[has] = inside.predict_runs(anchors[has])
            kinds = np.array([self._kind(s, c.vm, c.gpus) or "" for s, c in zip(row_specs(q), row_configs(q))])
            for k in set(kinds[has]):
                sel = has & (kinds == k)
                rows_k = anchors[sel]
                r0[sel] = outside.predict_runs(rows_k, kind=k) if k else outside.predict_runs(rows_k)  # type: ignore[call-arg]
            ok = has & np.isfinite(m0) & np.isfinite(r0) & (r0 > 0)
            ratio[ok] = m0[ok] / r0[ok]
        out[need] = r * ratio
        return out
