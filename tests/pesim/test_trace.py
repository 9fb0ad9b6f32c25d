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


def test_untraced_result_says_how_to_trace(tmp_path: Path) -> None:
    r = dtg.simulate(dtg.compile(EXAMPLES / "gemv" / "gemv.lair"))
    with pytest.raises(dtg.DtgError, match=r"simulate\(..., trace=True\)"):
        r.write_trace(tmp_path / "t.json")
