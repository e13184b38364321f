"""The ``capsim`` command line: one sub-command per module in ``experiments.commands``.

Building the parser imports only the standard library: each command module keeps its heavy imports (pandas, pyarrow,
matplotlib, scipy, the solvers) inside the functions that run it, so ``capsim --help`` answers at once.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, Sequence

# sub-command name -> module in experiments.commands exposing ``HELP``, ``add_arguments(parser)``, ``run(args) -> int``
COMMANDS = {
    "run": "run",
    "sweep": "sweep",
    "report": "report",
    "plot": "plot",
    "predict": "predict",
}


class _Version(argparse.Action):
    """``--version``: the installed package's version, read from its metadata only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print capsim's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version("capsim")
        except PackageNotFoundError:
            text = "unknown (not installed; run `pip install -e .`)"
        print(f"capsim {text}")
        parser.exit()


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
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(f"experiments.commands.{module_name}")
        except ModuleNotFoundError as e:
            if e.name == f"experiments.commands.{module_name}":
                continue
            raise
        p = sub.add_parser(name, help=module.HELP.replace("%", "%%"), description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from sim.model import CapsimError

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
