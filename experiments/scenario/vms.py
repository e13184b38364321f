"""The models of a scenario's VM types (``cluster.vm_types`` entries: a catalogue name, an inline type, a cloud
selection), of renting them spot (``cluster.spot``), the VM types they stand for, and their resolved form behind
run ids.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from experiments.scenario.fields import NonNeg, PositiveFloat, PositiveInt, StrictModel
from sim.model import Billing, VMType

__all__ = ["BillingSpec", "CustomVM", "CloudSelection", "AvailabilityTraceSpec", "AvailabilityTrace", "SpotSpec",
           "VMEntry", "resolved_vm", "listed_vm_types"]


class BillingSpec(StrictModel):
    """A billing rule: time on rounded up to whole ``increment`` seconds (0: exact), at least ``minimum`` seconds."""

    increment: NonNeg = 0.0
    minimum: NonNeg = 0.0


class CustomVM(StrictModel):
    """A VM type not in the catalogue, defined inline (billed exactly per second unless ``billing`` says otherwise)."""

    name: str
    gpu: str
    gpus: PositiveInt
    price_per_hour: NonNeg
    boot_time: NonNeg = 0.0
    provider: str = "custom"
    billing: BillingSpec | None = None
    spot_price_per_hour: NonNeg | None = None
    region: str = ""


class CloudSelection(StrictModel):
    """Every VM type of the cloud catalogue matching the filters given: a provider, a region, GPU models, GPU counts;
    ``boot_time`` replaces the provider's assumed boot time (``docs/clouds.md``)."""

    provider: str | None = None
    region: str | None = None
    gpu: str | list[str] | None = None
    gpus: PositiveInt | list[PositiveInt] | None = None
    boot_time: NonNeg | None = None

    @model_validator(mode="after")
    def _some_filter(self) -> CloudSelection:
        if self.provider is None and self.region is None and self.gpu is None and self.gpus is None:
            raise ValueError("expected at least one of provider, region, gpu, gpus to select cloud VM types, "
                             "found none")
        return self


def _vm_tag(v: Any) -> str | None:
    if isinstance(v, str):
        return "<name>"
    if isinstance(v, CustomVM) or (isinstance(v, dict) and "name" in v):
        return "<custom>"
    if isinstance(v, (dict, CloudSelection)):
        return "<cloud>"
    return None


VMEntry = Annotated[
    Annotated[str, Tag("<name>")] | Annotated[CustomVM, Tag("<custom>")] | Annotated[CloudSelection, Tag("<cloud>")],
    Discriminator(
        _vm_tag,
        custom_error_type="capsim_choice",
        custom_error_message="expected a catalogue VM type name, a mapping {name, gpu, gpus, price_per_hour} or a "
                             "cloud selection {provider, region, gpu, gpus}",
    ),
]


def resolved_vm(v: VMType) -> dict[str, Any]:
    """A VM type as plain data; fields at their defaults are left out, so older scenarios keep their run ids."""
    d: dict[str, Any] = {"name": v.name, "gpu": v.gpu.name, "gpus": v.gpus, "price_per_hour": v.price_per_hour,
                         "boot_time": v.boot_time, "provider": v.provider}
    if v.billing != Billing():
        d["billing"] = {"increment": v.billing.increment, "minimum": v.billing.minimum}
    if v.spot_price_per_hour is not None:
        d["spot_price_per_hour"] = v.spot_price_per_hour
    if v.region:
        d["region"] = v.region
    if v.spot:
        d["spot"] = True
        d["revocation_rate"] = v.revocation_rate
    return d


def _rate_tag(v: Any) -> str | None:
    if isinstance(v, dict):
        return "<rates>"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return "<rate>"
    return None


class AvailabilityTraceSpec(StrictModel):
    """A recorded availability trace (``sim.availability``): a file, or a directory of SkyPilot files (one market
    each, named by its stem); ``market`` keeps one series of several."""

    path: str
    format: Literal["skypilot", "csv"] = "skypilot"
    encoding: Literal["available", "preempted"] = "available"
    min_count: PositiveFloat = 1.0
    market: str | None = None


def _trace_tag(v: Any) -> str | None:
    if isinstance(v, str):
        return "<path>"
    if isinstance(v, (dict, AvailabilityTraceSpec)):
        return "<trace>"
    return None


AvailabilityTrace = Annotated[
    Annotated[str, Tag("<path>")] | Annotated[AvailabilityTraceSpec, Tag("<trace>")],
    Discriminator(
        _trace_tag,
        custom_error_type="capsim_choice",
        custom_error_message="expected a path, or a mapping {path, format, encoding, min_count, market}",
    ),
]
"""An availability trace in a scenario: a path, or ``AvailabilityTraceSpec``'s fields."""


class SpotSpec(StrictModel):
    """Renting spot: every selected VM type with a spot price gets a spot variant (``sim.catalogue.with_spot``).

    Its market is either a Poisson process, revoking each VM ``revocation_rate`` times per hour on average (one
    number, or a mapping from a VM type name or a GPU model, the name first, to a rate, with ``default`` for the
    rest), or a recorded availability ``trace`` replayed from ``offset_hours`` into it (``sim.spot_market``: a VM
    is revoked when its zone's series turns unavailable and cannot be started while none of its zones is
    available). With a trace, ``revocation_rate`` (if given) is only what policies are told of the risk; by default
    they are told the series' observed revocations per available hour. ``only`` drops the on-demand types that have
    a spot variant."""

    revocation_rate: Annotated[
        Annotated[NonNeg, Tag("<rate>")] | Annotated[dict[str, NonNeg], Field(min_length=1), Tag("<rates>")],
        Discriminator(
            _rate_tag,
            custom_error_type="capsim_choice",
            custom_error_message="expected a rate per hour or a mapping {VM type or GPU model or default: rate}",
        ),
    ] | None = None
    trace: AvailabilityTrace | None = None
    offset_hours: NonNeg = 0.0
    only: bool = False

    @model_validator(mode="after")
    def _a_market(self) -> SpotSpec:
        if self.revocation_rate is None and self.trace is None:
            raise ValueError("expected revocation_rate (a Poisson market) or trace (a replayed availability series), "
                             "found neither")
        return self

    def trace_spec(self) -> AvailabilityTraceSpec | None:
        return AvailabilityTraceSpec(path=self.trace) if isinstance(self.trace, str) else self.trace


def listed_vm_types(entries: list[str | CustomVM | CloudSelection] | None) -> tuple[VMType, ...]:
    """The VM types ``cluster.vm_types`` lists, in order (the whole catalogue when None), before spot variants."""
    from sim import catalogue

    if entries is None:
        return tuple(catalogue.vm_types().values())
    out: list[VMType] = []
    for v in entries:
        if isinstance(v, str):
            out.append(catalogue.vm_type(v))
        elif isinstance(v, CloudSelection):
            out.extend(catalogue.select_vm_types(v.provider, v.region, v.gpu, v.gpus, v.boot_time))
        else:
            billing = Billing() if v.billing is None else Billing(v.billing.increment, v.billing.minimum)
            out.append(VMType(v.name, catalogue.gpu(v.gpu), v.gpus, v.price_per_hour, boot_time=v.boot_time,
                              provider=v.provider, billing=billing, spot_price_per_hour=v.spot_price_per_hour,
                              region=v.region))
    return tuple(out)
