"""Compare two result folders, old layout or new: ``python tests/experiments/compare_results.py BASE NEW``.

An extension of ``/work/baseline/compare.py`` for the one result store: a flat table of an older ``capsim run``
(``jobs.parquet``) is compared, as a frame, with the dataset of the same table (``jobs/``) read the way reports read
it; files present in both folders must be byte-identical, except for tables with wall-clock columns, which are
compared as frames without them; a table stored in other files (one file per run against batches) is compared as one
frame, read the way reports read it. The ``config`` column is compared too. Prints one line per difference and
exits 1 if there is any. With ``--added-columns``, columns only the new folder has (new metrics) are left out of the
comparison and listed; every column of the base must still be equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.results.reading import read_results  # noqa: E402

SKIP = {"figures", "sweep.json", "manifest.json", "sweep.lock", "runs.jsonl", ".spool", ".capsim.lock"}
"""Not compared: figures, locks, the spool, and the manifest and journal (their checksums cover files with wall-clock
columns)."""
ADDED_OK = False


def _no_wall(df: pd.DataFrame) -> pd.DataFrame:
    return df[[c for c in df.columns if "wall" not in c]]


ADDED: dict[str, list[str]] = {}
"""With ``--added-columns``: table → the columns only the new folder has (filled by ``_frames``)."""


def _frames(a: pd.DataFrame, b: pd.DataFrame, what: str, problems: list[str]) -> None:
    if ADDED_OK:
        extra = [c for c in b.columns if c not in a.columns]
        if extra:
            ADDED.setdefault(what.split("/")[0], extra)
            b = b.drop(columns=extra)
    try:
        pd.testing.assert_frame_equal(_no_wall(a), _no_wall(b), check_exact=True)
    except AssertionError as e:
        problems.append(f"DIFF {what}: {str(e)[:300]}")


def compare(base: Path, new: Path) -> list[str]:
    problems: list[str] = []
    new_tables = read_results(new, all_runs=True).tables if (new / "summary").is_dir() else {}
    base_tables: dict[str, pd.DataFrame] = {}
    for fa in sorted(base.iterdir()):
        if fa.name in SKIP:
            continue
        fb = new / fa.name
        if fa.suffix == ".parquet" and (new / fa.stem).is_dir():
            _frames(pd.read_parquet(fa), new_tables[fa.stem].drop(columns="config", errors="ignore"), fa.name, problems)
        elif fa.suffix == ".csv" and fb.is_file():
            text = {"dtype": str, "keep_default_na": False}
            _frames(pd.read_csv(fa, **text), pd.read_csv(fb, **text), fa.name, problems)
        elif fa.is_dir() and fb.is_dir():
            names = sorted(p.name for p in fa.glob("*.parquet") if not p.name.startswith("."))
            if names != sorted(p.name for p in fb.glob("*.parquet") if not p.name.startswith(".")) and \
                    fa.name in new_tables:  # other files (per run against batches): the table as one frame
                base_tables = base_tables or read_results(base, all_runs=True).tables
                _frames(base_tables[fa.name], new_tables[fa.name], fa.name, problems)
                continue
            missing = [n for n in names if not (fb / n).is_file()]
            if missing:
                problems.append(f"MISSING in {fb}: {len(missing)} files, e.g. {missing[:3]}")
            for n in names:
                if n in missing or (fa / n).read_bytes() == (fb / n).read_bytes():
                    continue
                x, y = pd.read_parquet(fa / n), pd.read_parquet(fb / n)
                if not any("wall" in c for c in x.columns):
                    problems.append(f"BYTES {fa.name}/{n} differ")
                _frames(x, y, f"{fa.name}/{n}", problems)
        else:
            problems.append(f"MISSING in {new}: {fa.name}")
    return problems


if __name__ == "__main__":
    args = [x for x in sys.argv[1:] if x != "--added-columns"]
    ADDED_OK = len(args) < len(sys.argv) - 1
    a, b = map(Path, args[:2])
    found = compare(a, b)
    for line in found:
        print(line)
    for table, cols in ADDED.items():
        print(f"added columns in {table} (not compared): {', '.join(cols)}")
    extra = sorted(p.name for p in b.iterdir() if not (a / p.name).exists() and not (a / f"{p.name}.parquet").exists())
    print(f"new in {b}: {', '.join(extra) or 'nothing'}")
    print("identical (wall columns aside)" if not found else f"{len(found)} differences")
    sys.exit(1 if found else 0)
