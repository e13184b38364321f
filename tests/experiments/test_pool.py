"""The process pool hands its workers what the command already computed: the predictors' fits."""

from __future__ import annotations

from typing import Any

import predictors
from experiments.running.pool import run_parallel

KEY = ("capsim-test: a fit made once", 1)


def _fit_in_worker(_: int) -> Any:
    return predictors.build("measured").shared(KEY, lambda: "made in the worker")


def test_pool_workers_use_the_commands_fits_instead_of_fitting_again() -> None:
    assert predictors.build("measured").shared(KEY, lambda: "made by the command") == "made by the command"
    got: dict[int, Any] = {}
    run_parallel(_fit_in_worker, [0, 1, 2], got.__setitem__, workers=2)
    assert got == {0: "made by the command", 1: "made by the command", 2: "made by the command"}


def _a_new_fit(_: int) -> Any:
    return predictors.build("measured").shared(("capsim-test: not made by the command", 2), lambda: "made here")


def test_a_fit_the_command_never_made_is_made_in_the_worker() -> None:
    got: dict[int, Any] = {}
    run_parallel(_a_new_fit, [0], got.__setitem__, workers=2)
    assert got == {0: "made here"}
