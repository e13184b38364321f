"""Owned (in-house) servers in a scenario file, written as briefly as Gavel's ``-c 4:4:4``.

```yaml
cluster:
  servers: "4:4:4"            # servers of V100:P100:K80 (Gavel's order; quoted), or {V100: 4, P100: 4, K80: 4},
                              # or "32x8" with gpu: A100-40GB (32 servers of 8 GPUs of one model, ElasticFlow's shape)
  gpus_per_server: 1          # one number, "1:1:1", or {V100: 8, ...} (default 1)
  server_price: 0             # amortised $ per server-hour, one number or {V100: 3.06, ...} (default 0)
  rounds: 360                 # optional: round-based mode (or {length: 360, effects: false})
  # nodes: 6                  # optional: rented node slots next to the servers, with vm_types (and spot)
```

Owned servers are always there (fixed slots: no renting decision), never rented and never revoked, one VM type per
GPU model named after it in lower case (``v100``). Each is billed its ``server_price`` for its whole time on, from
the first arrival to the last job's end, whether it works or not; so a policy sees it priced 0 (using it costs
nothing more). With ``nodes``, rented slots (and ``vm_types``, ``spot``) come next to them and take only rentable
types. On a cluster of servers only, jobs may run as gangs across servers of one type unless ``gang: false``.
Gavel's ``-c`` counts GPUs, not servers: ``-c 36:36:36 --num_gpus_per_server 4:4:4`` is ``servers: "9:9:9"`` with
``gpus_per_server: 4``.

``servers: trace`` is the trace's own hardware, as its format's reader describes it (``TraceReader.hardware``:
Alibaba's node lists, Philly's servers per virtual cluster): one VM type per GPU model and server size, named
``<model>-<n>gpu`` in lower case (``g2-8gpu``, ``t4-2gpu``); ``server_price`` may name the trace's GPU models.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sim.model import VMType

__all__ = ["GAVEL_ORDER", "TRACE", "per_model", "parse_colons", "parse_shape", "server_types", "trace_server_types",
           "check_servers"]

GAVEL_ORDER = ("V100", "P100", "K80")
"""The GPU models of a colon-separated value, in Gavel's ``-c v100:p100:k80`` order."""

TRACE = "trace"
"""``servers: trace``: the fixed cluster the trace's jobs ran on."""

_COLONS = re.compile(r"^\s*\d+(\s*:\s*\d+){2}\s*$")
_SHAPE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def parse_shape(text: str) -> tuple[int, int] | None:
    """``"32x8"`` → ``(32, 8)`` (servers, GPUs per server); None for any other text."""
    m = _SHAPE.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def parse_colons(text: str) -> dict[str, int]:
    """``"4:4:4"`` → ``{"V100": 4, "P100": 4, "K80": 4}`` (ValueError unless three whole numbers)."""
    if not _COLONS.match(text):
        raise ValueError(f"expected three whole numbers V100:P100:K80 such as '4:4:4', servers x GPUs such as "
                         f"'32x8' (with gpu:), or 'trace' (the trace's own hardware), found {text!r}")
    return dict(zip(GAVEL_ORDER, (int(x) for x in text.split(":"))))


def per_model(value: Any, models: list[str], default: float) -> dict[str, Any]:
    """A per-GPU-model value from one number, a ``"a:b:c"`` text or a mapping (missing models get ``default``)."""
    if value is None:
        return {m: default for m in models}
    if isinstance(value, str):
        value = parse_colons(value)
    if isinstance(value, Mapping):
        return {m: value.get(m, default) for m in models}
    return {m: value for m in models}


def server_types(servers: Any, gpus_per_server: Any, price: Any, gpu: str | None = None
                 ) -> list[tuple[VMType, int, float]]:
    """(VM type, number of servers, amortised $ per server-hour) per GPU model of the owned servers, in the order the
    models are given (``gpu``: the model of a ``"NxG"`` cluster). The type is priced 0: an owned server costs nothing
    more to use (its rate is billed by the cluster's rules, ``ClusterRules.owned_price_per_hour``)."""
    from sim import catalogue

    shape = parse_shape(servers) if isinstance(servers, str) else None
    if shape is not None:
        if gpu is None:
            return []
        servers, gpus_per_server = {gpu: shape[0]}, shape[1]
    counts = parse_colons(servers) if isinstance(servers, str) else dict(servers)
    models = [m for m, n in counts.items() if n > 0]
    gpus = per_model(gpus_per_server, models, 1)
    prices = per_model(price, models, 0.0)
    return [(VMType(m.lower(), catalogue.gpu(m), int(gpus[m]), 0.0, provider="fixed"), counts[m], float(prices[m]))
            for m in models]


def trace_server_types(hardware: Any, price: Any) -> list[tuple[VMType, int, float]]:
    """(VM type priced 0, number of servers, amortised $ per server-hour) per kind of server of a trace's hardware
    (``sim.traces.Servers``), the rate from ``server_price`` (one number, or a mapping by the trace's GPU model names;
    default 0)."""
    from sim import catalogue

    prices = per_model(price, [h.gpu for h in hardware], 0.0)
    return [(VMType(f"{h.gpu.lower()}-{h.gpus}gpu", catalogue.trace_gpu(h.gpu), h.gpus, 0.0, provider="fixed"),
             h.count, float(prices[h.gpu])) for h in hardware if h.count > 0]


def check_servers(cluster: Any) -> list[tuple[tuple, str]]:
    """Problems of a fixed cluster: (field path, message) for unknown GPU models, fields it excludes."""
    from sim import catalogue

    out: list[tuple[tuple, str]] = []
    known = catalogue.gpu_models()
    if cluster.servers is None:
        for f in ("gpus_per_server", "server_price", "gpu"):
            if getattr(cluster, f) is not None:
                out.append(((f,), f"expected no {f} without servers (it describes the servers of a fixed cluster)"))
        return out
    if cluster.nodes is None:
        for f in ("vm_types", "spot"):
            if getattr(cluster, f) is not None:
                out.append(((f,), f"expected rented node slots (cluster.nodes) for {f}: next to owned servers, "
                                  f"{f} is about the VMs rented slots take, and there are none; give nodes: N (at "
                                  f"most N rented VMs at a time) or remove {f}"))
    if isinstance(cluster.servers, str) and parse_shape(cluster.servers) is not None:
        if cluster.gpu is None:
            out.append((("gpu",), f"expected the GPU model of the {cluster.servers!r} servers (e.g. gpu: A100-40GB, "
                                  f"gpu: T4), found none"))
        elif cluster.gpu not in known:
            out.append((("gpu",), f"unknown GPU model {cluster.gpu!r} (known: {', '.join(known)})"))
        if cluster.gpus_per_server is not None:
            out.append((("gpus_per_server",), f"expected no gpus_per_server with servers {cluster.servers!r} (it "
                                              f"gives the GPUs per server); remove one"))
        if any(n < 1 for n in parse_shape(cluster.servers) or ()):
            out.append((("servers",), f"expected at least one server of at least one GPU, found {cluster.servers!r}"))
        return out
    if cluster.gpu is not None:
        out.append((("gpu",), f"expected no gpu with servers {cluster.servers!r} (it names the models); use "
                              f"servers: \"NxG\" with gpu, or remove gpu"))
    if cluster.servers == TRACE:
        if cluster.gpus_per_server is not None:
            out.append((("gpus_per_server",), "expected no gpus_per_server with servers: trace (the trace's hardware "
                                              "says how many GPUs each server has)"))
        return out
    counts = parse_colons(cluster.servers) if isinstance(cluster.servers, str) else cluster.servers
    for field, value in (("servers", counts), ("gpus_per_server", cluster.gpus_per_server),
                         ("server_price", cluster.server_price)):
        if isinstance(value, Mapping):
            for m in value:
                if m not in known:
                    out.append(((field, m), f"unknown GPU model {m!r} (known: {', '.join(known)})"))
                elif field != "servers" and m not in counts:
                    out.append(((field, m), f"expected a GPU model of servers ({', '.join(counts)}), found {m!r}"))
    if not any(n > 0 for n in counts.values()):
        out.append((("servers",), f"expected at least one server, found {cluster.servers!r}"))
    return out
