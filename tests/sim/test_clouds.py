"""The cloud catalogue: its prices are the shipped price file's, every GPU it names has specifications, selections by
provider, region, GPU and GPU count, and the paper's catalogue left as it was."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from sim import catalogue
from sim.model import Billing, CapsimError


def _shipped_rows() -> list[dict[str, str]]:
    with resources.files("sim").joinpath("data", "clouds", "vm_types.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_the_catalogue_prices_are_the_shipped_files() -> None:
    rows = _shipped_rows()
    built = catalogue.cloud_vm_types()
    assert [r["name"] for r in rows] == list(built), "one VM type per row, in file order"
    for r in rows:
        v = built[r["name"]]
        assert (v.provider, v.region, v.gpu.name, v.gpus) == (r["provider"], r["region"], r["gpu"], int(r["gpus"]))
        assert v.price_per_hour == float(r["price_per_hour"]), r["name"]
        assert v.spot_price_per_hour == float(r["spot_price_per_hour"]), r["name"]
        assert r["source"].startswith("skypilot-catalog catalogs/"), "the source column is kept"
    assert len(rows) == 35 and {r["provider"] for r in rows} == {"aws", "azure", "gcp"}


@pytest.mark.parametrize("name, price, spot, gpus", [
    ("p4d.24xlarge", 21.957642, 6.289, 8),                  # figures read off the shipped file by hand
    ("Standard_ND96isr_H100_v5", 98.32, 98.32, 8),          # the corrected GPU count (12 in the source catalogue)
    ("g2-standard-4", 0.70683, 0.28184, 1),                 # GCP: host + GPU rows summed
])
def test_hand_checked_rows(name: str, price: float, spot: float, gpus: int) -> None:
    v = catalogue.vm_type(name)
    assert (v.price_per_hour, v.spot_price_per_hour, v.gpus) == (price, spot, gpus)


def test_every_cloud_vm_is_billed_and_booted_by_its_provider() -> None:
    providers = catalogue.cloud_providers()
    for v in catalogue.cloud_vm_types().values():
        assert v.billing == providers[v.provider].billing and v.billing != Billing()
        assert v.boot_time == providers[v.provider].boot_time > 0


def test_every_gpu_named_has_specifications() -> None:
    named = {r["gpu"] for r in _shipped_rows()} | {"P100"}
    models = catalogue.gpu_models()
    assert named <= set(models)
    for name in named:
        g = models[name]
        assert g.sms > 0 and g.boost_mhz > 0 and g.fp32_tflops > 0 and g.memory_gb > 0 and g.bandwidth_gbs > 0
    assert models["A100-40GB"].memory_gb == 40 and models["A100-80GB"].memory_gb == 80
    # FP32 = SMs x FP32 lanes per SM (64 on GA100, 128 on GA10x, AD10x, GH100) x 2 flops x boost clock
    for name in ("A10G", "A10", "L4", "L40S", "A100-40GB", "A100-80GB", "H100"):
        g = models[name]
        lanes = 64 if name.startswith("A100") else 128
        assert g.sms * lanes * 2 * g.boost_mhz / 1e6 == pytest.approx(g.fp32_tflops, rel=0.02), name


def test_the_paper_catalogue_is_unchanged() -> None:
    paper = catalogue.vm_types()
    assert list(paper) == ["NC6", "NC12", "NC24", "NV6", "NV12", "NV24", "inhouse1", "inhouse2", "inhouse3"]
    assert all(v.billing == Billing() and v.spot_price_per_hour is None and v.region == "" for v in paper.values())
    assert catalogue.vm_type("NC6").price_per_hour == 0.56 and catalogue.gpu("A100").memory_gb == 80


def test_select_by_provider_region_gpu_and_count() -> None:
    names = lambda vs: [v.name for v in vs]  # noqa: E731
    aws = catalogue.select_vm_types("aws", "us-east-1")
    assert len(aws) == 13 and {v.provider for v in aws} == {"aws"}
    assert names(catalogue.select_vm_types(gpu="H100")) == ["p5.48xlarge", "Standard_NC40ads_H100_v5",
                                                             "Standard_ND96isr_H100_v5", "a3-highgpu-8g"]
    assert names(catalogue.select_vm_types("gcp", gpu=["A100-40GB", "A100-80GB"], gpus=8)) == \
        ["a2-highgpu-8g", "a2-ultragpu-8g"]
    assert names(catalogue.select_vm_types("azure", gpus=[1, 4], gpu="T4")) == \
        ["Standard_NC4as_T4_v3", "Standard_NC64as_T4_v3"]
    fast = catalogue.select_vm_types("gcp", gpu="L4", boot_time=30)
    assert [v.boot_time for v in fast] == [30.0, 30.0] and catalogue.vm_type("g2-standard-4").boot_time == 120.0


@pytest.mark.parametrize("args, message", [
    ({"provider": "ibm"}, "unknown cloud provider 'ibm': the cloud catalogue has aws, azure, gcp"),
    ({"provider": "aws", "region": "eastus"}, "no VM type of aws is in region 'eastus'; the regions are us-east-1"),
    ({"provider": "gcp", "gpu": "H200"}, "no VM type of gcp has GPU 'H200'; the GPUs are"),
    ({"provider": "azure", "gpus": 2}, "no VM type of azure has 2 GPUs; the GPU counts are 1, 4, 8"),
])
def test_a_selection_matching_nothing_says_what_there_is(args: dict, message: str) -> None:
    with pytest.raises(CapsimError, match=message.replace("(", r"\(")):
        catalogue.select_vm_types(**args)


def test_a_name_is_looked_up_in_both_catalogues() -> None:
    assert catalogue.vm_type("p5.48xlarge").provider == "aws"
    with pytest.raises(CapsimError, match=r"unknown VM type 'p5\.48xlarg': the catalogue has NC6.*cloud catalogue 35"):
        catalogue.vm_type("p5.48xlarg")
