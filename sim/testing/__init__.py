"""Conformance checks for components, importable by their authors::

    from sim.testing import check_policy, check_predictor, check_trace_reader

    check_policy(MyPolicy())            # contract, engine invariants on small worlds, replay, spot pricing
                                        # (on ElasticFlow's time model: a replay's invariants on replay_worlds())
    check_predictor(MyPredictor())      # contract, vectorised = scalar, support, determinism (runs= to fit)
    check_trace_reader(MyReader())      # contract, its example read into a valid trace table and jobs

Each check runs the component on small cases with known answers, through the real engine where it decides, and
raises ``AssertionError`` naming the component, the case and what was expected and found. capsim's own suites run
them over every registered component (``tests/optim/test_conformance.py``, ``tests/predictors/test_conformance.py``,
``tests/sim/test_traces.py``); the pieces (``check_run``, ``recorded_run``, ``small_worlds``, ``check_spot_pricing``)
serve property tests on worlds of one's own.
"""

from sim.testing.checks import check_component, check_policy, check_predictor, check_trace_reader
from sim.testing.replay import check_replay, check_replay_policy, replay_world, replay_worlds
from sim.testing.runs import RuntimeTable, World, check_plan_names, check_run, recorded_run, run, small_worlds
from sim.testing.spot import SPOT_CASES, SpotCase, check_spot_pricing, spot_case

__all__ = ["check_component", "check_policy", "check_predictor", "check_trace_reader", "check_spot_pricing",
           "check_replay", "check_replay_policy", "replay_world", "replay_worlds",
           "check_run", "check_plan_names", "recorded_run", "run", "small_worlds", "World", "RuntimeTable",
           "SPOT_CASES", "SpotCase", "spot_case"]
