"""Traces on the compiled engine: the same Perfetto document as the simpy engine's,
slice for slice and hop for hop, for whole runs, runs that end in an error (the trace
up to it, with the waits it ended in) and runs whose one event records more than the
records hold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dtg
from dtg.errors import DtgError, SimulationError
from dtg.pe.fabric import FabricConfig
from dtg.pe.parser import parse_module_text
from dtg.pesim import sim
from dtg.pesim.fast import engine
from dtg.pesim.sim import SimResult, TensorInfo
from dtg.pesim.trace import Window
from dtg.pesim.verify import verify_module

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def document(result: SimResult | dtg.Result) -> dict[str, Any]:
    assert result.trace is not None
    return result.trace.document("m", result.cycles)


@pytest.mark.parametrize("program", ["gemv/gemv.lair", "conv2d/conv2d.lair",
                                     "fc/train.lair"])
@pytest.mark.parametrize("simd", [True, False])
def test_both_engines_write_the_same_trace(program: str, simd: bool) -> None:
    c = dtg.compile(EXAMPLES / program, simd=simd)
    simpy = dtg.simulate(c, engine="simpy", trace=True)
    fast = dtg.simulate(c, engine="fast", trace=True)
    assert fast.report()["engine"] == "fast" and fast.report()["engine_note"] is None
    assert document(fast) == document(simpy)
    kinds = {e.get("cat") for e in document(fast)["traceEvents"]}
    assert {"task", "simd"} <= kinds if simd else "task" in kinds


def test_a_trace_changes_no_figure() -> None:
    c = dtg.compile(EXAMPLES / "gemv" / "gemv.lair")
    plain, traced = dtg.simulate(c, engine="fast"), dtg.simulate(c, engine="fast", trace=True)
    assert plain.trace is None
    for key in ("cycles", "pes", "links", "totals", "verified"):
        assert plain.report()[key] == traced.report()[key]


STALLS = """
module stalls
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[64] store y { y[i] : PE_X = 1 and 0 <= i <= 63 };
  route 1: RAMP -> E if (PE_X == 0);
  route 1: W -> RAMP if (PE_X == 1);
  task main {
    if (PE_X == 0) {
      for (i = 0; i <= 63; i++) { send(1, 1.0); }
    } else {
      for (i = 0; i <= 63; i++) { a[i] = recv(1); a[i] += 1.0; a[i] += 1.0; }
    }
  }
}
"""


def both(text: str, outputs: dict[str, tuple[tuple[int, ...], str]], **settings: Any
         ) -> tuple[Any, Any]:
    """Each engine's traced run, or the error it ended in."""
    config = FabricConfig(**settings)
    module, locations = parse_module_text(text, "<test>")
    verify_module(module, config, locations=locations)
    specs = {k: TensorInfo(shape, dtype) for k, (shape, dtype) in outputs.items()}
    ran = []
    for simulate in (sim.simulate, engine.simulate):
        try:
            ran.append(simulate(module, {}, specs, config=config, trace=True))
        except SimulationError as err:
            ran.append(err)
    return ran[0], ran[1]


def test_stalls_and_waits_are_the_same_slices() -> None:
    simpy, fast = both(STALLS, {"y": ((64,), "float32")})
    cats = [e.get("cat") for e in document(simpy)["traceEvents"]]
    assert "stall" in cats and "wait" in cats
    assert document(fast) == document(simpy)
    assert np.array_equal(fast.outputs["y"], simpy.outputs["y"])


def one_pe(body: str, decls: str = "", tasks: str = "") -> str:
    return f"""
module t
mesh PE[1, 1]
program p origin PE[0, 0] pes {{ PE[0, 0] }}
{{
  array float32 a[8] store y;
  {decls}
  task main {{
    {body}
  }}
  {tasks}
}}
"""


@pytest.mark.parametrize(("body", "decls", "settings"), [
    ("a[0] = recv(3);", "route 3: W -> RAMP;", {}),  # a deadlock
    ("for (i = 0; i <= 1000000000; i++) { a[0] += 1.0; }", "", {"cycle_limit": 2_000}),
    ("for (i = 0; i <= 8; i++) { a[i] = 1.0; }", "", {}),  # out of bounds
])
def test_a_failed_run_keeps_the_same_trace_up_to_its_error(
        body: str, decls: str, settings: dict[str, int]) -> None:
    simpy, fast = both(one_pe(body, decls), {"y": ((8,), "float32")}, **settings)
    assert isinstance(simpy, SimulationError) and type(fast) is type(simpy)
    assert str(fast) == str(simpy)
    (want, at), (got, cycle) = simpy.partial_trace, fast.partial_trace  # type: ignore[attr-defined]
    assert cycle == at
    assert got.document("m", at) == want.document("m", at)
    unfinished = [e for e in got.events("m") if "(unfinished)" in e["name"]]
    assert bool(unfinished) == ("deadlock" in str(simpy))


@pytest.mark.long
@pytest.mark.parametrize("program", sorted(
    str(p.relative_to(EXAMPLES)) for p in [*EXAMPLES.glob("*/*.lair"),
                                           *(EXAMPLES / "polybench").glob("*.lair")]
    if p.with_suffix(".map").exists()))
def test_every_example_traces_the_same_on_both_engines(program: str) -> None:
    for simd in (True, False):
        c = dtg.compile(EXAMPLES / program, simd=simd)
        assert document(dtg.simulate(c, engine="fast", trace=True)) == document(
            dtg.simulate(c, engine="simpy", trace=True))


def test_an_event_with_more_records_than_room_runs_again_with_more(
        monkeypatch: pytest.MonkeyPatch) -> None:
    text = one_pe("run fill {a: 0} (2.0); " * 6, "simd fill [8]: a[i0] = scalar;")
    want, _ = both(text, {"y": ((8,), "float32")})
    taken: list[int] = []
    real = engine._simulate

    def counting(*args: Any) -> SimResult:
        taken.append(args[-1].records)
        return real(*args)

    monkeypatch.setattr(engine, "RECORDS", 4)
    monkeypatch.setattr(engine, "_simulate", counting)
    _, got = both(text, {"y": ((8,), "float32")})
    assert document(got) == document(want)
    assert len([e for e in document(got)["traceEvents"] if e.get("cat") == "simd"]) == 6
    assert taken == [4, 4 * 7]  # (six SIMD slices and the main task's in one event)


@pytest.mark.parametrize("bounds", [{"cycles": (10, 5)}, {"x": (-1, 4)}, {"y": (3, 3)}])
def test_a_window_that_keeps_nothing_is_refused(bounds: dict[str, tuple[int, int]]) -> None:
    with pytest.raises(DtgError, match="trace window"):
        Window(**bounds)


LENGTHS = """
module t
mesh PE[1, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[8] store y;
  array float32 w[8] init 2.0;
  simd add [6]: a[i0] = a[i0] + w[i0];
  simd row [2, 3]: a[3*i0 + i1] += w[i1] * scalar;
  simd lead [1, 1, 4]: a[i2] += w[i2] * scalar;
  task main {
    for (n = 1; n <= 6; n++) {
      run add length(n) {a: 0, w: 0};
    }
    run row length(1) {a: 2, w: 0} (1.0);
    run lead length(2) {a: 6, w: 0} (3.0);
    LAST
  }
}
"""


@pytest.mark.parametrize("last", ["", "run add length(7) {a: 0, w: 0};",
                                  "run add length(0) {a: 0, w: 0};",
                                  "run add length(4) {a: 5, w: 0};",
                                  "run lead length(5) {a: 0, w: 0} (1.0);",
                                  "run lead length(3) {a: 6, w: 0} (1.0);"])
def test_a_run_time_length_runs_the_same_on_both_engines(last: str) -> None:
    """``run ... length(n)``: the first ``n`` values of the outermost dimension larger
    than 1 (``lead [1, 1, 4]`` cuts its last), the same elements, cycles, trace and
    errors on both engines."""
    simpy, fast = both(LENGTHS.replace("LAST", last), {"y": ((8,), "float32")})
    if not last:
        assert not isinstance(simpy, Exception)
        # a[k] gets 2 for each n > k (k < 6), then a[2..4] += 2 * 1
        expected = [12, 10, 8, 6, 4, 2, 0, 0]
        expected[2:5] = [v + 2 for v in expected[2:5]]
        expected[6:8] = [v + 6 for v in expected[6:8]]  # lead: a[6..7] += 2 * 3
        assert simpy.outputs["y"].tolist() == expected
        assert document(fast) == document(simpy)
        assert fast.cycles == simpy.cycles
        return
    assert isinstance(simpy, SimulationError) and type(fast) is type(simpy)
    assert str(fast) == str(simpy)
    assert (("takes a length from 1 to 6" in str(simpy) or "takes a length from 1 to 4" in
             str(simpy)) != ("outside the array" in str(simpy)))
