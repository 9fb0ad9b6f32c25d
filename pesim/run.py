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
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from dtg.codegen.bound import Bound, mapping_bound
from dtg.codegen.peir import PeModule
from dtg.lair.diagnostics import InputError, LimitError, SimulationError
from dtg.lair.files import check_input_file
from dtg.lair.frontend import Program, load_program
from dtg.lair.graph import Graph
from dtg.lair.interp import (
    EXACT_STEPS,
    SMALLEST_NORMAL,
    check_inputs,
    magnitude_bounds,
    random_inputs,
)
from dtg.lair.interp import run as reference_run
from dtg.lair.limits import MAX_INPUT_ARRAY_BYTES, MAX_SECONDS
from dtg.pesim.fabric import FabricConfig
from dtg.pesim.parser import parse_module_file, parse_module_text
from dtg.pesim.progress import Watcher
from dtg.pesim.sim import SimResult, TensorInfo, check_budget, simulate
from dtg.pesim.verify import verify_module

TOLERANCE = {"float16": (1e-2, 1e-3), "float32": (1e-5, 1e-6)}  # (relative, absolute)


@dataclass(frozen=True)
class Comparison:
    verified: bool
    exact: bool  # exact equality was required
    max_abs_error: float
    mismatch: str | None  # the first element that differs, for the message
    reason: str = ""  # why exact equality was (not) required

    @property
    def mode(self) -> str:
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
    bound: Bound | None = None  # of the mapping, when the run compiled the program


def find_module(path: str | Path) -> Path:
    """The ``.pe`` file named by ``path``: the file itself or the only one in a directory."""
    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("*.pe"))
        if len(found) != 1:
            listed = ", ".join(p.name for p in found) if found else "none"
            raise InputError(f"{path} must hold exactly one .pe module; found {listed}")
        return found[0]
    if not path.exists():
        raise InputError(f"no such file: {path}")
    return path


def load_module(path: str | Path, config: FabricConfig | None = None) -> PeModule:
    """Parse and verify a PE module file (errors point into the file)."""
    module, locations = parse_module_file(path)
    check_budget(module, locations)  # before verification lists the PEs
    verify_module(module, config, locations=locations)
    return module


SEARCH_PATH_VARIABLE = "DTG_PATH"


def reference_path(module: PeModule, module_path: Path) -> Path:
    if module.reference is None:
        raise SimulationError(f"{module_path}: module {module.name} has no 'reference' line; "
                              "pesim needs the LAIR program to check the outputs, e.g. "
                              'reference "../gemv/gemv.lair" M=32 N=16')
    return (module_path.parent / module.reference).resolve()


def search_dirs(extra: Sequence[str | Path] = ()) -> list[Path]:
    """Where a module's reference program is looked for when it is not where the
    module says (the module was moved): ``extra`` (``pesim -I DIR``), then the
    directories of ``$DTG_PATH``."""
    found = [Path(d) for d in extra]
    found += [Path(d) for d in os.environ.get(SEARCH_PATH_VARIABLE, "").split(os.pathsep) if d]
    return found


def load_reference(module: PeModule, module_path: Path, search: Sequence[str | Path] = ()
                   ) -> tuple[Path, Program]:
    """The reference program: relative to the module as its ``reference`` line says,
    else by that relative path or by its file name in each search directory."""
    path = reference_path(module, module_path)
    tried = [path]
    if not path.exists():
        assert module.reference is not None
        relative = Path(module.reference)
        for directory in search_dirs(search):
            for candidate in (directory / relative, directory / relative.name):
                tried.append(candidate)
                if candidate.exists():
                    path = candidate.resolve()
                    break
            if path.exists():
                break
    if not path.exists():
        raise InputError(f"{module_path}: the reference program {module.reference} does not "
                         f"exist (looked for {', '.join(map(str, tried))}); name the "
                         f"directory that holds it with -I DIR or ${SEARCH_PATH_VARIABLE}")
    return path, load_program(path, dict(module.params))


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"


def read_inputs(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` archive, checked to be one (not an ``.npy`` array, not
    another file) and within :data:`MAX_INPUT_ARRAY_BYTES` before anything is loaded."""
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
        with zipfile.ZipFile(path) as archive:
            total = sum(info.file_size for info in archive.infolist())
        if total > MAX_INPUT_ARRAY_BYTES:
            raise LimitError(f"the arrays of {path} take {total} bytes, more than the limit "
                             f"of {MAX_INPUT_ARRAY_BYTES}")
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"cannot read {path} as .npz: {exc}") from None


def make_inputs(program: Program, *, inputs_path: str | Path | None = None, seed: int = 0
                ) -> dict[str, np.ndarray]:
    """The run's inputs: from an ``.npz`` (names and shapes checked) or random integers."""
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
    for name, want in expected.items():
        got = actual[name]
        want64, got64 = want.astype(np.float64), got.astype(np.float64)
        both_nan = np.isnan(want64) & np.isnan(got64)
        same = (want64 == got64) | both_nan
        diff = np.where(same, 0.0, np.abs(want64 - got64))
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
                        f"({int(np.count_nonzero(~ok))} of {ok.size} elements differ)")
    return Comparison(mismatch is None, exact, worst, mismatch, reason)


def run_module(module: PeModule, program: Program, inputs: Mapping[str, np.ndarray], *,
               config: FabricConfig | None = None, module_path: Path | None = None,
               reference: Path | None = None, max_seconds: float = MAX_SECONDS,
               watch: Watcher | None = None, trace: bool = False) -> RunOutcome:
    """Simulate a verified module on ``inputs`` and compare with the reference program
    (nothing is compared when the run was interrupted)."""
    graph = program.graph
    checked = check_inputs(graph, inputs)
    outputs = {t.name: TensorInfo(t.shape, t.dtype) for t in graph.outputs}
    result = simulate(module, checked, outputs, config=config, max_seconds=max_seconds,
                      watch=watch, trace=trace)
    if not result.complete:
        stopped = Comparison(False, False, 0.0, None,
                             f"not compared: interrupted at cycle {result.end}")
        return RunOutcome(module, module_path, reference, checked, {}, result, stopped)
    values = reference_run(graph, checked)
    expected = {t.name: values[t.name] for t in graph.outputs}
    exact, reason, bounds = exactness(graph, checked)
    comparison = compare(expected, result.outputs, exact=exact, bounds=bounds, reason=reason)
    return RunOutcome(module, module_path, reference, checked, expected, result, comparison)


def run_file(path: str | Path, *, inputs_path: str | Path | None = None, seed: int = 0,
             config: FabricConfig | None = None, max_seconds: float = MAX_SECONDS,
             watch: Watcher | None = None, search: Sequence[str | Path] = (),
             trace: bool = False) -> RunOutcome:
    """Everything ``pesim MODULE.pe`` does before reporting (``search``: directories
    to find a moved module's reference program in)."""
    module_path = find_module(path)
    module = load_module(module_path, config)
    ref_path, program = load_reference(module, module_path, search)
    inputs = make_inputs(program, inputs_path=inputs_path, seed=seed)
    return run_module(module, program, inputs, config=config, module_path=module_path,
                      reference=ref_path, max_seconds=max_seconds, watch=watch, trace=trace)


def run_program(path: str | Path, *, mapping_path: str | None = None,
                params: Mapping[str, int | str] | None = None, simd: bool = True,
                arrival: str = "batched", inputs_path: str | Path | None = None, seed: int = 0,
                config: FabricConfig | None = None, max_seconds: float = MAX_SECONDS,
                watch: Watcher | None = None, trace: bool = False) -> RunOutcome:
    """``pesim PROG.lair``: compile with dtg-codegen, then simulate exactly the text it
    prints (printed and parsed again, as a module file would be)."""
    from dtg.codegen.driver import compile_file
    from dtg.codegen.peprint import module as print_module

    compiled = compile_file(path, mapping_path, dict(params or {}), simd=simd, arrival=arrival,
                            fabric=config)
    assert compiled.module is not None
    text = print_module(compiled.module)
    module, locations = parse_module_text(text, f"<{Path(path).stem}.pe>")
    check_budget(module, locations)
    verify_module(module, config, locations=locations)
    inputs = make_inputs(compiled.program, inputs_path=inputs_path, seed=seed)
    outcome = run_module(module, compiled.program, inputs, config=config,
                         reference=Path(path).resolve(), max_seconds=max_seconds,
                         watch=watch, trace=trace)
    bound = mapping_bound(compiled.program.model, compiled.mapping, config,
                          data={**outcome.inputs, **outcome.expected})
    return replace(outcome, bound=bound)
