"""The local Dask cluster of ``--dask local:N``: its workers follow the pool's rules, a stop leaves none behind and
none is started again, Ctrl-C stays open in the command while the cluster starts, and no Dask call waits unbounded."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from experiments.running import dask_local, interrupts
from sim.model import CapsimError

pytest.importorskip("distributed")


def _wait_for(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


def _worker_state() -> tuple[bool, int, int]:
    """In a worker: Ctrl-C ignored, its parent, and its parent-death signal (``PR_GET_PDEATHSIG``)."""
    import ctypes

    sig = ctypes.c_int(0)
    ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)
    return signal.getsignal(signal.SIGINT) == signal.SIG_IGN, os.getppid(), sig.value


def _fork_server() -> int:
    from multiprocessing import forkserver

    return int(forkserver._forkserver._forkserver_pid)  # type: ignore[attr-defined]


@pytest.mark.parametrize("address,expected", [("local:2", (2, None)), ("local:1:8790", (1, ":8790"))])
def test_local_addresses(address: str, expected: tuple[int, str | None]) -> None:
    assert dask_local.parse_local(address) == expected


@pytest.mark.parametrize("address", ["local:x", "local:0", "local:", "local:2:port", "local:2:70000", "local:2:1:3"])
def test_a_bad_local_address_says_what_is_expected(address: str) -> None:
    with pytest.raises(CapsimError, match=r"local:N .*local:N:PORT"):
        dask_local.parse_local(address)


def test_workers_follow_the_rules_even_when_restarted_and_a_stop_starts_none_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker, also one its nanny starts again after a crash, ignores Ctrl-C and dies with the command; a call
    the workers do not answer in time is an error that says so; once the command stops, a killed worker is not
    started again (a nanny that saw its worker die while "running" did so, and the new workers outlived the
    command)."""
    from experiments.running.pool import start_method

    cluster, client = dask_local.start_local(1, None, str(tmp_path))
    try:
        (first,) = client.run(_worker_state).values()
        parent = _fork_server() if start_method() == "forkserver" else os.getpid()
        assert first == (True, parent, int(signal.SIGKILL))
        monkeypatch.setattr(dask_local, "CALL_TIMEOUT", 0.2)
        with pytest.raises(CapsimError, match=r"did not answer within 0.2 s while resting"):
            dask_local.on_workers(client, time.sleep, 5.0, what="resting")
        (old,) = client.scheduler_info()["workers"]
        for p in mp.active_children():
            p.kill()  # a crash: the nanny starts the worker again, and it sets itself up again

        def replaced() -> bool:
            now = set(client.scheduler_info()["workers"])
            return len(now) == 1 and old not in now

        assert _wait_for(replaced, 120)
        (again,) = client.run(_worker_state).values()
        assert again == first
        dask_local.kill_workers()
        assert _wait_for(lambda: not mp.active_children(), 10)
        time.sleep(1.0)  # a nanny restarting its worker would have spawned it by now
        assert not mp.active_children()
    finally:
        dask_local.close(client, cluster)


def test_ctrl_c_while_the_cluster_starts_stops_it_and_kills_its_workers(tmp_path: Path) -> None:
    """Ctrl-C stays open in the command's thread while Dask starts (blocked there, it went to another thread and the
    stop waited for the watchdog, which left the starting workers behind); the stop kills every worker started."""
    main = threading.get_native_id()
    seen: dict[str, Any] = {}

    def ctrl_c_once_a_worker_runs() -> None:
        if _wait_for(lambda: mp.active_children(), 120):
            status = Path(f"/proc/self/task/{main}/status").read_text()
            blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
            seen["blocked"] = bool(blocked & (1 << (signal.SIGINT - 1)))
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c_once_a_worker_runs, daemon=True).start()
    with pytest.raises(KeyboardInterrupt), interrupts.install():
        dask_local.start_local(2, None, str(tmp_path))
    assert seen == {"blocked": False}
    assert _wait_for(lambda: not mp.active_children(), 10)
    time.sleep(1.0)
    assert not mp.active_children()


def test_two_clusters_at_once_without_a_dashboard_do_not_warn(tmp_path: Path) -> None:
    """Without a dashboard the scheduler's HTTP server takes a free port: Dask's default 8787 warned "Port 8787 is
    already in use" when two commands ran at once (clusters without workers: the scheduler is what listens)."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = dask_local.start_local(0, None, str(tmp_path))
        second = dask_local.start_local(0, None, str(tmp_path))
        try:
            ports = {c.scheduler.http_server.port for c, _ in (first, second)}
        finally:
            for cluster, client in (first, second):
                dask_local.close(client, cluster)
    assert len(ports) == 2 and 8787 not in ports
    assert not [w for w in seen if "already in use" in str(w.message)]


def _noop(x: int) -> int:
    return x


def test_a_local_cluster_keeps_a_bounded_log_of_what_it_sent_not_every_task(tmp_path: Path) -> None:
    """The scheduler and the client live in the command: with Dask's default they kept the last 1,000 messages of each
    stream (every task's pickled runs, to every worker) and transitions, memory that grew with the sweep until
    about 2,000 Dask tasks; a local cluster keeps a few."""
    bound = dask_local.LOG_LENGTH
    cluster, client = dask_local.start_local(1, None, str(tmp_path))
    try:
        for i in range(3 * bound):
            assert client.submit(_noop, i, pure=False).result(timeout=120) == i
        logs = [cluster.scheduler.transition_log, client.scheduler_comm.recent_message_log,
                *(s.recent_message_log for s in cluster.scheduler.stream_comms.values())]
        assert len(logs) == 3
        assert all(0 < len(log) <= bound for log in logs), [len(log) for log in logs]
    finally:
        dask_local.close(client, cluster)


def test_a_client_of_an_existing_cluster_keeps_a_bounded_log_too(tmp_path: Path) -> None:
    """``--dask tcp://...``: the client lives in the command and logged the last 1,000 messages it sent (each a chunk
    of runs); it keeps ``LOG_LENGTH``, and Dask's settings outside it are untouched."""
    import dask

    cluster, client = dask_local.start_local(0, None, str(tmp_path))  # a scheduler to connect to
    try:
        with dask.config.set({"distributed.admin.low-level-log-length": 1000}):
            remote = dask_local.connect(cluster.scheduler_address)
            try:
                assert remote.scheduler_comm.recent_message_log.maxlen == dask_local.LOG_LENGTH
            finally:
                remote.close()
            assert dask.config.get("distributed.admin.low-level-log-length") == 1000
    finally:
        dask_local.close(client, cluster)


@pytest.mark.slow
def test_an_unreachable_scheduler_is_one_error() -> None:
    """After Dask's 20 s of retries, one error naming the address."""
    with pytest.raises(CapsimError, match=r"cannot reach the Dask scheduler"):
        dask_local.connect("tcp://127.0.0.1:9")
