"""Heuristics on the MILP's objective, sharing one evaluation of a plan's cost (``decision``: ``Decision``,
``Schedule``, ``plan_cost``): the published family (``random_greedy``, ``local_search``, ``path_relinking``;
docs/heuristics.md §H1–§H8) re-implemented with its defects fixed, and ``insertion`` (docs/heuristics.md). Importing
this package registers them in that order."""

from optim.heuristics.decision import Decision, Schedule, plan_cost
from optim.heuristics.insertion import Insertion
from optim.heuristics.local_search import LocalSearch
from optim.heuristics.path_relinking import PathRelinking
from optim.heuristics.random_greedy import RandomGreedy

__all__ = ["Decision", "Schedule", "plan_cost", "RandomGreedy", "LocalSearch", "PathRelinking", "Insertion"]
