"""Gavel's trace format (Narayanan et al., OSDI 2020; ``stanford-futuredata/gavel``), read and generated.

A Gavel trace has one job per line and ten tab-separated fields: job type (``ResNet-50 (batch size 64)``, ``A3C``),
command, working directory, steps argument, needs-data-dir flag, total steps, scale factor (GPUs, all of one type,
started and stopped together), priority weight, SLO (``-1``: none) and arrival time (s). The simulator uses the job
type, total steps, scale factor, priority weight and arrival; so does this reader (``docs/gavel.md``).

``generate`` reproduces Gavel's ``scripts/utils/generate_trace.py`` line for line (its four ``random.Random``
streams, seeded ``seed`` to ``seed + 3``, are kept on purpose: the same arguments give the same file as Gavel's
script), to make held-out traces beside the two shipped ones.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sim.model import CapsimError
from sim.traces.base import TRACE_FORMATS, TraceReader

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GavelTrace", "split_job_type", "job_type_name", "TEMPLATES", "generate"]

_BATCH = re.compile(r"^(.*) \(batch size (\d+)\)$")


def split_job_type(job_type: str) -> tuple[str, int]:
    """``("ResNet-50", 64)`` from ``"ResNet-50 (batch size 64)"``; a type named without a batch size (``A3C``,
    ``CycleGAN``) has batch size 1."""
    m = _BATCH.match(job_type)
    return (m.group(1), int(m.group(2))) if m else (job_type, 1)


def job_type_name(application: str, batch_size: int, known: Mapping[str, object] | None = None) -> str:
    """Gavel's job type name of an application and batch size (the inverse of ``split_job_type``): the name with
    the batch size, unless ``known`` names the application alone (as Gavel names A3C and CycleGAN)."""
    with_batch = f"{application} (batch size {batch_size})"
    if known is not None and with_batch not in known and application in known:
        return application
    return with_batch


@TRACE_FORMATS.register("gavel")
class GavelTrace(TraceReader):
    """Gavel's tab-separated trace (see the module docstring). ``framework`` is the framework of every job (Gavel's
    jobs are PyTorch programs). The table keeps the job type as ``name``, the scale factor as ``gpus`` and the
    priority weight as ``priority``."""

    file_kind = "Gavel trace"
    example = (
        "ResNet-50 (batch size 64)\tpython3 main.py -j 8 -a resnet50 -b 64 %s/imagenet/\timage_classification/imagenet"
        "\t--num_minibatches\t1\t15821\t1\t1\t-1.000000\t0\n"
        "A3C\tpython3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True\trl\t--max-steps\t0\t25833\t1\t1"
        "\t-1.000000\t248\n"
        "LM (batch size 20)\tpython main.py --cuda --data %s/wikitext2 --batch_size 20\tlanguage_modeling\t--steps\t1"
        "\t1427480\t2\t5\t-1.000000\t3254\n"
    )
    example_jobs = 3

    def __init__(self, framework: str = "pytorch"):
        self.framework = framework

    def read(self, path: Path) -> pd.DataFrame:
        import pandas as pd

        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise CapsimError(f"{path}: cannot read the Gavel trace: {e}") from None
        rows = []
        for i, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 10:
                raise CapsimError(f"{path}: line {i}: expected Gavel's 10 tab-separated fields (job type, command, "
                                  f"working directory, steps argument, needs data dir, total steps, scale factor, "
                                  f"priority weight, SLO, arrival time), found {len(fields)}")
            application, batch = split_job_type(fields[0])
            rows.append({"submit_time": fields[9], "application": application, "framework": self.framework,
                         "iterations": fields[5], "batch_size": batch, "name": fields[0], "gpus": fields[6],
                         "priority": fields[7]})
        columns = ["submit_time", "application", "framework", "iterations", "batch_size", "name", "gpus", "priority"]
        table = pd.DataFrame(rows, columns=columns)
        for c in ("submit_time", "iterations", "gpus", "priority"):
            try:
                table[c] = pd.to_numeric(table[c])
            except (ValueError, TypeError):
                pass  # left as text: sim.workload.trace_jobs names the bad cell
        return table


# Gavel's 26 job templates (``job_table.JobTable``), in its order: job type, command, working directory, steps argument,
# whether the command takes a data directory, whether the job may run on several GPUs.
_RESNET18 = ("python3 main.py --data_dir=%s/cifar10 --batch_size {b}", "image_classification/cifar10", "--num_steps")
_RESNET50 = ("python3 main.py -j 8 -a resnet50 -b {b} %s/imagenet/", "image_classification/imagenet",
             "--num_minibatches")
_TRANSFORMER = ("python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size {b} -proj_share_weight",
                "translation", "-step")
_LM = ("python main.py --cuda --data %s/wikitext2 --batch_size {b}", "language_modeling", "--steps")
_RECOMMENDATION = ("python3 train.py --data_dir %s/ml-20m/pro_sg/ --batch_size {b}", "recommendation", "-n")
_FAMILIES = (("ResNet-18", _RESNET18, (16, 32, 64, 128, 256), True),
             ("ResNet-50", _RESNET50, (16, 32, 64, 128), True),
             ("Transformer", _TRANSFORMER, (16, 32, 64, 128, 256), True),
             ("LM", _LM, (5, 10, 20, 40, 80), True),
             ("Recommendation", _RECOMMENDATION, (512, 1024, 2048, 4096, 8192), False))
TEMPLATES: tuple[tuple[str, str, str, str, bool, bool], ...] = tuple(
    (f"{name} (batch size {b})", cmd.format(b=b), wd, arg, True, dist)
    for name, (cmd, wd, arg), sizes, dist in _FAMILIES for b in sizes
) + (
    ("A3C", "python3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True", "rl", "--max-steps", False, False),
    ("CycleGAN", "python3 cyclegan.py --dataset_path %s/monet2photo --decay_epoch 0", "cyclegan", "--n_steps", True,
     False),
)


def generate(num_jobs: int, lam: float, seed: int, v100_throughputs: Mapping[tuple[str, int], float], *,
             multi_gpu: bool = False, min_duration: float = 1.0, max_duration: float = 4.0,
             num_durations: int = 4) -> str:
    """The text of the trace Gavel's ``generate_trace.py --num_jobs N --lam L --seed S [-m]`` writes.

    ``v100_throughputs`` maps ``(job type, scale factor)`` to steps/s on one or more V100s (the ``"null"`` entries of
    Gavel's throughput file): a job's total steps are its drawn duration (1–4 h by default) times that rate. ``lam``
    is the mean inter-arrival time in seconds. Arrival times and steps are truncated to integers, as Gavel writes them.
    """
    if num_jobs < 0 or not lam >= 0 or num_durations < 1:
        raise CapsimError(f"gavel trace generator: expected num_jobs >= 0, lam >= 0 and num_durations >= 1, found "
                          f"{num_jobs}, {lam}, {num_durations}")
    kinds, arrivals, durations_rng, sizes = (random.Random(seed + k) for k in range(4))
    step = (max_duration - min_duration) / (num_durations - 1) if num_durations > 1 else 0.0
    durations = [min_duration + k * step for k in range(num_durations - 1)] + [max_duration]
    if num_durations == 1:
        durations = [min_duration]
    lines = []
    arrival = 0.0
    for i in range(num_jobs):
        job_type, command, wd, arg, data_dir, distributed = kinds.choice(TEMPLATES)
        scale = 1
        if multi_gpu and distributed:
            r = sizes.uniform(0, 1)
            if 0.7 <= r <= 0.8:
                scale = 2
            elif 0.8 <= r:
                scale = 4
        duration = durations_rng.choice(durations) * 3600
        key = (job_type, scale)
        if key not in v100_throughputs:
            raise CapsimError(f"gavel trace generator: no V100 throughput for {key}; give Gavel's throughput table")
        steps = max(1, int(v100_throughputs[key] * duration))
        if i > 0 and lam > 0:
            arrival += -math.log(1.0 - arrivals.random()) * lam
        lines.append(f"{job_type}\t{command}\t{wd}\t{arg}\t{int(data_dir)}\t{steps}\t{scale}\t1\t{-1.0:f}\t"
                     f"{int(arrival)}\n")
    return "".join(lines)
