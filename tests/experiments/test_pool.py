"""The process pool hands its workers what the command already computed (the predictors' fits), and a Ctrl-C that
lands while it starts its fork server is acted on, not lost."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

import predictors
from experiments.running import interrupts, pool
from experiments.running.pool import run_parallel

KEY = ("capsim-test: a fit made once", 1)


def _fit_in_worker(_: int) -> Any:
    return predictors.build("measured").shared(KEY, lambda: "made in the worker")


def test_pool_workers_use_the_commands_fits_instead_of_fitting_again() -> None:
    assert predictors.build("measured").shared(KEY, lambda: "made by the command") == "made by the command"
    got: dict[int, Any] = {}
    run_parallel(_fit_in_worker, [0, 1, 2], got.__setitem__, workers=2)
    assert got == {0: "made by the command", 1: "made by the command", 2: "made by the command"}


def _a_new_fit(_: int) -> Any:
    return predictors.build("measured").shared(("capsim-test: not made by the command", 2), lambda: "made here")


def test_a_fit_the_command_never_made_is_made_in_the_worker() -> None:
    got: dict[int, Any] = {}
    run_parallel(_a_new_fit, [0], got.__setitem__, workers=2)
    assert got == {0: "made here"}


def test_a_ctrl_c_while_the_fork_server_starts_stops_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C reaches the whole process group; while the server starts, the command used to ignore it (so the
    server would not print a traceback) and then ran on as if never interrupted (the 100-interrupts stress test
    saw a sweep go on after a group SIGINT)."""
    from multiprocessing import forkserver

    real = forkserver.ensure_running

    def ensure_running() -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the terminal's Ctrl-C, exactly while the server starts
        real()

    monkeypatch.setattr(forkserver, "ensure_running", ensure_running)
    monkeypatch.setattr(pool, "_CONTEXT", None)
    got: dict[int, Any] = {}
    with pytest.raises(KeyboardInterrupt), interrupts.install():
        run_parallel(abs, [-1, -2], got.__setitem__, workers=2)
    assert got == {}


def test_a_signal_inside_a_pydantic_callback_is_neither_lost_nor_warned_about(recwarn: pytest.WarningsRecorder
                                                                              ) -> None:
    """A discriminator that raises while pydantic-core serialises is taken as a failed match: the exception was lost
    and a UserWarning reached the user (seen from SIGTERMs landing in ``workload.mix``'s); the request now waits for
    the next ``check()``."""
    from typing import Annotated

    from pydantic import BaseModel, Discriminator, Tag

    def tag(v: Any) -> str | None:
        if calls.append(v) or len(calls) == 2:  # serialising (the first call validates): SIGTERM lands here
            os.kill(os.getpid(), signal.SIGTERM)
        return "<weights>" if isinstance(v, dict) else None

    class M(BaseModel):
        mix: Annotated[Annotated[dict[str, float], Tag("<weights>")] | Annotated[list[str], Tag("<list>")],
                       Discriminator(tag)]

    calls: list[Any] = []
    m = M(mix={"J1": 1.0})
    with pytest.raises(interrupts.Terminated), interrupts.install():
        assert m.model_dump() == {"mix": {"J1": 1.0}}
        assert len(calls) == 2
        interrupts.check()
    assert not [w for w in recwarn if "serializ" in str(w.message)]


@pytest.mark.skipif(pool.start_method() != "forkserver", reason="the fork server is Linux's")
def test_a_process_the_fork_server_forks_dies_with_the_command_before_it_reads_what_to_run(tmp_path) -> None:  # noqa: ANN001
    """A child of the fork server is bound to die with it from the moment it is forked: a SIGKILL of the command
    while the child still unpickles what it is to run (a Dask worker importing as it starts) leaves nothing
    (before, the child lived on until its start was over)."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    prog = ("import time\n"
            "from experiments.running import pool\n"
            "class Slow:\n"
            "    def __reduce__(self):\n"
            "        return time.sleep, (120,)\n"
            "p = pool._context().Process(target=print, args=(Slow(),), daemon=True)\n"
            "p.start()\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(120)\n")
    root = Path(__file__).resolve().parents[2]
    command = subprocess.Popen([sys.executable, "-c", prog], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert command.stdout is not None
        child = int(command.stdout.readline())
        time.sleep(0.5)
        assert interrupts.pid_alive(child), "the child waits in its unpickling"
        command.kill()
        command.wait(30)
        end = time.monotonic() + 10
        while interrupts.pid_alive(child) and time.monotonic() < end:
            time.sleep(0.05)
        assert not interrupts.pid_alive(child)
    finally:
        command.kill()
