"""The cost model's predictions against the simulator (issue 11, item 3).

For every input stream of every example and PolyBench kernel, the compile report
predicts the cycles of the stream's data task on the busiest PE for each way of taking
the stream (one task per wavelet, batches of each size). The way the compiler chose
must come within 10% of what pesim measures for that task (the most over the PEs), in
the default mode and in the paper's per-wavelet mode. Inputs have no zeros: a sparse
stream's prediction counts every element (the choice weighs an assumed density).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLE_PROGRAMS, EXAMPLES

from dtg.codegen import emit
from dtg.codegen.driver import compile_file
from dtg.pesim.run import make_inputs, run_module

TOLERANCE = 0.10
Case = tuple[Path, Path | None, dict[str, int]]
CASES: list[Case] = [(p, None, {}) for p in EXAMPLE_PROGRAMS if p.parent.name != "handwritten"]
for _large in sorted(EXAMPLES.glob("polybench/*.large.map")):  # at the size each is for
    CASES.append((_large.with_name(_large.name.replace(".large.map", ".lair")), _large,
                  {k: int(v) for k, v in re.findall(r"--param (\w+)=(\d+)",
                                                    _large.read_text())}))


def _name(case: Case) -> str:
    return case[0].stem + ("-large" if case[1] is not None else "")


@pytest.mark.parametrize("arrival", ["batched", "per-wavelet"])
@pytest.mark.parametrize("case", CASES, ids=_name)
def test_chosen_way_is_predicted_within_ten_percent(case: Case, arrival: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # (a stream's own work: the end work that may follow in its task is not predicted)
    monkeypatch.setattr(emit, "FUSE_END_WORK", False)
    path, mapping, params = case
    c = compile_file(path, None if mapping is None else str(mapping), params, arrival=arrival)
    assert c.module is not None and c.arrivals is not None
    inputs = {name: np.where(a == 0, 1, a) for name, a in make_inputs(c.program).items()}
    run = run_module(c.module, c.program, inputs)
    assert run.comparison.verified
    chosen = {b.flow: b.way for b in c.arrivals.batches}
    for flow, candidates in c.arrivals.candidates:
        (way,) = [k for k in candidates
                  if k.way == chosen.get(flow, (None, None)) and k.busy is not None]
        measured = max(pe.tasks.get(f"on_{flow}", (0, 0))[1] for pe in run.result.pes.values())
        assert measured > 0, f"no data task ran for {flow}"
        assert abs(way.busy - measured) <= TOLERANCE * measured, (
            f"{flow}: predicted {way.busy} cycles ({way.note}), simulated {measured}")
