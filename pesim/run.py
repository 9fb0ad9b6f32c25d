"""One verified run: load a PE module, its reference LAIR program and inputs, simulate,
and compare every output with the reference interpreter.

Outputs are compared exactly when every result is exact whatever the order of
evaluation: all inputs and constants are integers, and a bound on the magnitude of every
value and partial sum (:func:`lair.interp.magnitude_bounds`) stays where the type holds
every integer (2**11 for float16, 2**24 for float32). The default random inputs make the
examples exact. Otherwise the outputs are compared within a tolerance for the different
association of sums: relative 1e-2 for float16 and 1e-5 for float32, of the element or
of its magnitude bound (sums that cancel lose precision relative to their terms).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import numpy as np

from dtg.codegen.bound import Bound, mapping_bound
from dtg.errors import InputError, LimitError
from dtg.lair.files import check_input_file
from dtg.lair.frontend import Program
from dtg.lair.graph import Graph
from dtg.lair.interp import (
    EXACT_STEPS,
    SMALLEST_NORMAL,
    check_inputs,
    magnitude_bounds,
    random_inputs,
)
from dtg.lair.interp import run as reference_run
from dtg.lair.limits import MAX_INPUT_ARRAY_BYTES, MAX_SECONDS, counted
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule
from dtg.pe.parser import parse_module_text
from dtg.pesim.engines import Notice, check_budget, prepare, simulate
from dtg.pesim.progress import Watcher
from dtg.pesim.sim import SimResult, TensorInfo
from dtg.pesim.sources import (
    Claim,
    check_tensor_sizes,
    load_reference,
    mapping_path,
    module_bound,
    read_module,
    reference_path,
)
from dtg.pesim.trace import Window
from dtg.pesim.verify import verify_module

TOLERANCE = {"float16": (1e-2, 1e-3), "float32": (1e-5, 1e-6)}  # (relative, absolute)


@dataclass(frozen=True)
class Comparison:
    verified: bool
    exact: bool  # exact equality was required
    max_abs_error: float
    mismatch: str | None  # the first element that differs, for the message
    reason: str = ""  # why exact equality was (not) required, or why nothing was compared
    compared: bool = True  # False: the run stopped early and nothing was compared

    @property
    def mode(self) -> str:
        if not self.compared:
            return f"not compared: {self.reason}"
        kind = "exact" if self.exact else "within tolerance"
        return f"{kind}: {self.reason}" if self.reason else kind


@dataclass(frozen=True)
class RunOutcome:
    module: PeModule
    module_path: Path | None
    reference_path: Path | None
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    result: SimResult
    comparison: Comparison
    bound: Bound | None = None  # the mapping's, from the compilation or the module's header
    mapping_path: Path | None = None  # the mapping file the bound comes from
    bound_note: str | None = None  # why there is no bound


def not_compared(cycle: int) -> Comparison:
    """The comparison of a run stopped (by Ctrl-C) at ``cycle``: none."""
    return Comparison(False, False, 0.0, None, f"interrupted at cycle {cycle}", compared=False)


def load_module(path: str | Path, config: FabricConfig | None = None) -> PeModule:
    """Parse and verify a PE module file (errors point into the file)."""
    return read_module(path, config)[0]


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"


def read_inputs(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` archive, checked to be one (not an ``.npy`` array, not
    another file) whose arrays, as their headers declare them, take at most
    :data:`MAX_INPUT_ARRAY_BYTES` together, before anything is loaded."""
    path = check_input_file(path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(NPY_MAGIC))
        if magic.startswith(NPY_MAGIC):
            raise InputError(f"{path} is a single .npy array; --inputs takes an .npz archive "
                             "with one array per input tensor, e.g. np.savez(path, W=W, x=x)")
        if not magic.startswith(ZIP_MAGIC):
            raise InputError(f"{path} is not an .npz archive (a zip file of .npy arrays, as "
                             "np.savez writes); expected one array per input tensor")
        total = 0
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    shape, dtype = npy_header(member, f"{path}: {info.filename}")
                size = math.prod(shape) * dtype.itemsize
                total += size
                if total > MAX_INPUT_ARRAY_BYTES:
                    shown = " x ".join(map(str, shape)) or "a scalar"
                    raise LimitError(
                        f"{path}: {info.filename} declares {shown} {dtype} elements "
                        f"({size} bytes); the arrays take more than the limit of "
                        f"{MAX_INPUT_ARRAY_BYTES} bytes (nothing was loaded)")
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"cannot read {path} as .npz: {exc}") from None


def npy_header(handle: IO[bytes], what: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and type an ``.npy`` member declares, read from its header alone."""
    if handle.read(len(NPY_MAGIC)) != NPY_MAGIC:
        raise InputError(f"{what} is not a .npy array (np.savez writes one per tensor)")
    major, minor = (b for b in handle.read(2))
    if (major, minor) == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    elif (major, minor) == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    else:
        raise InputError(f"{what} is a .npy array of format {major}.{minor}; expected 1.0 "
                         "or 2.0, as np.savez writes for numbers")
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise InputError(f"{what} declares the shape {shape}")
    return tuple(shape), dtype


def make_inputs(program: Program, *, inputs_path: str | Path | None = None, seed: int = 0
                ) -> dict[str, np.ndarray]:
    """The run's inputs: from an ``.npz`` (names and shapes checked) or random integers
    (within the budgets of :func:`check_tensor_sizes`)."""
    check_tensor_sizes(program.graph)
    if inputs_path is None:
        return random_inputs(program.graph, seed)
    return check_inputs(program.graph, read_inputs(inputs_path))


def exactness(graph: Graph, inputs: Mapping[str, np.ndarray]
              ) -> tuple[bool, str, dict[str, np.ndarray]]:
    """Whether every output is exact in any order of evaluation, why (or why not), and
    the magnitude bound of every output element (for the tolerance)."""
    bounds = magnitude_bounds(graph, inputs)
    per_output = {t.name: bounds[t.name].elements for t in graph.outputs if t.name in bounds}
    for stmt in graph.statements:
        tensor = graph.tensor(stmt.target.tensor)
        b = bounds[tensor.name]
        if b.grain == 0:
            return False, f"{tensor.name} depends on values that are not finite", per_output
        if b.peak == 0 or b.grain == math.inf:
            continue
        steps = b.peak / b.grain
        if steps > EXACT_STEPS[tensor.dtype] or b.grain < SMALLEST_NORMAL[tensor.dtype]:
            return False, (f"values computed for {tensor.name} reach {b.peak:g} in magnitude "
                           f"in steps of {b.grain:g}, more than {tensor.dtype} holds exactly "
                           f"({EXACT_STEPS[tensor.dtype]:g} steps)"), per_output
    return True, "every value is exact in its type, in any order of evaluation", per_output


def compare(expected: Mapping[str, np.ndarray], actual: Mapping[str, np.ndarray], *,
            exact: bool, bounds: Mapping[str, np.ndarray] | None = None, reason: str = ""
            ) -> Comparison:
    """Compare every expected output; report the largest absolute error. Without
    ``exact``, an element matches within the relative tolerance of its expected value or
    of its magnitude bound in ``bounds``."""
    worst = 0.0
    mismatch: str | None = None
    overflowed: list[str] = []
    for name, want in expected.items():
        got = actual[name]
        want64, got64 = want.astype(np.float64), got.astype(np.float64)
        both_nan = np.isnan(want64) & np.isnan(got64)
        same = (want64 == got64) | both_nan
        with np.errstate(invalid="ignore"):  # (inf - inf where both overflowed)
            diff = np.where(same, 0.0, np.abs(want64 - got64))
        bad = int(np.count_nonzero(~np.isfinite(want64)))
        if bad:
            overflowed.append(f"{name} has {bad} of {counted(want.size, 'element')} "
                              f"inf or nan ({want.dtype})")
        diff = np.where(np.isnan(diff), np.inf, diff)
        if diff.size:
            worst = max(worst, float(diff.max()))
        if exact:
            ok = same
        else:
            rtol, atol = TOLERANCE.get(str(want.dtype), TOLERANCE["float32"])
            ok = same | np.isclose(got64, want64, rtol=rtol, atol=atol)
            if bounds is not None and name in bounds:
                ok |= diff <= rtol * bounds[name]
        if mismatch is None and not bool(np.all(ok)):
            where = tuple(int(i) for i in np.argwhere(~ok)[0])
            at = "".join(f"[{i}]" for i in where)
            mismatch = (f"{name}{at} = {float(got[where])}, expected {float(want[where])} "
                        f"({int(np.count_nonzero(~ok))} of {counted(ok.size, 'element')} "
                        "differ)")
    if overflowed:
        # (what overflows its type on the PEs must overflow alike: a match, but not of
        # the numbers the program meant)
        note = "the reference overflows: " + "; ".join(overflowed)
        reason = f"{reason}; {note}" if reason else note
    return Comparison(mismatch is None, exact, worst, mismatch, reason)


def run_module(module: PeModule, program: Program, inputs: Mapping[str, np.ndarray], *,
               config: FabricConfig | None = None, module_path: Path | None = None,
               reference: Path | None = None, max_seconds: float = MAX_SECONDS,
               watch: Watcher | None = None, trace: bool | Window = False,
               engine: str = "auto", notice: Notice | None = None) -> RunOutcome:
    """Simulate a verified module on ``inputs`` and compare with the reference program
    (nothing is compared when the run was interrupted)."""
    graph = program.graph
    checked = check_inputs(graph, inputs)
    outputs = {t.name: TensorInfo(t.shape, t.dtype) for t in graph.outputs}
    result = simulate(module, checked, outputs, engine=engine, config=config,
                      max_seconds=max_seconds, watch=watch, trace=trace, notice=notice)
    if not result.complete:
        return RunOutcome(module, module_path, reference, checked, {}, result,
                          not_compared(result.end))
    values = reference_run(graph, checked)
    expected = {t.name: values[t.name] for t in graph.outputs}
    exact, reason, bounds = exactness(graph, checked)
    comparison = compare(expected, result.outputs, exact=exact, bounds=bounds, reason=reason)
    return RunOutcome(module, module_path, reference, checked, expected, result, comparison)


def run_file(path: str | Path, *, inputs_path: str | Path | None = None, seed: int = 0,
             config: FabricConfig | None = None, max_seconds: float = MAX_SECONDS,
             watch: Watcher | None = None, search: Sequence[str | Path] = (),
             trace: bool | Window = False, reference: str | Path | None = None,
             mapping: str | Path | None = None, claim: Claim | None = None,
             inputs: Mapping[str, np.ndarray] | None = None, engine: str = "auto",
             notice: Notice | None = None) -> RunOutcome:
    """Everything ``pesim MODULE.pe`` does before reporting: ``path`` is a module file,
    a directory holding one or ``-`` (standard input); ``search``: directories to find
    a moved module's reference program and mapping in; ``reference``, ``mapping``: name
    them instead of the module's header; ``claim`` is told of every file read;
    ``inputs``: the input arrays themselves (instead of ``inputs_path`` or ``seed``)."""
    module, module_path, locations = read_module(path, config, claim=claim, engine=engine)
    ref_path = reference_path(module, module_path, search, reference)
    map_path, note = mapping_path(module, module_path, search, mapping)
    if claim is not None:  # every file the run reads is known before any is read
        claim(ref_path, "the reference program")
        if map_path is not None:
            claim(map_path, "the mapping")
    program = load_reference(module, ref_path, locations)
    data = (make_inputs(program, inputs_path=inputs_path, seed=seed) if inputs is None
            else check_inputs(program.graph, {k: np.asarray(v) for k, v in inputs.items()}))
    outcome = run_module(module, program, data, config=config, module_path=module_path,
                         reference=ref_path, max_seconds=max_seconds, watch=watch, trace=trace,
                         engine=engine, notice=notice)
    if map_path is None:
        return replace(outcome, bound_note=note)
    bound, note = module_bound(module, program, map_path, config,
                               {**outcome.inputs, **outcome.expected})
    return replace(outcome, bound=bound, mapping_path=map_path, bound_note=note)


def run_program(path: str | Path, *, mapping_path: str | None = None,
                params: Mapping[str, int | str] | None = None, simd: bool = True,
                arrival: str = "batched", inputs_path: str | Path | None = None, seed: int = 0,
                config: FabricConfig | None = None, max_seconds: float = MAX_SECONDS,
                watch: Watcher | None = None, trace: bool | Window = False, engine: str = "auto",
                notice: Notice | None = None) -> RunOutcome:
    """``pesim PROG.lair``: compile with dtg-codegen, then simulate exactly the text it
    prints (printed and parsed again, as a module file would be)."""
    from dtg.codegen.driver import compile_file, mapping_file
    from dtg.pe.printer import module as print_module

    compiled = compile_file(path, mapping_path, dict(params or {}), simd=simd, arrival=arrival,
                            fabric=config)
    assert compiled.module is not None
    text = print_module(compiled.module)
    module, locations = parse_module_text(text, f"<{Path(path).stem}.pe>")
    check_budget(module, locations, engine=engine)
    prepare(module, engine)
    verify_module(module, config, locations=locations)
    inputs = make_inputs(compiled.program, inputs_path=inputs_path, seed=seed)
    outcome = run_module(module, compiled.program, inputs, config=config,
                         reference=Path(path).resolve(), max_seconds=max_seconds,
                         watch=watch, trace=trace, engine=engine, notice=notice)
    bound = mapping_bound(compiled.program.model, compiled.mapping, config,
                          data={**outcome.inputs, **outcome.expected})
    return replace(outcome, bound=bound,
                   mapping_path=mapping_file(path, mapping_path).resolve())
