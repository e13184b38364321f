"""RandomGreedy (docs/heuristics.md §H4): the best of one greedy and ``iterations − 1`` randomised greedy plans."""

from __future__ import annotations

import numpy as np

from optim.base import register
from optim.heuristics.base import Heuristic, greedy_pool
from optim.heuristics.decision import Decision, Schedule

__all__ = ["RandomGreedy"]


@register("random_greedy")
class RandomGreedy(Heuristic):
    """Best of ``iterations`` greedy plans, all but the first randomised (the published parameters as defaults:
    100 iterations, setup randomisation ``alpha`` 0.05, queue ``swap`` 0.05, node randomisation ``beta`` 0.2),
    ranked by the shared cost (the MILP's objective on the plan)."""

    def __init__(self, iterations: int = 100, alpha: float = 0.05, swap: float = 0.05, beta: float = 0.2,
                 seed: int = 0):
        self.iterations = iterations
        self.alpha = alpha
        self.swap = swap
        self.beta = beta
        self.seed = seed
        self._check_search("iterations", "alpha", "swap", "beta", "seed")

    def search(self, dec: Decision, rng: np.random.Generator) -> Schedule:
        return greedy_pool(dec, rng, self.iterations, self.alpha, self.swap, self.beta, 1)[0]
