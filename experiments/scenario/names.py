"""Names of scenarios and sweeps: each names its result folder ``results/<name>/``, so it is one safe path
component (letters, digits, ``_ . + -``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["RESULTS_ROOT", "name_problem", "slug"]

RESULTS_ROOT = Path("results")
"""The output root: ``results/<name>/`` in the working directory unless ``--out`` says otherwise."""
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a result folder under the output root (None when it can)."""
    if isinstance(name, str) and _NAME.fullmatch(name) and name not in (".", ".."):
        return None
    return (f"expected a name of at most 100 letters, digits, '_', '.', '+' or '-', not starting with '.', '+' or "
            f"'-' (it names the result folder {RESULTS_ROOT}/<name>/; use --out to write elsewhere), found {name!r}")


def slug(text: str, default: str = "sweep") -> str:
    """``text`` made into a valid name: other characters become ``-``; ``default`` when nothing is left."""
    s = re.sub(r"[^A-Za-z0-9_.+-]+", "-", text).lstrip(".+-")[:100]
    return s if s and name_problem(s) is None else default
