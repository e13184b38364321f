"""The data one decision's MILP is made of: candidate placements (``Placement``) and the reduced instance with its
PuLP problem (``Model``). Reductions fill a Model, the formulation writes its problem, the solvers set its values,
and the solution module reads them back into a Plan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pulp

from sim.model import JobView, Snapshot

__all__ = ["Placement", "Model"]


@dataclass(frozen=True, slots=True)
class Placement:
    """One candidate for x: job ``job`` on node ``node`` with config index ``config`` (VM ``vm``, ``gpus`` GPUs).

    ``span`` is wait + runtime: the seconds from now until the job ends there (the VM's horizon if it is the last).
    ``cost`` is its objective coefficient: the job's tardiness cost if it runs there.
    """

    job: int
    node: int
    config: int
    vm: str
    gpus: int
    span: float
    cost: float


@dataclass
class Model:
    """A reduced instance, its arrays (``lp``, an ``optim.milp.formulation.LinearProgram``) and, when a PuLP solver,
    ``extra_constraints`` or a file needs it, its PuLP problem (``problem``; ``x``/``y``/``h``/``z`` map keys to PuLP
    variables). ``start`` holds a warm start and ``values`` a solution, one value per column of ``lp``.

    ``pinned``: node → (VM name, horizon) of slots whose running jobs stay; ``pinned_area`` their GPU-seconds per
    GPU; ``classes``: kept members of each class of interchangeable free slots; ``node_class``: every free slot's
    class; ``penalties``: each deciding job's waiting penalty p_j; ``pairs``: the promising co-located pairs (waiting
    job, running host, cost) the pair variables w choose among (``optim.colocate.promising_pairs``).
    """

    snapshot: Snapshot
    preempt: bool
    placements: list[Placement]
    penalties: dict[int, float]
    pinned: dict[int, tuple[str, float]]
    pinned_area: dict[int, float]
    on_node: dict[int, list[JobView]]
    kept_nodes: list[int]
    classes: dict[tuple, list[int]]
    node_class: dict[int, tuple]
    jobs: dict[int, JobView]
    pairs: list[tuple[int, int, float]] = field(default_factory=list)
    constant: float = 0.0
    lp: Any = None
    start: np.ndarray | None = None
    values: np.ndarray | None = None
    objective: float | None = None
    problem: pulp.LpProblem | None = None
    x: list[pulp.LpVariable] = field(default_factory=list)
    y: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)
    h: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)
    z: dict[int, pulp.LpVariable] = field(default_factory=dict)

    @property
    def size(self) -> tuple[int, int]:
        """(variables, constraints) of the written problem."""
        assert self.lp is not None, "the problem is written by optim.milp.formulation.write_lp"
        return self.lp.size
