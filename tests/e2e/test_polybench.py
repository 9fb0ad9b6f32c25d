"""The PolyBench/C 4.2.1 corpus: each LAIR kernel computes what PolyBench computes
(checked against numpy), and compiles and simulates to exactly the reference results at
the MINI size and a larger one, with and without SIMD."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES
from run_pins import check_pinned

from dtg.lair.frontend import load_program
from dtg.lair.interp import random_inputs, run
from dtg.pesim.run import run_program

POLYBENCH = EXAMPLES / "polybench"
Arrays = dict[str, np.ndarray]


def _gemm(a: Arrays) -> Arrays:
    return {"D": a["alpha"] * a["A"] @ a["B"] + a["beta"] * a["C"]}


def _2mm(a: Arrays) -> Arrays:
    return {"G": a["alpha"] * a["A"] @ a["B"] @ a["C"] + a["beta"] * a["D"]}


def _3mm(a: Arrays) -> Arrays:
    return {"G": (a["A"] @ a["B"]) @ (a["C"] @ a["D"])}


def _atax(a: Arrays) -> Arrays:
    return {"y": a["A"].T @ (a["A"] @ a["x"])}


def _bicg(a: Arrays) -> Arrays:
    return {"s": a["A"].T @ a["r"], "q": a["A"] @ a["p"]}


def _mvt(a: Arrays) -> Arrays:
    return {"z1": a["x1"] + a["A"] @ a["y1"], "z2": a["x2"] + a["A"].T @ a["y2"]}


def _gemver(a: Arrays) -> Arrays:
    ah = a["A"] + np.outer(a["u1"], a["v1"]) + np.outer(a["u2"], a["v2"])
    x = a["x"] + a["beta"] * ah.T @ a["y"] + a["z"]
    return {"xn": x, "wo": a["w"] + a["alpha"] * ah @ x}


def _gesummv(a: Arrays) -> Arrays:
    return {"y": a["alpha"] * a["A"] @ a["x"] + a["beta"] * a["B"] @ a["x"]}


def _doitgen(a: Arrays) -> Arrays:
    return {"out": np.einsum("rqs,sp->rqp", a["A"], a["C4"])}


KERNELS: dict[str, tuple[Callable[[Arrays], Arrays], dict[str, int]]] = {
    "gemm": (_gemm, {"NI": 40, "NJ": 50, "NK": 60}),
    "2mm": (_2mm, {"NI": 32, "NJ": 36, "NK": 44, "NL": 48}),
    "3mm": (_3mm, {"NI": 32, "NJ": 36, "NK": 40, "NL": 44, "NM": 48}),
    "atax": (_atax, {"M": 76, "N": 84}),
    "bicg": (_bicg, {"M": 76, "N": 84}),
    "mvt": (_mvt, {"N": 80}),
    "gemver": (_gemver, {"N": 60}),
    "gesummv": (_gesummv, {"N": 60}),
    "doitgen": (_doitgen, {"NR": 20, "NQ": 16, "NP": 24}),
}


def test_the_corpus_is_complete() -> None:
    assert {p.stem for p in POLYBENCH.glob("*.lair")} == set(KERNELS)
    for name in KERNELS:
        assert (POLYBENCH / f"{name}.map").exists()
        assert (POLYBENCH / f"{name}.large.map").exists()


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_lair_kernel_computes_what_polybench_computes(name: str) -> None:
    numpy_kernel, _ = KERNELS[name]
    graph = load_program(POLYBENCH / f"{name}.lair").graph
    inputs = random_inputs(graph, 11, low=-3, high=3)
    wide = {k: v.astype(np.float64) for k, v in inputs.items()}
    results = run(graph, inputs)
    for tensor, expected in numpy_kernel(wide).items():
        np.testing.assert_array_equal(results[tensor], expected.astype(np.float32))


@pytest.mark.parametrize("engine", ["simpy", "fast"])
@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("size", ["mini", "large"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_simulates_exactly(name: str, size: str, simd: bool, engine: str) -> None:
    """On both engines: each must report exactly the pinned figures."""
    program = POLYBENCH / f"{name}.lair"
    mapping: Path | None = None
    params: dict[str, int] = {}
    if size == "large":
        mapping, params = POLYBENCH / f"{name}.large.map", KERNELS[name][1]
    outcome = run_program(program, mapping_path=None if mapping is None else str(mapping),
                          params=params, simd=simd, engine=engine)
    assert outcome.result.engine == engine, outcome.result.engine_note
    assert outcome.comparison.verified and outcome.comparison.exact, \
        outcome.comparison.mismatch
    # the bound for these inputs, whose sparse streams have zeros, holds too
    assert outcome.bound is not None
    assert outcome.result.cycles >= outcome.bound.cycles, outcome.bound.describe()
    check_pinned(f"polybench/{name} {size} {'simd' if simd else 'scalar'}", outcome.result)
