"""Gavel's policies on its round mechanism: the allocations (``allocation``, ``fairness``, ``packed_alloc``), the round
mechanism they share (``mechanism``; with pairs of jobs on a GPU, ``packed``) and the policies (``policies``,
``packed_policies``)."""

from optim.gavel import packed_policies, policies  # noqa: F401  (registers Gavel's policies)
