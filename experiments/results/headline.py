"""The headline metrics of a results table: its setting's own (``sim.metrics.HEADLINES``), without those that apply
to none of its runs (the deadline metrics of a trace without deadlines are empty, so they are not shown).

The setting is read from each run's recorded configuration (the summary's ``config`` column): an ElasticFlow replay
when its policy runs on ElasticFlow's time model, a Gavel replay when its scenario schedules in rounds, capacity
planning otherwise. A table mixing settings, or written before configurations were recorded, takes the cost headline.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["setting", "headline"]


def setting(config: dict[str, Any]) -> str:
    """The setting of one run (``cost``, ``gavel`` or ``elasticflow``) from its configuration (scenario, policy)."""
    import optim

    cls = optim.registry().get(str((config.get("policy") or {}).get("kind")))
    if getattr(cls, "time_model", "engine") == "elasticflow":
        return "elasticflow"
    cluster = (config.get("scenario") or {}).get("cluster") or {}
    return "gavel" if cluster.get("rounds") is not None else "cost"


def _settings(configs: Iterable[Any]) -> set[str]:
    out = set()
    for text in configs:
        try:
            out.add(setting(json.loads(text)) if isinstance(text, str) and text else "cost")
        except (ValueError, AttributeError):
            out.add("cost")
    return out


def headline(summary: pd.DataFrame) -> list[str]:
    """The metrics a table of ``summary``'s runs leads with: the setting's headline, less the metrics every run
    leaves empty (all of the cost headline if nothing else is left)."""
    from sim.metrics import HEADLINE, HEADLINES

    kinds = _settings(summary["config"].unique()) if "config" in summary.columns else {"cost"}
    names = HEADLINES[kinds.pop()] if len(kinds) == 1 else HEADLINE
    shown = [m for m in names if m in summary.columns and summary[m].notna().any()]
    return shown or [m for m in HEADLINE if m in summary.columns]
