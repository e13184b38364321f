"""The ``capsim`` command line: one sub-command per module in ``experiments.commands``."""

from __future__ import annotations

import argparse
import importlib
import sys

from sim.model import CapsimError

# sub-command name -> module in experiments.commands exposing ``HELP``, ``add_arguments(parser)``, ``run(args) -> int``
COMMANDS = {
    "run": "run",
    "sweep": "sweep",
    "report": "report",
    "plot": "plot",
    "predict": "predict",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="capsim",
        description="Simulate online capacity planning and scheduling of deep-learning training jobs on GPU VMs.",
        epilog="examples:\n  capsim run                      the default experiment\n"
               "  capsim run my.yaml --out DIR    a scenario file\n"
               "  capsim sweep experiments/quickstart.yaml --out results/qs\n"
               "  capsim report results/qs --format markdown\n"
               "  capsim plot results/qs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(f"experiments.commands.{module_name}")
        except ModuleNotFoundError as e:
            if e.name == f"experiments.commands.{module_name}":
                continue
            raise
        text = module.HELP.replace("%", "%%")
        p = sub.add_parser(name, help=text, description=text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except CapsimError as e:
        print(f"capsim: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("capsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
