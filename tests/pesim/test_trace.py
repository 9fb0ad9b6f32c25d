"""Traces (Chrome/Perfetto JSON) and heatmaps: valid by the trace format's schema, and
true to the run they record."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from conftest import EXAMPLES

import dtg
from dtg.pesim.cli import main

# The parts of the Chrome trace event format (the JSON object form) that dtg writes and
# Perfetto reads: complete slices (X), counters (C) and metadata (M).
SCHEMA = {
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {"type": "array", "items": {"oneOf": [
            {"type": "object", "required": ["name", "ph", "ts", "dur", "pid", "tid"],
             "properties": {"ph": {"const": "X"}, "name": {"type": "string"},
                            "cat": {"type": "string"}, "ts": {"type": "number", "minimum": 0},
                            "dur": {"type": "number", "minimum": 0},
                            "pid": {"type": "integer"}, "tid": {"type": "integer"},
                            "args": {"type": "object"}}},
            {"type": "object", "required": ["name", "ph", "ts", "pid", "args"],
             "properties": {"ph": {"const": "C"}, "ts": {"type": "number", "minimum": 0},
                            "args": {"type": "object", "additionalProperties":
                                     {"type": "number"}}}},
            {"type": "object", "required": ["name", "ph", "pid", "args"],
             "properties": {"ph": {"const": "M"},
                            "name": {"enum": ["process_name", "thread_name",
                                              "thread_sort_index"]},
                            "args": {"type": "object"}}},
        ]}},
    },
}


@pytest.fixture(scope="module")
def traced() -> dtg.Result:
    return dtg.simulate(dtg.compile(EXAMPLES / "fc" / "ff.lair"), trace=True)


def test_the_trace_matches_the_schema(traced: dtg.Result, tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    traced.write_trace(path)
    jsonschema.validate(json.loads(path.read_text()), SCHEMA)


def test_slices_nest_on_every_track(traced: dtg.Result) -> None:
    assert traced.trace is not None
    events = [e for e in traced.trace.events("ff") if e["ph"] == "X"]
    open_: dict[int, list[tuple[int, int]]] = {}
    for e in events:  # written in start order, enclosing slices first
        stack = open_.setdefault(e["tid"], [])
        while stack and stack[-1][1] <= e["ts"]:
            stack.pop()
        if stack:
            assert e["ts"] + e["dur"] <= stack[-1][1], e
        stack.append((e["ts"], e["ts"] + e["dur"]))


def test_the_trace_records_every_task_run_and_every_hop(traced: dtg.Result) -> None:
    assert traced.trace is not None
    events = traced.trace.events("ff")
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    runs = Counter((names[e["tid"]], e["name"]) for e in events if e.get("cat") == "task")
    for (x, y), stats in traced.pes.items():
        for task, (count, _) in stats.tasks.items():
            assert runs[(f"PE[{x}, {y}]", task)] == count
    hops = sum(e["args"]["wavelets"] for e in events if e["ph"] == "C")
    assert hops == sum(traced.links.values())
    simd = sum(1 for e in events if e.get("cat") == "simd")
    assert simd == sum(s.simd_instructions for s in traced.pes.values())


def test_tracing_changes_no_figure() -> None:
    c = dtg.compile(EXAMPLES / "fc" / "train.lair")
    plain, traced = dtg.simulate(c), dtg.simulate(c, trace=True)
    assert plain.report()["pes"] == traced.report()["pes"]
    assert plain.cycles == traced.cycles and plain.trace is None


def test_cli_writes_trace_and_heatmap(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    trace, picture = tmp_path / "t.json", tmp_path / "h.png"
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", "--trace", trace, "--heatmap", picture,
                 "-q")
    assert result.status == 0, result.err
    jsonschema.validate(json.loads(trace.read_text()), SCHEMA)
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_a_window_keeps_the_slices_it_overlaps(tmp_path: Path, cli, engine: str  # type: ignore[no-untyped-def]
                                               ) -> None:
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    gemv = EXAMPLES / "gemv" / "gemv.lair"
    assert cli(main, gemv, "--trace", whole, "-q", "--engine", engine).status == 0
    result = cli(main, gemv, "--trace", part, "--trace-cycles", "20:60", "--trace-pes",
                 "0:2,1:", "-q", "--engine", engine)
    assert result.status == 0, result.err
    names = {}
    kept = []
    for event in json.loads(whole.read_text())["traceEvents"]:
        if event["name"] == "thread_name":
            names[event["tid"]] = event["args"]["name"]
        elif event["ph"] == "X":
            x, y = map(int, names[event["tid"]][3:-1].split(", "))
            if x < 2 and y >= 1 and event["ts"] < 60 and event["ts"] + max(event["dur"], 1) > 20:
                kept.append((names[event["tid"]], event["name"], event["ts"], event["dur"]))
    document = json.loads(part.read_text())
    names = {e["tid"]: e["args"]["name"] for e in document["traceEvents"]
             if e["name"] == "thread_name"}
    got = [(names[e["tid"]], e["name"], e["ts"], e["dur"]) for e in document["traceEvents"]
           if e["ph"] == "X"]
    assert kept and sorted(got) == sorted(kept)
    assert document["otherData"]["window"]["cycles"] == [20, 60]
    hops = [e["ts"] for e in document["traceEvents"] if e["ph"] == "C" and e["args"]["wavelets"]]
    assert hops and all(20 <= t < 60 for t in hops)


@pytest.mark.parametrize(("args", "message"), [
    (["--trace-cycles", "5:9"], "add --trace"),
    (["--trace", "T.json", "--trace-cycles", "9:5"], "expected FROM:TO"),
    (["--trace", "T.json", "--trace-pes", "0:4"], "expected X0:X1,Y0:Y1"),
])
def test_a_wrong_window_is_a_usage_error(tmp_path: Path, cli, args: list[str],  # type: ignore[no-untyped-def]
                                         message: str) -> None:
    args = [str(tmp_path / a) if a.endswith(".json") else a for a in args]
    result = cli(main, EXAMPLES / "gemv" / "gemv.lair", *args, "-q")
    assert result.status != 0 and message in result.err
    assert not (tmp_path / "T.json").exists()


def test_untraced_result_says_how_to_trace(tmp_path: Path) -> None:
    r = dtg.simulate(dtg.compile(EXAMPLES / "gemv" / "gemv.lair"))
    with pytest.raises(dtg.DtgError, match=r"simulate\(..., trace=True\)"):
        r.write_trace(tmp_path / "t.json")


def test_one_microsecond_is_one_cycle(traced: dtg.Result, tmp_path: Path) -> None:
    """Times are in the format's unit, microseconds, one per cycle; no displayTimeUnit
    (``"ns"`` made older Perfetto versions read them as nanoseconds)."""
    path = tmp_path / "t.json"
    traced.write_trace(path)
    document = json.loads(path.read_text())
    assert "displayTimeUnit" not in document
    assert document["otherData"]["time_unit"] == "1 us on the time axis is 1 cycle"
    ends = [e["ts"] + e["dur"] for e in document["traceEvents"] if e["ph"] == "X"]
    assert max(ends) <= traced.outcome.result.end
    assert document["otherData"]["cycles"] == traced.cycles


# ------------------------------------------------------------------------ heatmaps


def busy_gemv() -> dtg.Result:
    return dtg.simulate(dtg.compile(EXAMPLES / "gemv" / "gemv.lair"))


def test_external_pes_are_labelled_with_their_streams() -> None:
    from dtg.pesim.heatmap import stream_ends

    ends = stream_ends(busy_gemv().outcome.module)
    assert ends == {**{(x, -1): "x in" for x in range(4)}, **{(4, y): "y out" for y in range(4)}}


def link_colors(result: dtg.Result, links: dict) -> dict:  # type: ignore[type-arg]
    """The colour of every link segment on the picture, by link."""
    import dataclasses

    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    from dtg.pesim.heatmap import heatmap_figure

    run = dataclasses.replace(result.outcome.result, links=links)
    fig = heatmap_figure(run, result.outcome.module)
    try:
        drawn = next(c for c in fig.axes[0].collections if isinstance(c, LineCollection))
        drawn.update_scalarmappable()  # (colours are mapped when drawn)
        colors = drawn.get_colors()
        labels = {t.get_text() for t in fig.axes[0].texts}
        bars = [ax.get_ylabel() for ax in fig.axes[1:]]
    finally:
        plt.close(fig)
    order = sorted(links.items(), key=lambda item: item[1])
    return {"colors": {link: tuple(colors[k]) for k, (link, _) in enumerate(order)},
            "labels": labels, "bars": bars}


def test_a_hot_link_stands_out_with_a_scale() -> None:
    from matplotlib import colormaps

    from dtg.pesim.heatmap import LINK_COLORS

    r = busy_gemv()
    links = dict(r.links)
    hot = ((1, 1), (2, 1))
    links[hot] = 10 * max(links.values())
    drawn = link_colors(r, links)
    assert drawn["colors"][hot] == pytest.approx(colormaps[LINK_COLORS](1.0))
    others = [c for link, c in drawn["colors"].items() if link != hot]
    assert all(c[:3] != pytest.approx(drawn["colors"][hot][:3]) for c in others)
    assert "1" in drawn["labels"] and "2" not in drawn["labels"]  # only the hot one is numbered
    assert {"x in", "y out"} <= drawn["labels"]
    assert any("wavelets per link" in b for b in drawn["bars"])
    assert any("busy cycles" in b for b in drawn["bars"])


def test_equal_links_get_no_numbers() -> None:
    r = busy_gemv()
    drawn = link_colors(r, {link: 8 for link in r.links})
    assert not {"1", "2", "3"} & drawn["labels"]
    assert len(set(drawn["colors"].values())) == 1
