"""``capsim plot``: every figure at both printed widths, as a picture a paper could print.

Each figure is drawn at column and page width and checked as drawn: exactly the printed width, every axes with data
and labelled axes, one font size, no two texts overlapping and none outside the figure; PDFs embed TrueType fonts.
Policy looks stay fixed; the timeline's GPU rows never hold two jobs at once.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from experiments.cli import main
from experiments.plots import (
    FIGURES,
    ON_REQUEST,
    WIDTHS,
    PlotData,
    gpu_blocks,
    pareto_front,
    policy_styles,
    render,
    specs,
)
from experiments.plots.style import FONT_SIZE, KINDS, set_scale
from experiments.results.reading import read_results

from .conftest import small_scenario, write_yaml


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    """Two grid fields (so grid points group), three policies (one that shares VMs, one that builds a model)."""
    d = tmp_path_factory.mktemp("plots")
    base = small_scenario()
    sweep = {"scenario": {k: v for k, v in base.items() if k not in ("policies", "seeds")},
             "policies": [{"kind": "fifo"}, {"kind": "greedy"}, {"kind": "milp", "time_limit": 2}], "seeds": [0, 1],
             "grid": {"workload.mean_interarrival": [30, 90], "cluster.nodes": [1, 2]}}
    f = write_yaml(d / "s.yaml", sweep)
    assert main(["sweep", str(f), "--out", str(d / "out"), "--workers", "1", "--quiet"]) == 0
    return d / "out"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A `capsim run` folder: no grid, five policies side by side."""
    d = tmp_path_factory.mktemp("plots-run")
    policies = [{"kind": k} for k in ("fifo", "edf", "priority", "greedy")] + [{"kind": "milp", "time_limit": 2}]
    f = write_yaml(d / "s.yaml", small_scenario(policies=policies))
    assert main(["run", str(f), "--out", str(d / "out"), "--workers", "1", "--quiet"]) == 0
    return d / "out"


@pytest.fixture(scope="module")
def data(sweep_dir: Path) -> PlotData:
    res = read_results(sweep_dir)
    return PlotData(res.tables, res.fields, res.policies)


@pytest.fixture(scope="module")
def run_data(run_dir: Path) -> PlotData:
    res = read_results(run_dir)
    return PlotData(res.tables, res.fields, res.policies, "bootstrap")


def _visible_texts(fig) -> list:
    """Every text drawn: tick labels inside the view, axis labels, titles, texts in axes, legends, figure labels."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(lim)
            for tick in axis.get_major_ticks():
                if lo - 1e-9 <= tick.get_loc() <= hi + 1e-9 and tick.label1.get_visible() and tick.label1.get_text():
                    out.append(tick.label1)
        out += [t for t in (ax.xaxis.label, ax.yaxis.label, ax.title) if t.get_text()]
        out += [t for t in ax.texts if t.get_visible() and t.get_text()]
        if ax.get_legend():
            out += list(ax.get_legend().get_texts()) + [ax.get_legend().get_title()]
    for leg in fig.legends:
        out += list(leg.get_texts()) + [leg.get_title()]
    out += [t for t in (getattr(fig, "_supxlabel", None), getattr(fig, "_supylabel", None)) if t is not None]
    return [t for t in out if t.get_text()]


def _labelled(fig) -> None:
    """Every axes has an x and a y label: its own, the panel's below/left of it in the grid, or the figure's."""
    axes = [a for a in fig.axes if a.get_visible()]
    sup_x = getattr(fig, "_supxlabel", None)
    for ax in axes:
        ss = ax.get_subplotspec()
        col = [a for a in axes if a.get_subplotspec().colspan == ss.colspan]
        row = [a for a in axes if a.get_subplotspec().rowspan == ss.rowspan]
        assert ax.get_xlabel() or any(a.get_xlabel() for a in col) or (sup_x and sup_x.get_text()), ax
        assert ax.get_ylabel() or any(a.get_ylabel() for a in row), ax


def _corners(t, renderer) -> np.ndarray:
    """The four corners of a (possibly rotated) text's box in pixels: its axis-aligned extent and its unrotated size
    fix where the rotated rectangle touches each side."""
    b = t.get_window_extent(renderer)
    theta = np.deg2rad(t.get_rotation() % 180)
    if theta == 0:
        return np.array([[b.x0, b.y0], [b.x1, b.y0], [b.x1, b.y1], [b.x0, b.y1]])
    rot = t.get_rotation()
    t.set_rotation(0)
    flat = t.get_window_extent(renderer)
    t.set_rotation(rot)
    w, h = flat.width, flat.height
    s = abs(np.sin(theta))
    if theta < np.pi / 2:
        return np.array([[b.x0 + h * s, b.y0], [b.x1, b.y0 + w * s], [b.x1 - h * s, b.y1], [b.x0, b.y1 - w * s]])
    return np.array([[b.x1 - h * s, b.y0], [b.x1, b.y1 - w * s], [b.x0 + h * s, b.y1], [b.x0, b.y0 + w * s]])


def _overlap(a: np.ndarray, b: np.ndarray, slack: float = 0.5) -> bool:
    """Whether two convex quadrilaterals overlap by more than ``slack`` pixels (separating axis test)."""
    for poly in (a, b):
        for i in range(4):
            edge = poly[(i + 1) % 4] - poly[i]
            normal = np.array([-edge[1], edge[0]]) / (np.hypot(*edge) or 1.0)
            pa, pb = a @ normal, b @ normal
            if pa.max() <= pb.min() + slack or pb.max() <= pa.min() + slack:
                return False
    return True


def check_printable(fig, width: str) -> None:
    assert tuple(fig.get_size_inches()) == pytest.approx((WIDTHS[width], fig.get_size_inches()[1]))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    axes = [a for a in fig.axes if a.get_visible()]
    assert axes
    for ax in axes:
        drawn = len(ax.lines) + len(ax.collections) + len(ax.patches) + len(ax.containers)
        assert drawn > 0, f"empty axes {ax.get_title()!r}"
    _labelled(fig)
    texts = _visible_texts(fig)
    box = fig.bbox
    boxes = []
    for t in texts:
        assert t.get_fontsize() == FONT_SIZE[width], (t.get_text(), t.get_fontsize())
        b = t.get_window_extent(renderer)
        assert b.x0 >= box.x0 - 1 and b.x1 <= box.x1 + 1 and b.y0 >= box.y0 - 1 and b.y1 <= box.y1 + 1, \
            f"{t.get_text()!r} leaves the figure"
        boxes.append((t.get_text(), _corners(t, renderer)))
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        assert not _overlap(a, b, slack=1.0), f"texts overlap: {ta!r} and {tb!r}"


NAMES = [n for n in FIGURES] + list(ON_REQUEST) + ["metric"]


@pytest.mark.parametrize("width", ["column", "page"])
@pytest.mark.parametrize("name", NAMES)
def test_every_figure_prints_at_both_widths(data: PlotData, name: str, width: str) -> None:
    found = specs(name, data, width, metrics=["gpu_utilisation"])
    assert found, name
    for spec in found:
        check_printable(render(spec, width), width)


@pytest.mark.parametrize("width", ["column", "page"])
@pytest.mark.parametrize("name", NAMES)
def test_every_figure_of_a_run_without_grid_prints(run_data: PlotData, name: str, width: str) -> None:
    for spec in specs(name, run_data, width, metrics=["mean_wait"]):
        check_printable(render(spec, width), width)
    if name == "cost_breakdown":
        assert spec.panels[0].xlabel == "policy" and "bootstrap" in spec.legend_title


def test_cli_writes_png_and_pdf_at_the_printed_width(sweep_dir: Path, tmp_path: Path, capsys) -> None:
    """The files (every figure is drawn and checked at both widths above; here, that the command writes them)."""
    column = ["cost_breakdown", "cost_vs_mean_interarrival", "cost_vs_nodes", "timeline"]
    for width, only, names in (("column", "cost_breakdown,cost_vs,timeline", column), ("page", "pareto", ["pareto"])):
        out = tmp_path / width
        assert main(["plot", str(sweep_dir), "--out", str(out), "--width", width, "--dpi", "100", "--only", only]) == 0
        assert sorted(p.stem for p in out.glob("*.png")) == sorted(names)
        for name in names:
            img = mpimg.imread(out / f"{name}.png")
            assert img.shape[1] == round(WIDTHS[width] * 100), name
            pdf = (out / f"{name}.pdf").read_bytes()
            assert pdf.startswith(b"%PDF") and b"/FontFile2" in pdf and b"/Type3" not in pdf, name


def test_the_same_results_give_the_same_pdf(sweep_dir: Path, tmp_path: Path) -> None:
    for d in ("a", "b"):
        assert main(["plot", str(sweep_dir), "--out", str(tmp_path / d), "--only", "pareto,timeline"]) == 0
    for name in ("pareto.pdf", "timeline.pdf"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_timeline_of_a_chosen_run_and_bad_options(sweep_dir: Path, tmp_path: Path, capsys) -> None:
    run_id = pd.read_parquet(sweep_dir / "summary").run_id.iloc[-1]
    assert main(["plot", str(sweep_dir), "--out", str(tmp_path / "f"), "--run", run_id, "--only", "timeline"]) == 0
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["timeline.pdf", "timeline.png"]
    assert main(["plot", str(sweep_dir), "--run", "nope"]) == 2
    assert "no finished run" in capsys.readouterr().err
    assert main(["plot", str(sweep_dir), "--only", "pie"]) == 2
    assert "unknown figure 'pie'" in capsys.readouterr().err
    assert main(["plot", str(sweep_dir), "--dpi", "3"]) == 2
    assert "--dpi" in capsys.readouterr().err


def test_grid_values_match_as_one_grid_point() -> None:
    from experiments.results.labels import same_value

    assert same_value(None, float("nan")) and same_value(float("nan"), float("nan"))
    assert same_value(5, "5") and same_value(30.0, 30) and same_value('{"a": 1}', '{"a": 1}')
    assert not same_value(None, 0) and not same_value(float("nan"), "none") and not same_value(5, 6)


def test_titles_pack_their_parts_onto_as_few_lines_as_fit() -> None:
    from experiments.plots.layout import _fit_title
    from experiments.plots.style import text_width

    title = "insertion, seed 0, mean inter-arrival = 30 s, node slots = 5"
    room = text_width("insertion, seed 0, mean inter-arrival = 30 s,", "column") + 0.01
    assert _fit_title(title, room, "column") == "insertion, seed 0, mean inter-arrival = 30 s,\nnode slots = 5"
    assert _fit_title(title, 10.0, "column") == title
    narrow = _fit_title("spot VMs = revocation rate 0.1 per hour", 1.0, "column")
    assert all(text_width(line, "column") <= 1.0 for line in narrow.split("\n")) and narrow.count("\n") >= 1
    assert narrow.replace("\n", " ") == "spot VMs = revocation rate 0.1 per hour"


def test_axis_labels_come_from_the_declarations(data: PlotData) -> None:
    (breakdown,) = specs("cost_breakdown", data)
    assert [p.ylabel for p in breakdown.panels] == ["total cost ($)", "VM cost ($)", "tardiness cost ($)"]
    assert breakdown.panels[0].xlabel == "node slots"
    by_field = {s.name: s for s in specs("cost_vs", data)}
    assert by_field["cost_vs_mean_interarrival"].panels[0].xlabel == "mean inter-arrival (s)"
    assert [p.title for p in by_field["cost_vs_mean_interarrival"].panels] == ["node slots = 1", "node slots = 2"]
    (pareto,) = specs("pareto", data)
    assert len(pareto.panels) == 4 and pareto.panels[0].title == "mean inter-arrival = 30 s, node slots = 1"
    (trade,) = specs("cost_deadlines", data)
    assert len(trade.panels) == 4 and (trade.panels[0].xlabel, trade.panels[0].ylabel) == ("deadlines met",
                                                                                           "total cost ($)")


def test_error_bars_stay_in_the_metric_domain(data: PlotData) -> None:
    agg = data.agg(["tardiness_cost", "late_share", "gpu_utilisation"])
    assert (agg["tardiness_cost_lo"].dropna() >= 0).all()
    assert agg["late_share_lo"].dropna().between(0, 100).all() and agg["late_share_hi"].dropna().between(0, 100).all()
    assert (agg["gpu_utilisation_hi"].dropna() <= 1).all()


def test_policy_looks_are_fixed_per_kind_and_stable_for_new_policies() -> None:
    a = policy_styles(["edf", "milp", "mine"])
    b = policy_styles(["path_relinking", "milp", "fifo", "edf", "mine", "random_greedy"])
    assert a["edf"] == b["edf"] == KINDS["edf"] and a["milp"] == b["milp"] == KINDS["milp"]
    assert a["mine"] == b["mine"]  # a new name looks the same whatever else is drawn
    assert b["path_relinking"] == KINDS["path_relinking"] and b["random_greedy"] == KINDS["random_greedy"]
    many = policy_styles(list(KINDS) + [f"p{i}" for i in range(30)])
    assert len({(s.colour, s.marker) for s in many.values()}) == len(many)
    variants = policy_styles(["milp-5s", "milp-60s"], {"milp-5s": "milp", "milp-60s": "milp"})
    assert variants["milp-5s"] == KINDS["milp"]
    assert variants["milp-60s"].marker == KINDS["milp"].marker and variants["milp-60s"].colour != KINDS["milp"].colour


def test_pareto_front() -> None:
    pts = np.array([[1.0, 5.0], [2.0, 2.0], [3.0, 3.0], [4.0, 1.0], [2.5, 2.0]])
    assert list(pareto_front(pts)) == [0, 1, 3]


def test_log_scale_only_when_values_span_orders_of_magnitude() -> None:
    from matplotlib.figure import Figure

    ax = Figure().subplots()
    assert set_scale(ax, [3.0, 7.0, 28.0]) == "linear"
    assert set_scale(ax, [16.0, 577.0, 4216.0], bounds=[2.0, 9000.0]) == "log"
    assert ax.get_ylim()[0] > 0
    assert set_scale(ax, [0.0, 5.0, 900.0]) == "symlog"
    ax = Figure().subplots()  # an interval down to 0: on a log axis its bar would run off the bottom
    assert set_scale(ax, [16.0, 577.0, 4216.0], bounds=[0.0, 9000.0]) == "symlog"
    assert ax.get_ylim()[0] == 0


def test_timeline_of_a_folder_without_segments_uses_the_job_table(data: PlotData) -> None:
    """Folders written before segments were stored: one stretch per job, from its start to its end."""
    tables = dict(data.tables, segments=pd.DataFrame())
    old = PlotData(tables, data.fields, data.policies)
    (spec,) = specs("timeline", old)
    fig = render(spec, "column")
    check_printable(fig, "column")
    jobs = data.table("jobs")
    run = jobs[jobs["run_id"] == spec.panels[0].key["run_id"]]
    blocks = [p for p in fig.axes[0].patches if p.get_edgecolor()[:3] == (1.0, 1.0, 1.0)]
    assert sum(p.get_height() for p in blocks) == run["gpus"].sum()


def test_gpu_rows_hand_computed() -> None:
    vms = pd.DataFrame({"start_time": [0.0], "stop_time": [20.0], "gpus": [8]})
    segs = pd.DataFrame({"job_id": [1, 2, 3, 4], "gpus": [2, 4, 2, 2], "start_time": [0.0, 0.0, 0.0, 5.0],
                         "end_time": [5.0, 10.0, 10.0, 10.0]})
    blocks = {int(segs["job_id"].iat[i]): (a, n) for i, a, n in gpu_blocks(segs, vms)}
    # at 0: the 4-GPU job first, then jobs 1 and 3 by id; at 5 job 4 takes the rows job 1 left
    assert blocks == {2: (0, 4), 1: (4, 2), 3: (6, 2), 4: (4, 2)}
    # a 1-GPU VM replaced by a 2-GPU one: the stretch starting at the switch belongs to the new VM
    vms = pd.DataFrame({"start_time": [0.0, 10.0], "stop_time": [10.0, 20.0], "gpus": [1, 2]})
    segs = pd.DataFrame({"job_id": [1, 2], "gpus": [1, 2], "start_time": [0.0, 10.0], "end_time": [10.0, 15.0]})
    assert gpu_blocks(segs, vms) == [(0, 0, 1), (1, 0, 2)]


def test_gpu_rows_never_hold_two_jobs_at_once() -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        g = int(rng.integers(1, 9))
        rows = []
        for j in range(40):
            t0 = float(rng.integers(0, 50))
            t1 = t0 + float(rng.integers(1, 20))
            k = int(rng.integers(1, g + 1))
            in_use = sum(r["gpus"] for r in rows if r["start_time"] < t1 and t0 < r["end_time"])
            if in_use + k <= g:  # a valid schedule: never more GPUs in use than the VM has
                rows.append({"job_id": j, "gpus": k, "start_time": t0, "end_time": t1})
        segs = pd.DataFrame(rows)
        vms = pd.DataFrame({"start_time": [0.0], "stop_time": [100.0], "gpus": [g]})
        held: dict[int, list[tuple[float, float]]] = {}
        got = {i: 0 for i in range(len(segs))}
        for i, first, n in gpu_blocks(segs, vms):
            got[i] += n
            assert 0 <= first and first + n <= g
            for row in range(first, first + n):
                span = (segs["start_time"].iat[i], segs["end_time"].iat[i])
                assert all(span[1] <= a or b <= span[0] for a, b in held.get(row, [])), "two jobs on one GPU row"
                held.setdefault(row, []).append(span)
        assert got == dict(zip(range(len(segs)), segs["gpus"]))


def test_the_gallery_shows_every_figure_and_only_files_that_exist() -> None:
    from studies.gallery import CAPTIONS, SOURCES

    docs = Path(__file__).resolve().parents[2] / "docs"
    text = (docs / "gallery.md").read_text(encoding="utf-8")
    assert "python -m studies.gallery" in text
    linked = re.findall(r"!\[[^]]*\]\((img/[^)]+)\)", text)
    assert linked and all((docs / link).is_file() for link in linked)
    ours = {f"img/{p.name}" for p in (docs / "img").glob("*.png")
            if any(p.name.startswith(f"{s.name}_") for s in SOURCES)}
    assert ours == set(linked), "stale or unlinked gallery images"
    for src in SOURCES:
        shown = {link[len(f"img/{src.name}_"):-4] for link in linked if link.startswith(f"img/{src.name}_")}
        expected = {"cost_breakdown", "tardiness_late", "pareto", "cdf", "decision_time", "timeline"}
        assert expected <= shown and any(s.startswith("cost_vs_") for s in shown), src.name
        assert all(stem in CAPTIONS for stem in shown)
    for link in linked:
        assert mpimg.imread(docs / link).shape[1] <= 6.9 * 130 + 1


@pytest.mark.slow
def test_the_gallery_is_made_by_its_command(tmp_path: Path) -> None:
    from studies.gallery import SOURCES
    from studies.gallery import main as gallery

    assert gallery(["--results", str(tmp_path / "results"), "--docs", str(tmp_path / "docs"), "--workers", "2"]) == 0
    made = sorted(p.name for p in (tmp_path / "docs" / "img").iterdir())
    # docs/img also holds figures of other pages (the Gavel replay, the cloud sweep): the gallery's are named by sweep
    shipped = sorted(p.name for p in (Path(__file__).resolve().parents[2] / "docs" / "img").glob("*.png")
                     if p.name.startswith(tuple(f"{src.name}_" for src in SOURCES)))
    assert made == shipped and len(made) >= 14
