"""Rebuild ``runs.csv`` from the Politecnico di Milano measurements (see ATTRIBUTION.md for what changes).

Usage: ``python predictors/data/polimi/make.py SOURCE_DIR [--out FILE]``, where SOURCE_DIR is the folder of the
source CSVs (``alexnet_pt.csv`` … ``extrapolation_N_resnet_4.csv``). The output is one row per measured run, long
format, GPU named by the capsim GPU catalogue.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sim.catalogue import gpu_models

OUT = Path(__file__).with_name("runs.csv")

RENAME = {
    "GFlops(7)": "gflops",
    "disk speed(8)": "disk_speed",
    "GPU number(9)": "gpus",
    "Network depth(11)": "depth",
    "batch size(13)": "batch_size",
    "Real Iterations Number(15)": "iterations",
    "CPU threads(19)": "cpu_threads",
    "overall execution time(31)": "runtime_s",
    "overall execution time(30)": "runtime_s",
}
COLUMNS = ["application", "framework", "gpu", "gpus", "batch_size", "iterations", "cpu_threads", "disk_speed",
           "depth", "runtime_s", "source_file"]
M60_GFLOPS = 7365
DEPTH_FRAMEWORK = "pytorch"
"""The variable-depth ResNet files do not name their framework; the authors describe them as a PyTorch CIFAR-10
ResNet with a varying number of inner modules."""


def _load(path: Path) -> pd.DataFrame:
    raw = pd.read_csv(path)
    df = raw[[c for c in raw.columns if c in RENAME]].rename(columns=RENAME)
    stem = path.stem
    if stem.startswith("extrapolation_N_resnet_"):
        df["application"], df["framework"] = "resnet", DEPTH_FRAMEWORK
        df["gflops"], df["gpus"] = M60_GFLOPS, int(stem.rsplit("_", 1)[1])
    elif stem == "deepspeech_p600_gt750m":
        df["application"], df["framework"] = "deepspeech", "tensorflow"
    else:
        app, fw = stem.rsplit("_", 1)
        df["application"], df["framework"] = app, {"pt": "pytorch", "tf": "tensorflow"}[fw]
    if "disk_speed" not in df:
        df["disk_speed"] = pd.NA
    if "depth" not in df:
        df["depth"] = pd.NA
    df["source_file"] = path.name
    return df


def _drop_twins(df: pd.DataFrame) -> pd.DataFrame:
    """Drop the smaller-iteration copy of runs listed twice with one runtime and two iteration counts."""
    key = [c for c in COLUMNS if c not in ("iterations",)]
    ranked = df.sort_values("iterations", ascending=False, kind="stable")
    return ranked[~ranked.duplicated(subset=key, keep="first")].sort_index()


def build(source: Path) -> pd.DataFrame:
    """Every run of every source file, with unusable rows (no overall time) dropped and twins merged."""
    by_gflops = {g.measured_gflops: g.name for g in gpu_models().values() if g.measured_gflops is not None}
    paths = sorted(source.glob("*.csv"))
    if not paths:
        raise SystemExit(f"{source}: no source CSV files here; give the folder of the Politecnico di Milano runs")
    df = pd.concat([_load(p) for p in paths], ignore_index=True)
    df = df[df["runtime_s"].notna()].copy()
    unknown = set(df["gflops"]) - set(by_gflops)
    if unknown:
        raise SystemExit(f"GFlops values with no GPU in sim/data/gpus.csv: {sorted(unknown)}")
    df["gpu"] = df["gflops"].map(by_gflops)
    df = _drop_twins(df[COLUMNS])
    return df.sort_values(["application", "framework", "gpu", "gpus", "batch_size", "depth", "cpu_threads",
                           "iterations", "source_file"], kind="stable").reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Rebuild predictors/data/polimi/runs.csv from the source CSVs.")
    ap.add_argument("source", type=Path, metavar="SOURCE_DIR", help="folder of the source CSVs")
    ap.add_argument("--out", type=Path, default=OUT, help="output file (default: %(default)s)")
    args = ap.parse_args(argv)
    if not args.source.is_dir():
        raise SystemExit(f"{args.source}: not a folder; give the folder of the Politecnico di Milano source CSVs")
    out = build(args.source)
    out.to_csv(args.out, index=False, float_format="%.6f")
    print(f"wrote {len(out)} runs to {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
