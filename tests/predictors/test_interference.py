"""One conformance suite over every registered interference model, and the ``table`` model against Gavel's file."""

from __future__ import annotations

import json
import math
from importlib import resources

import pytest

from predictors.interference import build, registry
from predictors.interference.table import MeasuredPairs, PairTable, gavel_pairs
from sim.catalogue import gpu, job_types, vm_types
from sim.model import JobSpec, VMType

KINDS = sorted(registry(aliases=False))
GAVEL = [JobSpec(a, "pytorch", 1000, b) for a, b in (("ResNet-18", 16), ("ResNet-50", 64), ("Transformer", 128),
                                                     ("LM", 20), ("Recommendation", 8192), ("A3C", 4), ("CycleGAN", 1))]
SPECS = list(job_types().values()) + GAVEL
VMS = list(vm_types().values()) + [VMType(f"one-{g}", gpu(g), 1, 1.0) for g in ("V100", "P100", "K80")]


def _model(kind: str):
    return build(kind, **dict(registry()[kind].test_params))


def test_the_built_in_models_are_registered() -> None:
    assert {"table", "pairs"} <= set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_slowdowns_are_symmetric_deterministic_and_positive(kind: str) -> None:
    m, again = _model(kind), _model(kind)
    for vm in VMS:
        for a in SPECS:
            for b in SPECS:
                sa, sb = m.slowdowns(a, b, vm, 1)
                assert (sa, sb) == again.slowdowns(a, b, vm, 1), f"{kind}: not deterministic"
                assert m.slowdowns(b, a, vm, 1) == (sb, sa), f"{kind}: {a.name} + {b.name} not symmetric"
                assert math.isinf(sa) == math.isinf(sb) and sa > 0 and sb > 0
            u = m.utilisation(a, vm, 1)
            assert math.isnan(u) or 0 <= u <= 1
            mem = m.memory_gb(a, vm, 1)
            assert math.isnan(mem) or mem > 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_job_that_shares_with_no_one_says_so_and_only_then(kind: str) -> None:
    """``shares`` False rules out every partner (policies skip such a job unpriced), and each model says False for
    some job or GPU count here, so the shortcut is used at all."""
    m = _model(kind)
    said_no = 0
    for vm in VMS:
        for gpus in (1, 2):
            for a in SPECS:
                if m.shares(a, vm, gpus):
                    continue
                said_no += 1
                assert all(math.isinf(m.slowdowns(a, b, vm, gpus)[0]) for b in SPECS), f"{kind}: {a.name} pairs"
    assert said_no > 0, f"{kind}: never rules a job out"


@pytest.mark.parametrize("kind", KINDS)
def test_parameters_are_stored_under_their_own_names(kind: str) -> None:
    m = _model(kind)
    assert set(m.get_params()) == set(type(m).param_names())
    assert type(m)(**m.get_params()).describe() == m.describe()


def test_the_table_reads_gavels_pairs_as_measured() -> None:
    """ResNet-50 (batch 64) next to ResNet-18 (batch 16) on a V100, straight from the file: each slowdown is the
    job's throughput alone over its throughput in the pair; a 0 in the file cannot share, nor can 2-GPU pairs."""
    raw = json.loads(resources.files("predictors").joinpath("data", "gavel", "simulation_throughputs.json")
                     .read_text(encoding="utf-8"))["v100"]
    a, b = "('ResNet-50 (batch size 64)', 1)", "('ResNet-18 (batch size 16)', 1)"
    ta, tb = raw[a][b]
    m, v100 = MeasuredPairs(), VMS[-3]
    assert m.slowdowns(GAVEL[1], GAVEL[0], v100, 1) == (raw[a]["null"] / ta, raw[b]["null"] / tb)
    zero = next((x, y) for (g, x, y, n), (p, q) in gavel_pairs().pairs.items() if g == "K80" and n == 1 and p == 0)
    spec = {t: JobSpec(t.split(" (")[0], "pytorch", 1, int(t.split("size ")[1][:-1]) if "size" in t else 1)
            for t in zero}
    assert math.isinf(m.slowdowns(spec[zero[0]], spec[zero[1]], VMS[-1], 1)[0])
    assert math.isinf(m.slowdowns(GAVEL[1], GAVEL[0], v100, 2)[0])


def test_the_table_infers_utilisation_from_the_saturated_pairs() -> None:
    """Two job types alone at 10 and 20 it/s, measured in pairs as a GPU shared by jobs that keep 0.6 and 0.8 of it
    busy would run them (each pair saturates it: each job at 1 / (u_A + u_B) of its speed alone): the fit gives back
    0.6 and 0.8; a third type measured in no pair gets none."""
    alone = {("X", "A", 1): 10.0, ("X", "B", 1): 20.0, ("X", "C", 1): 5.0}
    pairs = {("X", "A", "A", 1): (10 / 1.2, 10 / 1.2), ("X", "A", "B", 1): (10 / 1.4, 20 / 1.4),
             ("X", "B", "A", 1): (20 / 1.4, 10 / 1.4), ("X", "B", "B", 1): (20 / 1.6, 20 / 1.6),
             ("X", "A", "C", 1): (0.0, 0.0)}
    u = PairTable(alone, pairs, "hand").utilisation("X", 1)
    assert set(u) == {"A", "B"} and u["A"] == pytest.approx(0.6) and u["B"] == pytest.approx(0.8)
    shipped = gavel_pairs()
    assert all(0 <= x <= 1 for g in ("V100", "P100", "K80") for x in shipped.utilisation(g, 1).values())


def test_features_come_from_the_layer_graph_or_the_costs_table() -> None:
    """ResNet-50 at batch 64: its iteration's FLOPs are 64 samples of the resnet50 graph's forward and backward FLOPs;
    a network with neither a graph nor a row (DeepSpeech) has no features, and the learned model will not pair it."""
    from predictors.interference.features import job_costs, job_features
    from predictors.interference.learned import LearnedInterference
    from predictors.networks import network

    g = network("resnet50")
    flops = sum(g.nodes[n]["layer"].flops_fwd + g.nodes[n]["layer"].flops_bwd for n in g if g.nodes[n]["layer"])
    j5 = job_types()["J5"]
    assert job_features(j5)[0] == pytest.approx(math.log10(64 * flops))
    assert job_costs(GAVEL[5])[3] == 20, "A3C's iteration is its 20 steps, from the costs table"
    j1 = job_types()["J1"]
    assert job_features(j1) is None
    assert LearnedInterference(trees=5).slowdowns(j1, j5, VMS[-3], 1) == (math.inf, math.inf)


def test_the_learned_model_never_sees_a_left_out_family() -> None:
    """Trained without ResNet-50, the model is the one trained on the samples without any ResNet-50 pair, and its
    answer for a ResNet-50 pair differs from the model that saw them; leave_family_out scores every family once."""
    from predictors.interference.learned import LearnedInterference, leave_family_out, pair_samples

    samples = pair_samples(gavel_pairs())
    kept = samples[(samples["family"] != "ResNet-50") & (samples["partner_family"] != "ResNet-50")]
    left = LearnedInterference(trees=10, leave_out=("ResNet-50",)).fit(samples)
    same = LearnedInterference(trees=10).fit(kept.reset_index(drop=True))
    seen = LearnedInterference(trees=10).fit(samples)
    v100 = VMS[-3]
    assert left.slowdowns(GAVEL[1], GAVEL[0], v100, 1) == same.slowdowns(GAVEL[1], GAVEL[0], v100, 1)
    assert left.slowdowns(GAVEL[1], GAVEL[0], v100, 1) != seen.slowdowns(GAVEL[1], GAVEL[0], v100, 1)
    table = leave_family_out(trees=5)
    assert list(table["family"]) == sorted(samples["family"].unique()) + ["all"]
    assert table["predictions"].iloc[-1] == table["predictions"].iloc[:-1].sum()
    assert (table[["slowdown_rmsle", "utilisation_rmsle_pct"]] > 0).all().all()
