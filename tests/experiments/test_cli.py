"""The command line starts at once: no heavy library is imported to build the parser or print any help."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

from experiments.cli import COMMANDS, main
from experiments.running import interrupts

HEAVY = ("pandas", "scipy", "matplotlib", "pulp", "sklearn", "pyarrow", "highspy", "simpy")
HELPS = [[], *([c] for c in COMMANDS), ["predict", "evaluate"], ["predict", "show"]]

_PROBE = """
import contextlib, io, json, sys
from experiments.cli import main
seen = {}
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv + ["--help"])
        except SystemExit:
            pass
    seen[" ".join(argv) or "capsim"] = sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)
print(json.dumps(seen))
"""


def test_no_help_imports_a_heavy_library() -> None:
    import json

    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(HELPS), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert len(seen) == len(HELPS)
    assert {k: v for k, v in seen.items() if v} == {}, "help must not import these (import them where they are used)"


def test_the_probe_sees_an_import(tmp_path) -> None:
    """The check above can fail: running a command (not its help) does import pandas."""
    code = _PROBE.replace('main(argv + ["--help"])', 'main(argv)')
    proc = subprocess.run([sys.executable, "-c", code, '[["report", "' + str(tmp_path) + '"]]', '["pandas"]'],
                          capture_output=True, text=True, timeout=60)
    assert '"pandas"' in proc.stdout


def test_version_comes_from_the_package_metadata(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"capsim {version('capsim')}"


def test_help_shows_percent_signs_once(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    out = capsys.readouterr().out
    assert "95% CI" in out and "%%" not in out


@pytest.mark.parametrize("error", [ImportError("initialization failed"), OSError("interrupted system call")])
@pytest.mark.parametrize("stop,code,line", [(KeyboardInterrupt, 130, "capsim: interrupted"),
                                            (interrupts.Terminated, 143, "capsim: terminated")])
def test_a_signal_a_library_turned_into_its_own_error_is_still_a_stop(error: Exception, stop: type, code: int,
                                                                      line: str, capsys) -> None:
    """A SIGTERM while a compiled module initialised came back as ``ImportError: initialization failed`` and was
    reported as capsim's internal error (exit 3) by the 100-interrupts stress test."""
    import argparse

    from experiments import cli

    def command(args: argparse.Namespace) -> int:
        try:
            raise stop()
        except BaseException as signal_exc:
            raise error from signal_exc

    assert cli._run(argparse.Namespace(_run=command), []) == code
    assert capsys.readouterr().err == line + "\n"


def test_a_signal_while_the_parser_imports_the_commands_is_a_stop_even_when_a_library_hides_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The parser imports the commands' modules (numpy among them); a Ctrl-C while numpy's compiled core loads came
    back as numpy's ImportError, its cause no longer the KeyboardInterrupt, and Python printed its traceback."""
    import importlib
    import signal

    from experiments import cli
    from experiments.running import interrupts

    real = importlib.import_module

    class Importer:
        @staticmethod
        def import_module(name: str) -> object:
            if name == "experiments.cli.sweep":
                try:
                    interrupts.on_signal(signal.SIGINT, None)
                except KeyboardInterrupt:  # cleared by the library's compiled code, which fails its own way
                    pass
                raise ImportError('PyCapsule_Import could not import module "datetime"')
            return real(name)

    monkeypatch.setattr(cli, "importlib", Importer)
    assert cli.main(["run", "--help"]) == 130
    assert capsys.readouterr().err == "capsim: interrupted\n"
