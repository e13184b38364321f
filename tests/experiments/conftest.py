"""Shared helpers: small scenario files built on the table predictor (known runtimes, instant to evaluate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

# Two job types on two VM types with hand-picked runtimes (seconds).
TABLE = {
    "J1/NC6/1": 400.0,
    "J1/NC12/1": 400.0,
    "J1/NC12/2": 250.0,
    "J4/NC6/1": 900.0,
    "J4/NC12/1": 900.0,
    "J4/NC12/2": 500.0,
}


def small_scenario(**over: Any) -> dict[str, Any]:
    """A tiny valid scenario as plain data (2 nodes, 6 jobs, FIFO and EDF, seeds 0-1)."""
    d: dict[str, Any] = {
        "name": "tiny",
        "cluster": {"nodes": 2, "vm_types": ["NC6", "NC12"]},
        "workload": {"jobs": 6, "mean_interarrival": 60, "mix": {"J1": 1, "J4": 1}},
        "predictor": {"kind": "table", "table": dict(TABLE)},
        "policies": [{"kind": "fifo"}, {"kind": "edf"}],
        "seeds": [0, 1],
    }
    for k, v in over.items():
        d[k] = v
    return d


def write_yaml(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "tiny.yaml", small_scenario())


def per_run_layout(folder: Path, journal: bool = True) -> list[str]:
    """Rewrite a result folder in the layout before batches: one file per table and run (``<table>/<run>.parquet``),
    recorded by ``{"run": ...}`` journal lines with their checksums (``journal``), or by no journal at all (the
    oldest folders). Return the run ids, sorted."""
    import hashlib
    import json

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    lines = [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines() if x.strip()]
    scenario = {r: s for e in lines if "batch" in e for part in ("runs", "failed") for r, s in e[part].items()}
    files: dict[str, dict[str, str]] = {}
    for table_dir in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        parts = sorted(table_dir.glob("part-*.parquet"))
        if not parts:
            continue
        table = pa.concat_tables([pq.read_table(p) for p in parts])
        for p in parts:
            p.unlink()
        for rid in sorted(set(table.column("run_id").to_pylist())):
            sink = pa.BufferOutputStream()
            pq.write_table(table.filter(pc.equal(table.column("run_id"), rid)), sink, compression="zstd")
            data = sink.getvalue().to_pybytes()
            (table_dir / f"{rid}.parquet").write_bytes(data)
            files.setdefault(rid, {})[table_dir.name] = hashlib.sha256(data).hexdigest()
    (folder / "runs.jsonl").unlink()
    if journal:
        (folder / "runs.jsonl").write_text("".join(
            json.dumps({"run": rid, "scenario": scenario.get(rid, ""), "files": f}) + "\n"
            for rid, f in sorted(files.items())))
    return sorted(files)
