"""The versions of capsim and of the packages its numbers depend on, recorded with every run (each summary's
``config``) and in a folder's manifest, so that a number that moved between two folders can be explained from the
folders alone (a solver's new release changes MILP decisions; pandas and numpy change sums and percentiles)."""

from __future__ import annotations

from functools import cache

__all__ = ["KEY_PACKAGES", "package_versions"]

KEY_PACKAGES = ("capsim", "highspy", "numpy", "pandas", "pulp", "simpy", "scipy", "scikit-learn", "pyarrow")
"""The distributions whose versions are recorded: capsim itself, its solvers and its numerical and storage stack."""


@cache
def package_versions() -> dict[str, str]:
    """Installed version of each of ``KEY_PACKAGES`` (``-`` where one is not installed), in that order."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in KEY_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "-"
    return out
