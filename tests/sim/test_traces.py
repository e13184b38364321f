"""Trace formats: every registered reader passes the conformance checks on its own example; scenarios pick a format
and its options by name, a bare path keeps its run id, and a format added by a test is one class."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest
import yaml

from sim.catalogue import configurations, vm_types
from sim.contracts import Predictor
from sim.model import CapsimError, JobSpec, VMType
from sim.testing import check_trace_reader
from sim.traces import COLUMNS, DEFAULT_FORMAT, REQUIRED, TRACE_FORMATS, TraceReader, read_trace

CONFIGS = configurations(tuple(vm_types().values())[:3],
                         {v.name: 64 for v in tuple(vm_types().values())[:3]})  # gangs too


class _PerIteration(Predictor):
    """A truth for any job: 10 ms per iteration over the GPU count (so every application is supported)."""

    def runtime(self, spec: JobSpec, vm: VMType, gpus: int) -> float:
        return 0.01 * spec.iterations / gpus


FORMATS = sorted(TRACE_FORMATS.kinds(aliases=False))


@pytest.mark.parametrize("kind", FORMATS)
def test_check_trace_reader(kind: str) -> None:
    cls = TRACE_FORMATS.kinds()[kind]
    reader = TRACE_FORMATS.build(kind, **dict(cls.test_params))
    assert isinstance(reader, TraceReader) and reader.name == kind
    check_trace_reader(reader)


def test_the_default_format_is_registered_and_the_columns_are_declared_once() -> None:
    assert DEFAULT_FORMAT in TRACE_FORMATS.kinds() and COLUMNS[: len(REQUIRED)] == REQUIRED


def test_unreadable_csv_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b'"unterminated\n')
    with pytest.raises(CapsimError, match="bad.csv: cannot read the trace CSV"):
        read_trace(bad)
    with pytest.raises(CapsimError, match="unknown trace format 'gavle'"):
        read_trace(bad, "gavle")


# ----- a format added by a test: one class --------------------------------------------------------------------------


class _Tsv(TraceReader):
    """Tab-separated lines ``application, iterations, batch, arrival``; the framework is an option."""

    name: ClassVar[str] = "tsv"
    file_kind = "TSV"
    example = "alexnet\t6094\t256\t5\nvgg19\t4063\t32\t0\n"
    example_jobs = 2

    def __init__(self, framework: str = "pytorch"):
        self.framework = framework

    def read(self, path: Path) -> pd.DataFrame:
        rows = [line.split("\t") for line in path.read_text().splitlines() if line.strip()]
        return pd.DataFrame({"submit_time": [r[3] for r in rows], "application": [r[0] for r in rows],
                             "framework": self.framework, "iterations": [r[1] for r in rows],
                             "batch_size": [r[2] for r in rows]})


@pytest.fixture
def tsv(monkeypatch) -> type[_Tsv]:
    monkeypatch.setitem(TRACE_FORMATS._kinds, "tsv", _Tsv)
    return _Tsv


def _scenario(tmp_path: Path, trace: object, **workload: object) -> Path:
    data = {"name": "t", "cluster": {"nodes": 1, "vm_types": ["NC6"]}, "workload": {"trace": trace, **workload},
            "predictor": {"kind": "table", "table": {"J1/NC6/1": 100.0, "/NC6/1": 100.0}},
            "policies": [{"kind": "fifo"}]}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(data), encoding="utf-8")
    return p


def _error(path: Path) -> str:
    from experiments.scenario import load_scenario

    with pytest.raises(CapsimError) as e:
        load_scenario(path)
    return str(e.value)


def test_a_registered_format_and_its_options_from_yaml(tsv, tmp_path: Path) -> None:
    from experiments.scenario import PolicySpec, load_scenario

    (tmp_path / "jobs.tsv").write_text(_Tsv.example)
    sc = load_scenario(_scenario(tmp_path, {"path": "jobs.tsv", "format": "tsv", "framework": "tensorflow"}))
    jobs = sc.build_jobs(0, _PerIteration(), CONFIGS)
    assert [(j.spec.application, j.spec.framework, j.submit_time) for j in jobs] == \
        [("vgg19", "tensorflow", 0.0), ("alexnet", "tensorflow", 5.0)]
    other = load_scenario(_scenario(tmp_path, {"path": "jobs.tsv", "format": "tsv", "framework": "pytorch"}))
    fifo = PolicySpec(kind="fifo")
    assert sc.run_id(fifo, 0) != other.run_id(fifo, 0), "a reader's options are part of the configuration"


def test_reader_options_and_formats_are_checked(tsv, tmp_path: Path) -> None:
    (tmp_path / "jobs.tsv").write_text(_Tsv.example)
    msg = _error(_scenario(tmp_path, {"path": "jobs.tsv", "format": "tsv", "framewrok": "jax"}))
    assert "workload.trace.framewrok" in msg and "unknown parameter 'framewrok' for trace format 'tsv'" in msg
    assert "did you mean 'framework'" in msg
    msg = _error(_scenario(tmp_path, {"path": "jobs.tsv", "format": "tvs"}))
    assert "workload.trace.format" in msg and "unknown trace format 'tvs'" in msg and "tsv" in msg
    msg = _error(_scenario(tmp_path, {"path": "nope.tsv", "format": "tsv"}))
    assert "workload.trace.path" in msg and "expected a TSV file" in msg and "nope.tsv" in msg
    msg = _error(_scenario(tmp_path, 5))
    assert "workload.trace" in msg and "expected a file path or a mapping" in msg
    msg = _error(_scenario(tmp_path, {"format": "csv"}))
    assert "workload.trace.path" in msg and "required" in msg


def test_a_bare_path_and_its_mapping_are_the_same_run(tmp_path: Path) -> None:
    from experiments.scenario import PolicySpec, load_scenario

    (tmp_path / "jobs.csv").write_text("submit_time,application,framework,iterations,batch_size,name\n"
                                       "0,deepspeech,tensorflow,2528,4,J1\n")
    fifo = PolicySpec(kind="fifo")
    ids = {load_scenario(_scenario(tmp_path, t)).run_id(fifo, 0)
           for t in ("jobs.csv", {"path": "jobs.csv"}, {"path": "jobs.csv", "format": "csv"})}
    assert len(ids) == 1
    sc = load_scenario(_scenario(tmp_path, "jobs.csv"))
    assert sc.resolved(fifo, 0)["workload"]["trace"].keys() == {"sha256"}


def test_a_trace_mapping_runs_end_to_end(tmp_path: Path) -> None:
    from experiments.cli import main
    from experiments.results.reading import read_results

    (tmp_path / "jobs.csv").write_text("submit_time,application,framework,iterations,batch_size,name\n"
                                       "0,deepspeech,tensorflow,2528,4,J1\n30,deepspeech,tensorflow,2528,4,J1\n")
    out = {}
    for label, trace in (("bare", "jobs.csv"), ("mapping", {"path": "jobs.csv", "format": "csv"})):
        p = _scenario(tmp_path, trace)
        out[label] = tmp_path / label
        assert main(["run", str(p), "--out", str(out[label]), "--quiet", "--workers", "1"]) == 0
    a, b = read_results(out["bare"]).tables, read_results(out["mapping"]).tables
    assert list(a["jobs"].end_time) == [100.0, 200.0]
    pd.testing.assert_frame_equal(a["jobs"], b["jobs"])


def test_the_csv_columns_are_listed_where_users_read_them() -> None:
    """The CSV reader's docstring and README's scenario example name every column of the trace table."""
    import re

    from sim.traces.native import CsvTrace

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"CSV columns (.*?); other", readme, re.S)
    assert listed, "README's scenario example lost its list of CSV columns"
    for column in COLUMNS:
        assert column in (CsvTrace.__doc__ or ""), column
        assert column in listed.group(1), column
