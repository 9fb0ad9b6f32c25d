"""What a PE module is checked and measured against: its reference program and its
mapping, found from the module's header (``docs/pecode.md``, "Header").

The ``reference`` and ``mapping`` lines name files relative to the module's directory
(the working directory for a module read from standard input). A moved module finds
them in the directories of ``pesim -I DIR`` and ``$DTG_PATH`` too, by that relative path
or by file name; ``pesim --reference PROG.lair`` and ``-m MAP`` name them outright. The
mapping gives the run its bound (``codegen/bound.py``): a module whose mapping is
missing, or no longer fits its program, still runs, with a note that says why it has
no bound.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from math import prod
from pathlib import Path

import numpy as np

from dtg.codegen.bound import Bound, mapping_bound
from dtg.errors import DtgError, InputError, LimitError, SourceLoc
from dtg.lair.files import check_input_file
from dtg.lair.frontend import Program, from_source
from dtg.lair.graph import Graph, Tensor
from dtg.lair.limits import MAX_INPUT_ARRAY_BYTES, MAX_INPUT_BYTES, MAX_SIM_BYTES
from dtg.lair.parser import parse_file
from dtg.mapping.binding import bound_mapping, program_parameters
from dtg.mapping.direction import TILE_PARAMETERS, candidates
from dtg.mapping.spec import MappingSpec, parse_mapping_file
from dtg.mapping.validate import Mapping as ValidMapping
from dtg.mapping.validate import validate_mapping
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule
from dtg.pe.parser import Locations, parse_module_file, parse_module_text
from dtg.pesim.engines import check_budget, prepare
from dtg.pesim.verify import verify_module

STDIN = "-"
"""The module argument that reads the module from standard input."""

SEARCH_PATH_VARIABLE = "DTG_PATH"

Claim = Callable[[Path, str], None]
"""Told of every input file as soon as its path is known (``pesim`` checks that no
output would replace it)."""


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


def read_module(path: str | Path, config: FabricConfig | None = None, *,
                claim: Claim | None = None, engine: str = "auto"
                ) -> tuple[PeModule, Path | None, Locations]:
    """Parse and verify the module of a file, a directory or (``-``) standard input
    (errors point into the text); its path is None for standard input. A run on the
    compiled engine that is not compiled yet starts compiling it here, beside the rest."""
    if str(path) == STDIN:
        module_path = None
        module, locations = parse_module_text(_read_stdin(), "<stdin>")
    else:
        module_path = find_module(path)
        if claim is not None:
            claim(module_path, "the module")
        module, locations = parse_module_file(module_path)
    check_budget(module, locations, engine=engine)  # before verification lists the PEs
    prepare(module, engine)
    verify_module(module, config, locations=locations)
    return module, module_path, locations


def _read_stdin() -> str:
    raw = getattr(sys.stdin, "buffer", None)
    data = raw.read(MAX_INPUT_BYTES + 1) if raw is not None else sys.stdin.read(
        MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise LimitError(f"the PE module on standard input has more than {MAX_INPUT_BYTES} "
                         "characters, the limit")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"the PE module on standard input is not UTF-8 text (byte "
                         f"{err.start})") from None


def search_dirs(extra: Sequence[str | Path] = ()) -> list[Path]:
    """Where a module's reference program and mapping are looked for when they are not
    where the module says (the module was moved): ``extra`` (``pesim -I DIR``), then
    the directories of ``$DTG_PATH``."""
    found = [Path(d) for d in extra]
    found += [Path(d) for d in os.environ.get(SEARCH_PATH_VARIABLE, "").split(os.pathsep) if d]
    return found


def _find(named: str, module_path: Path | None, search: Sequence[str | Path]
          ) -> tuple[Path | None, list[Path]]:
    """A file the header names: relative to the module, else by that relative path or
    by its file name in each search directory; and every place tried."""
    here = module_path.parent if module_path is not None else Path.cwd()
    tried = [here / named]
    if tried[0].exists():
        return tried[0].resolve(), tried
    for directory in search_dirs(search):
        for candidate in (directory / named, directory / Path(named).name):
            tried.append(candidate)
            if candidate.exists():
                return candidate.resolve(), tried
    return None, tried


def _module_name(module_path: Path | None) -> str:
    return str(module_path) if module_path is not None else "<stdin>"


def reference_path(module: PeModule, module_path: Path | None,
                   search: Sequence[str | Path] = (), given: str | Path | None = None) -> Path:
    """The reference program: ``given`` (``--reference``), else as the header says."""
    if given is not None:
        return check_input_file(given).resolve()
    if module.reference is None:
        origin = (" (it was compiled from standard input)" if module.params else "")
        raise InputError(f"{_module_name(module_path)}: module {module.name} names no "
                         f"reference program{origin}; pesim needs the LAIR program to check "
                         "the outputs: name it with --reference PROG.lair, or give the module "
                         'a line such as reference "../gemv/gemv.lair" M=32 N=16')
    found, tried = _find(module.reference, module_path, search)
    if found is None:
        raise InputError(f"{_module_name(module_path)}: the reference program "
                         f"{module.reference} does not exist (looked for "
                         f"{', '.join(map(str, tried))}); name the directory that holds it "
                         f"with -I DIR or ${SEARCH_PATH_VARIABLE}, or the file with "
                         "--reference PROG.lair")
    return found


def load_reference(module: PeModule, path: Path, locations: Locations | None = None
                   ) -> Program:
    """The reference program at ``path``, specialized with the values of the header's
    ``reference`` line (each a parameter the program declares) and within the budgets
    of :func:`check_tensor_sizes`."""
    source = parse_file(path)
    loc = (locations or {}).get(("reference",))
    declared = program_parameters(source)
    for name, _ in module.params:
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise InputError(f"the reference line binds '{name}', which {path} does not "
                             f"declare (its parameters: {known}); a parameter of the mapping "
                             "goes on the 'mapping' line", loc)
    program = from_source(source, dict(module.params))
    check_tensor_sizes(program.graph, f"the reference program {path.name}", loc)
    return program


def check_tensor_sizes(graph: Graph, what: str = "the program",
                       loc: SourceLoc | None = None) -> None:
    """Refuse, before anything is allocated, a program whose inputs exceed
    :data:`MAX_INPUT_ARRAY_BYTES` or whose tensors together (what the reference
    interpreter holds) exceed :data:`MAX_SIM_BYTES`."""
    def size(tensors: Sequence[Tensor]) -> tuple[int, str]:
        total = sum(prod(t.shape) * t.bytes_per_element for t in tensors)
        return total, ", ".join(f"{t.name}[{']['.join(map(str, t.shape))}] {t.dtype}"
                                for t in tensors)

    inputs, listed = size(graph.inputs)
    if inputs > MAX_INPUT_ARRAY_BYTES:
        raise LimitError(f"the inputs of {what} ({listed}) take {inputs} bytes, more than the "
                         f"limit of {MAX_INPUT_ARRAY_BYTES}; simulate smaller sizes", loc)
    every, listed = size(graph.tensors)
    if every > MAX_SIM_BYTES:
        raise LimitError(f"the tensors of {what} ({listed}) take {every} bytes, more than the "
                         f"limit of {MAX_SIM_BYTES} for checking a run; simulate smaller "
                         "sizes", loc)


def mapping_path(module: PeModule, module_path: Path | None,
                 search: Sequence[str | Path] = (), given: str | Path | None = None
                 ) -> tuple[Path | None, str | None]:
    """The mapping the bound comes from: ``given`` (``-m``), else as the header says;
    or None and why there is none."""
    if given is not None:
        return check_input_file(given).resolve(), None
    if module.mapping is None:
        return None, ("the module names no mapping (as a hand-written module, or one "
                      "compiled from a mapping given as text); name it with -m MAP")
    found, tried = _find(module.mapping, module_path, search)
    if found is None:
        return None, (f"the module's mapping {module.mapping} was not found (looked for "
                      f"{', '.join(map(str, tried))}); name its directory with -I DIR or "
                      "the file with -m MAP")
    return found, None


def module_bound(module: PeModule, program: Program, path: Path,
                 config: FabricConfig | None = None,
                 data: Mapping[str, np.ndarray] | None = None
                 ) -> tuple[Bound | None, str | None]:
    """The bound of the module's mapping at ``path``, bound with the header's values;
    or None and why (the mapping no longer fits the program or the module)."""
    tiles = {k: v for k, v in module.mapping_params if k in TILE_PARAMETERS}
    own = {k: v for k, v in module.mapping_params if k not in TILE_PARAMETERS}
    try:
        spec = parse_mapping_file(path)
        bound_spec = bound_mapping(program.source, spec, {**dict(module.params), **own})
        if spec.direction:
            mapping = _chosen_tiling(bound_spec, program, tiles)
            if mapping is None:
                return None, (f"the mapping {path} gives directions only, and the module does "
                              "not record a tiling of it that validates (TX, TY, OX, OY on "
                              "its 'mapping' line)")
        else:
            mapping = validate_mapping(bound_spec, program.model)
        if (mapping.width, mapping.height) != (module.width, module.height):
            return None, (f"the mapping {path} places the program on PE[{mapping.width}, "
                          f"{mapping.height}], but the module's mesh is PE[{module.width}, "
                          f"{module.height}]: it is not the mapping the module was compiled "
                          "from")
        return mapping_bound(program.model, mapping, config, data=data), None
    except DtgError as err:
        return None, f"the mapping {path} does not fit: {err.format()}"


def _chosen_tiling(spec: MappingSpec, program: Program, tiles: dict[str, int]
                   ) -> ValidMapping | None:
    """The tiling of a direction-only mapping that the module records."""
    if set(tiles) != set(TILE_PARAMETERS):
        return None
    for choice in candidates(spec, program.model, lambda _: 0):
        if choice.tiling.per is None and choice.tiling.values() == tiles:
            return choice.mapping
    return None
