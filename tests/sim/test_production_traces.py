"""Production trace readers: the three shipped traces read from their real files (row counts, the rows the reports
say were dropped and why, a slice checked by hand against the file), the schema-only formats on small files written
from their documented columns, and the options every production reader shares."""

from __future__ import annotations

import csv
import gzip
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from sim.model import CapsimError, Measured
from sim.traces import TRACE_FORMATS, Servers, read_trace
from sim.traces.report import TraceReport
from sim.workload import validate_trace

DATA = Path(__file__).resolve().parents[2] / "sim" / "data" / "traces"
PHILLY = DATA / "philly" / "philly_jobs_pollux.csv.gz"
PHILLY_EF = DATA / "philly" / "philly_103959_elasticflow.csv.gz"
PAI = DATA / "alibaba_pai_2023" / "openb_pod_list_default.csv.gz"
PAI_SPEC = DATA / "alibaba_pai_2023" / "openb_pod_list_gpuspec33.csv.gz"
KALOS = DATA / "acme" / "converted_kalos_trace.csv.gz"


def report(table) -> TraceReport:
    r = table.attrs["report"]
    assert isinstance(r, TraceReport)
    return r


def steps(table) -> dict[str, int]:
    """Rows per rule, keyed by the rule's first four words."""
    return {" ".join(s.rule.split()[:4]): s.rows for s in report(table).steps}


def assert_no_silent_drop(table) -> None:
    r = report(table)
    assert r.kept == len(table) and r.read - r.dropped == r.kept, r.text()


def _rows(path: Path) -> list[dict[str, str]]:
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


# ----- Philly ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def philly():
    return read_trace(PHILLY, "philly")


def test_philly_counts_and_report(philly) -> None:
    r = report(philly)
    assert (r.read, r.kept) == (82_247, 82_182)  # the file's rows; 65 of them repeat an earlier row
    assert steps(philly)["rows equal in every"] == 65
    assert_no_silent_drop(philly)
    assert list(philly["submit_time"]) == sorted(philly["submit_time"]), "replayed in arrival order"
    assert any("sorted by submit_time" in s.action for s in r.steps)
    # independent count from the file itself: distinct rows per VC
    rows = _rows(PHILLY)
    distinct = Counter(r["cluster"] for r in {tuple(r.values()): r for r in rows}.values())
    assert Counter(philly["vc"]) == distinct and sum(r["cluster"] == "103959" for r in rows) == 1_934
    assert distinct["103959"] == 1_932


def test_philly_hand_checked_slice(philly) -> None:
    by_name = philly.set_index("name")
    first = by_name.loc["7f04ca#31567"]  # 2017-09-04 10:30:41, 2240194 s on 8 GPUs: the trace's first arrival
    assert (first.submit_time, first.duration, first.gpus, first.measured_gpus) == (0.0, 2_240_194.0, 8, 8)
    row1 = by_name.loc["11cb48#1"]  # 2017-10-09 07:01:55: 35 days less 3 h 28 min 46 s after the first
    assert row1.submit_time == 35 * 86_400 - (3 * 3600 + 28 * 60 + 46) and row1.duration == 66.0 and row1.gpus == 1
    spec = validate_trace(philly, "p").specs[int(np.flatnonzero(philly["name"] == "11cb48#1")[0])]
    assert spec.measured == Measured(66.0, 1, None) and spec.gpus == 1 and spec.iterations == 66


def test_philly_vc_window_and_sample() -> None:
    vc = read_trace(PHILLY, "philly", vc="103959")
    assert len(vc) == 1_932 and steps(vc)["jobs of virtual clusters"] == 82_182 - 1_932
    days = read_trace(PHILLY, "philly", vc=["103959", "ee9e8c"], start=30 * 86_400, end=40 * 86_400)
    t = days["submit_time"].to_numpy()
    assert ((t >= 30 * 86_400) & (t < 40 * 86_400)).all() and set(days["vc"]) <= {"103959", "ee9e8c"}
    assert_no_silent_drop(days)
    a, b = (read_trace(PHILLY, "philly", vc="103959", sample=100, seed=s) for s in (1, 1))
    c = read_trace(PHILLY, "philly", vc="103959", sample=100, seed=2)
    assert len(a) == 100 and list(a["name"]) == list(b["name"]) != list(c["name"])
    assert set(a["name"]) <= set(vc["name"]) and list(a["submit_time"]) == sorted(a["submit_time"])
    elastic = read_trace(PHILLY, "philly", vc="103959", elastic=True)
    assert elastic["gpus"].isna().all() and list(elastic["measured_gpus"]) == list(vc["measured_gpus"])
    with pytest.raises(CapsimError, match="no virtual cluster '103995'; did you mean '103959'"):
        read_trace(PHILLY, "philly", vc="103995")
    with pytest.raises(CapsimError, match="failed: drop needs a status"):
        read_trace(PHILLY, "philly", failed="drop")


def test_philly_elasticflow_layout() -> None:
    t = read_trace(PHILLY_EF, "philly")
    assert len(t) == 876 and report(t).steps == ()
    first = t.iloc[0]  # 0,0,1282877,vgg16,771220,256,1,976570,976570,1282877
    assert (first.application, first.batch_size, first.iterations, first.deadline, first.duration, first.gpus) == \
        ("vgg16", 256, 1_282_877, 771_220.0, 976_570.0, 1)


def test_philly_raw_layout(tmp_path: Path) -> None:
    f = tmp_path / "philly_jobs_raw.csv"
    f.write_text("jobid,vc,user,status,submitted_time,start_time,end_time,num_gpus,attempts\n"
                 "a,vc1,u,Pass,2017-10-01 00:00:00,2017-10-01 00:01:00,2017-10-01 01:01:00,4,1\n"
                 "b,vc1,u,Killed,2017-10-01 00:00:30,2017-10-01 00:02:00,2017-10-01 00:12:00,1,2\n"
                 "c,vc2,u,Failed,2017-10-01 00:01:00,,,,0\n"
                 "d,vc2,u,Pass,2017-10-01 00:02:00,2017-10-01 00:03:00,,2,1\n"
                 "e,vc2,u,Failed,2017-10-01 00:03:00,2017-10-01 00:04:00,2017-10-01 00:05:00,8,3\n")
    t = read_trace(f, "philly")
    assert list(t["name"]) == ["a", "b", "e"] and list(t["duration"]) == [3600.0, 600.0, 60.0]
    assert list(t["submit_time"]) == [0.0, 30.0, 180.0]
    assert steps(t) == {"jobs that never started": 1, "jobs still running when": 1}
    passed = read_trace(f, "philly", failed="drop")
    assert list(passed["name"]) == ["a"] and steps(passed)["jobs that were killed"] == 2


def test_philly_hardware_holds_each_vcs_peak() -> None:
    reader = TRACE_FORMATS.build("philly", vc="ee9e8c")
    table = reader.read(PHILLY)
    servers = {s.gpu: s for s in reader.hardware(PHILLY)}
    big = servers["philly-24GB"]
    assert big.gpus == 8 and big.count * 8 >= table["gpus"].max() == 128
    gpus = sum(s.gpus * s.count for s in servers.values())
    assert gpus >= 128 and gpus < 2 * 1_511 * 128  # bounded by the VC's jobs, no more than one server per job


# ----- Alibaba PAI v2023 -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pai():
    return read_trace(PAI, "alibaba_pai_2023")


def test_pai_counts_and_report(pai) -> None:
    rows = _rows(PAI)
    gpu = [r for r in rows if int(r["num_gpu"]) > 0]
    pending = [r for r in gpu if r["pod_phase"] == "Pending"]
    assert (len(rows), len(gpu)) == (8_152, 7_064)
    assert all(r["scheduled_time"] == "" for r in pending)
    s = steps(pai)
    assert s["pods asking for no"] == 1_088 and s["pods never scheduled (Pending)"] == len(pending)
    assert len(pai) == 7_064 - len(pending) and report(pai).kept == len(pai)
    assert s["pods still Running at"] == sum(r["pod_phase"] == "Running" for r in gpu)
    assert_no_silent_drop(pai)
    shares = pai["gpu_share"].dropna()
    assert len(shares) == s["pods asking for a"] and shares.between(0.05, 0.999).all()


def test_pai_hand_checked_slice(pai) -> None:
    pod = pai.set_index("name").loc["openb-pod-0001"]  # 6000,12288,1,460,,LS,Running,427061,12902960,427061
    assert (pod.submit_time, pod.duration, pod.gpus, pod.gpu_share) == (427_061.0, 12_902_960.0 - 427_061.0, 1, 0.46)
    rows = validate_trace(pai, "pai")
    spec = rows.specs[int(np.flatnonzero(pai["name"] == "openb-pod-0001")[0])]
    assert spec.gpu_share == 0.46 and spec.gpus == 1 and spec.gpu_models is None


def test_pai_failed_and_gpu_models() -> None:
    kept = read_trace(PAI, "alibaba_pai_2023", failed="drop")
    assert (kept["phase"] != "Failed").all() and steps(kept)["pods that failed (phase"] > 0
    spec = read_trace(PAI_SPEC, "alibaba_pai_2023")
    rows = validate_trace(spec, "spec")
    constrained = [s for s in rows.specs if s.gpu_models is not None]
    raw = {r["name"]: r["gpu_spec"] for r in _rows(PAI_SPEC)}
    assert 0 < len(constrained) <= sum(1 for v in raw.values() if v)
    for s in constrained[:50]:
        assert s.gpu_models == frozenset(raw[s.name].split("|"))


def test_pai_hardware_is_the_node_list() -> None:
    servers = TRACE_FORMATS.build("alibaba_pai_2023").hardware(PAI)
    assert sum(s.count for s in servers) == 1_213 and sum(s.count * s.gpus for s in servers) == 6_212
    assert Servers("G2", 8, 549) in servers
    every = TRACE_FORMATS.build("alibaba_pai_2023", nodes="openb_node_list_all_node.csv.gz").hardware(PAI)
    assert sorted(every) == sorted(servers), "the CPU-only nodes hold no GPU"


def test_pai_multigpu_variant_cannot_be_replayed(tmp_path: Path) -> None:
    f = tmp_path / "openb_pod_list_multigpu20.csv"
    f.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-0000,12000,16384,1,1000\n")
    with pytest.raises(CapsimError, match="no times.*multigpu"):
        read_trace(f, "alibaba_pai_2023")


# ----- Acme ---------------------------------------------------------------------------------------------------------


def test_kalos_converted_counts_and_slice() -> None:
    t = read_trace(KALOS, "acme")
    assert len(t) == 319 and report(t).steps == ()
    with gzip.open(KALOS, "rt") as f:
        rows = list(csv.DictReader(f))
    gpus = Counter(int(float(r["gpu_workers"]) * float(r["gpu_per_worker"])) for r in rows)
    assert Counter(t["gpus"]) == gpus and gpus[1024] == 38 and gpus[512] == 73
    first = t.iloc[0]  # 0,0.0,208,0.5,0.25,8,0,8.0,... : 64 GPUs, 104 s, not Pretrain
    assert (first.submit_time, first.duration, first.gpus, first.type) == (0.0, 104.0, 64, "Other")
    pretrain = read_trace(KALOS, "acme", type="Pretrain")
    assert len(pretrain) == 183 and steps(pretrain)["jobs of a type"] == 136


def test_acme_raw_log(tmp_path: Path) -> None:
    cls = TRACE_FORMATS.kinds()["acme"]
    f = tmp_path / "trace_kalos.csv"
    f.write_text(cls.example)
    t = read_trace(f, "acme")
    assert list(t["name"]) == ["dlc1", "dlc2", "dlc4"] and list(t["gpus"]) == [16, 1, 8]
    assert list(t["submit_time"]) == [0.0, 98.0, 398.0]  # 00:18:22, 00:20:00, 00:25:00 (+08:00)
    done = read_trace(f, "acme", failed="drop")
    assert list(done["name"]) == ["dlc1"] and steps(done)["jobs that did not"] == 2


# ----- schema-only formats, on files written from their documented columns -----------------------------------------


def test_helios_log_and_capacity(tmp_path: Path) -> None:
    cls = TRACE_FORMATS.kinds()["helios"]
    log = tmp_path / "cluster_log.csv"
    log.write_text(cls.example)
    t = read_trace(log, "helios")
    assert list(t["name"]) == ["10", "12", "14"] and list(t["duration"]) == [7200.0, 60.0, 10800.0]
    assert steps(t) == {"jobs asking for no": 1, "jobs that never started": 1}
    assert list(read_trace(log, "helios", vc="vcEwI")["name"]) == ["12", "14"]
    (tmp_path / "cluster_gpu_number.csv").write_text("date,vcEwI,vc6YE,total\n2020-04-01,16,8,24\n"
                                                     "2020-04-02,24,8,32\n")
    assert TRACE_FORMATS.build("helios").hardware(log) == (Servers("helios", 8, 4),)
    assert TRACE_FORMATS.build("helios", vc="vc6YE").hardware(log) == (Servers("helios", 8, 1),)


def _pai2020(tmp_path: Path, header: bool) -> Path:
    cls = TRACE_FORMATS.kinds()["alibaba_pai_2020"]
    jobs, tasks = cls.example, cls.example_tasks
    jobs += "j4,i4,u3,Waiting,1600,\nj5,i5,u3,Terminated,1700,1800\nj6,i6,u3,Running,1800,\n"
    tasks += "j4,worker,1,Waiting,,,600,29,100,T4\nj5,ps,2,Terminated,1701,1799,600,29,0,\n"
    tasks += "j6,worker,1,Running,1810,,600,29,100,P100\n"
    if not header:
        jobs, tasks = (t.split("\n", 1)[1] for t in (jobs, tasks))
    (tmp_path / "pai_task_table.csv").write_text(tasks)
    path = tmp_path / "pai_job_table.csv"
    path.write_text(jobs)
    return path


@pytest.mark.parametrize("header", [True, False])
def test_alibaba_2020_jobs_from_tasks(tmp_path: Path, header: bool) -> None:
    t = read_trace(_pai2020(tmp_path, header), "alibaba_pai_2020")
    assert list(t["name"]) == ["j1", "j2", "j3"]
    assert list(t["duration"]) == [4990 - 1010, 1890 - 1210, 8990 - 1510]  # first task start to last task end
    assert list(t["gpus"]) == [1, 2, 4] and list(t["measured_gpu"]) == ["T4", "V100", "V100M32"]
    assert t["gpu_share"].iloc[0] == 0.5 and t["gpu_share"].iloc[1:].isna().all()
    assert list(t["submit_time"]) == [0.0, 200.0, 500.0]
    assert steps(t) == {"jobs asking for no": 1, "jobs never started (Waiting)": 1, "jobs still Running at": 1,
                        "jobs asking for a": 1}
    assert_no_silent_drop(t)
    spec = validate_trace(t, "pai2020").specs[2]
    assert spec.measured == Measured(7480.0, 4, "V100M32")
    ok = read_trace(_pai2020(tmp_path, header), "alibaba_pai_2020", failed="drop")
    assert list(ok["name"]) == ["j1", "j3"]


def test_alibaba_2020_machine_table_in_its_archive(tmp_path: Path) -> None:
    path = _pai2020(tmp_path, header=False)
    spec = tmp_path / "pai_machine_spec.csv"
    spec.write_text("m1,CPU,96,512,0\nm2,T4,96,512,2\nm3,T4,96,512,2\nm4,V100M32,96,512,8\n")
    with tarfile.open(tmp_path / "pai_machine_spec.tar.gz", "w:gz") as tar:
        tar.add(spec, arcname="pai_machine_spec.csv")
    spec.unlink()
    assert TRACE_FORMATS.build("alibaba_pai_2020").hardware(path) == (Servers("T4", 2, 2), Servers("V100M32", 8, 1))


def test_alibaba_spot_2026(tmp_path: Path) -> None:
    cls = TRACE_FORMATS.kinds()["alibaba_spot_2026"]
    f = tmp_path / "job_info_df.csv"
    f.write_text(cls.example + "job-d,org1,A10,8,0,1,200,60,HP\njob-e,org3,A10,4,0.5,1,300,60,Spot\n")
    t = read_trace(f, "alibaba_spot_2026")
    assert list(t["name"]) == ["job-a", "job-c", "job-b", "job-e"] and list(t["gpus"]) == [1, 16, 4, 1]
    assert t["gpu_share"].iloc[3] == 0.5 and steps(t)["jobs asking for no"] == 1
    assert list(read_trace(f, "alibaba_spot_2026", job_type="HP")["name"]) == ["job-a"]
    (tmp_path / "node_info_df.csv").write_text("gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,1,128,0\n"
                                               "H800,8,192,1\nA10,1,128,2\n")
    assert TRACE_FORMATS.build("alibaba_spot_2026").hardware(f) == (Servers("A10", 1, 2), Servers("H800", 8, 1))


# ----- shared options and checks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ({"start": -1}, "start must be a number of seconds >= 0"),
    ({"start": 10, "end": 5}, "the window must have start < end"),
    ({"sample": 0}, "sample must be a whole number of jobs >= 1"),
    ({"seed": -2}, "seed must be a whole number >= 0"),
    ({"failed": "skip"}, "failed must be 'keep' or 'drop'"),
    ({"elastic": "yes"}, "elastic must be true or false"),
    ({"vc": 5}, "vc must be a virtual cluster's name"),
])
def test_bad_options_name_the_format_and_option(options, message) -> None:
    with pytest.raises(CapsimError, match=f"trace format 'philly': {message}"):
        TRACE_FORMATS.build("philly", **options)


def test_a_window_without_jobs_is_an_error() -> None:
    with pytest.raises(CapsimError, match="no job left to replay.*window"):
        read_trace(KALOS, "acme", start=1e9)


def test_a_sample_larger_than_the_trace_keeps_it_all_and_says_so() -> None:
    t = read_trace(KALOS, "acme", sample=1_000)
    assert len(t) == 319 and report(t).steps[-1].action == "all kept"
