"""End to end: every example compiles, simulates and matches the reference interpreter
exactly on integer-valued inputs, with and without SIMD; runs are deterministic; the
emitted PE code survives print -> parse -> print."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLE_PROGRAMS, EXAMPLES
from run_pins import check_pinned

from dtg.codegen.bound import mapping_bound
from dtg.codegen.driver import compile_file
from dtg.pe.parser import parse_module
from dtg.pe.printer import module as print_module
from dtg.pesim.cli import main as pesim_main
from dtg.pesim.run import RunOutcome, run_module, run_program

RUNNABLE = EXAMPLE_PROGRAMS


PINNED = Path(__file__).with_name("pinned_cycles.json")


# the pinned runs are checked on both engines: each must report exactly the pinned figures
ENGINES = ["simpy", "fast"]


@cache
def outcome(path: Path, simd: bool, seed: int = 0, arrival: str = "batched",
            engine: str = "simpy") -> RunOutcome:
    return run_program(path, simd=simd, seed=seed, arrival=arrival, engine=engine)


def _pins() -> dict[str, dict[str, int]]:
    return json.loads(PINNED.read_text()) if PINNED.exists() else {}


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_cycle_counts_are_pinned(path: Path) -> None:
    """Every example's cycles (seed 0) with batched and per-wavelet arrivals and without
    SIMD, so that a change of the generated code shows up; after an intended change,
    ``DTG_UPDATE_PINS=1 pytest tests/e2e/test_examples_run.py -k pinned`` rewrites them."""
    key = str(path.relative_to(EXAMPLES))
    got = {"simd": outcome(path, True).result.cycles,
           "per_wavelet": outcome(path, True, 0, "per-wavelet").result.cycles,
           "scalar": outcome(path, False).result.cycles}
    if os.environ.get("DTG_UPDATE_PINS"):
        pins = _pins()
        pins[key] = got
        PINNED.write_text(json.dumps(dict(sorted(pins.items())), indent=1) + "\n")
        return
    assert _pins().get(key) == got


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", ["simd", "per_wavelet", "scalar"])
@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_every_figure_of_a_run_is_pinned(path: Path, mode: str, engine: str) -> None:
    """Per-PE statistics, link loads and outputs too, not only cycles: the simulator
    may get faster but must report exactly the same machine (``tests/run_pins.py``)."""
    simd, arrival = mode != "scalar", "per-wavelet" if mode == "per_wavelet" else "batched"
    key = f"{path.relative_to(EXAMPLES)} {mode}"
    result = outcome(path, simd, 0, arrival, engine).result
    assert result.engine == engine, result.engine_note
    check_pinned(key, result)


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_batches_are_never_slower_than_one_task_per_wavelet(path: Path) -> None:
    batched = outcome(path, True)
    per_wavelet = outcome(path, True, 0, "per-wavelet")
    assert batched.comparison.verified and per_wavelet.comparison.verified
    assert batched.result.cycles <= per_wavelet.result.cycles


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_example_matches_the_reference_exactly(path: Path, simd: bool) -> None:
    result = outcome(path, simd)
    assert result.comparison.exact and result.comparison.verified, result.comparison.mismatch
    assert result.comparison.max_abs_error == 0
    for name, want in result.expected.items():
        np.testing.assert_array_equal(result.result.outputs[name], want)


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_simd_is_faster_and_runs_are_deterministic(path: Path) -> None:
    fast, slow = outcome(path, True), outcome(path, False)
    assert fast.result.cycles < slow.result.cycles
    assert run_program(path, simd=True).result.cycles == fast.result.cycles
    assert sum(p.simd_ops for p in fast.result.pes.values()) > 0


@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_other_seeds_with_zeros_in_sparse_inputs(path: Path) -> None:
    for seed in (1, 2):
        result = outcome(path, True, seed)
        assert result.comparison.verified, result.comparison.mismatch
        assert any(np.count_nonzero(a == 0) for a in result.inputs.values())


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_emitted_code_round_trips(path: Path, simd: bool) -> None:
    compiled = compile_file(path, simd=simd)
    assert compiled.module is not None
    text = print_module(compiled.module)
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("engine", ENGINES)
def test_compiled_gemv_matches_the_hand_written_baseline(engine: str) -> None:
    handwritten = EXAMPLES / "handwritten" / "gemv_checkerboard" / "gemv_checkerboard.pe"
    from dtg.pesim.run import run_file

    run = run_file(handwritten, engine=engine)
    assert run.result.engine == engine, run.result.engine_note
    check_pinned("handwritten/gemv_checkerboard", run.result)
    baseline = run.result.cycles
    compiled = outcome(EXAMPLES / "gemv" / "gemv.lair", True).result.cycles
    assert compiled <= baseline * 1.05


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("size", [(64, 64, 4, 4), (256, 256, 8, 8)], ids=str)
def test_generated_checkerboard_gemv_is_pinned(size: tuple[int, int, int, int],
                                               tmp_path: Path, engine: str) -> None:
    """The benchmark's GEMV (benchmarks/bench_pesim.py) at small sizes: its figures must
    stay what they are while the simulator is made faster."""
    import sys

    sys.path.insert(0, str(EXAMPLES.parent / "benchmarks"))
    from bench_pesim import checkerboard_gemv

    from dtg.pesim.run import run_file

    path = tmp_path / "gemv.pe"
    path.write_text(checkerboard_gemv(*size))
    run = run_file(path, engine=engine)
    assert run.comparison.verified and run.comparison.exact
    assert run.result.engine == engine, run.result.engine_note
    check_pinned("checkerboard gemv {} x {} on {} x {}".format(*size), run.result)


@pytest.mark.parametrize("fabric", ["wse2", "wse3"])
@pytest.mark.parametrize("path", ["gemv/gemv.lair", "conv1d/conv1d.lair", "fc/train.lair",
                                  "polybench/gemver.lair"])
def test_examples_compile_and_verify_for_every_fabric(path: str, fabric: str, cli,
                                                      tmp_path: Path) -> None:
    """The compiler chooses by the preset's costs, pesim charges them; the code still
    computes the program, and the report names the fabric of both."""
    from dtg.codegen.driver import main as codegen_main
    from dtg.pe.fabric import preset

    report = tmp_path / "c.json"
    compiled = cli(codegen_main, EXAMPLES / path, "--fabric", fabric, "--report", report,
                   "-o", tmp_path)
    assert compiled.status == 0, compiled.err
    assert json.loads(report.read_text())["fabric"] == preset(fabric).as_dict()
    outcome = run_program(EXAMPLES / path, config=preset(fabric))
    assert outcome.comparison.verified and outcome.comparison.exact
    assert outcome.bound is not None and outcome.result.cycles >= outcome.bound.cycles
    simulated = cli(pesim_main, tmp_path / Path(path).with_suffix(".pe").name, "--fabric",
                    fabric, "--report", tmp_path / "s.json")
    assert simulated.status == 0, simulated.err
    assert json.loads((tmp_path / "s.json").read_text())["fabric"]["hop_cycles"] == \
        preset(fabric).hop_cycles


def test_pesim_compiles_lair_programs(cli) -> None:
    result = cli(pesim_main, EXAMPLES / "gemv" / "gemv.lair", "--no-simd", "--seed", "3")
    assert result.status == 0, result.err
    assert "outputs match reference" in result.out


def test_training_step_runs_whole() -> None:
    result = outcome(EXAMPLES / "fc" / "train.lair", True)
    assert set(result.expected) == {"y", "dx", "Wn"}
    assert result.comparison.verified and result.comparison.exact


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_sparse_output_stream(tmp_path: Path, simd: bool) -> None:
    (tmp_path / "ff.lair").write_text((EXAMPLES / "fc" / "ff.lair").read_text())
    mapping = (EXAMPLES / "fc" / "ff.map").read_text().replace(
        "output y dense  {", "output y sparse {")
    assert "output y sparse" in mapping
    (tmp_path / "ff.map").write_text(mapping)
    result = run_program(tmp_path / "ff.lair", simd=simd, seed=4)
    assert result.comparison.verified and result.comparison.exact


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
@pytest.mark.parametrize("path", RUNNABLE, ids=lambda p: p.stem)
def test_no_run_beats_the_mapping_bound(path: Path, simd: bool) -> None:
    """No run beats the mapping's lower bound for its inputs (zeros of sparse streams
    skip wavelets and instances, and the bound knows), nor the bound that counts every
    element when the inputs have no zeros."""
    result = outcome(path, simd)
    assert result.bound is not None
    assert result.result.cycles >= result.bound.cycles, result.bound.describe()
    dense = {name: np.where(a == 0, 1, a) for name, a in result.inputs.items()}
    compiled = compile_file(path, simd=simd)
    assert compiled.module is not None
    run = run_module(result.module, compiled.program, dense)
    assert run.comparison.verified
    every = mapping_bound(compiled.program.model, compiled.mapping)
    assert run.result.cycles >= every.cycles, every.describe()


def test_the_compiler_keeps_within_the_fabric_it_is_given() -> None:
    """--config limits reach the compiler too: a PE's SIMD configurations and memory."""
    from dataclasses import replace as changed

    from dtg.errors import MappingError
    from dtg.pe.fabric import FabricConfig

    few = changed(FabricConfig(), max_simd_configs=2)
    outcome = run_program(EXAMPLES / "fc" / "train.lair", config=few)  # pesim checks it
    assert outcome.comparison.verified and outcome.comparison.exact
    assert outcome.result.cycles > run_program(EXAMPLES / "fc" / "train.lair").result.cycles
    with pytest.raises(MappingError, match=r"need 80 bytes .* more than the 64 bytes a PE has"):
        compile_file(EXAMPLES / "gemv" / "gemv.lair",
                     fabric=changed(FabricConfig(), memory_bytes=64))
