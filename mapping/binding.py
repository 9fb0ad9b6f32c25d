"""Parameters shared by a program and its mapping: ``--param`` values go to whichever
declares them, and the mapping's isl text gets the program's sizes and its own."""

from __future__ import annotations

from collections.abc import Mapping

from dtg.errors import SpecializationError
from dtg.lair import ast
from dtg.lair.specialize import Binding, binding_value, file_bindings, given
from dtg.mapping.spec import MappingSpec, bind_mapping


def program_parameters(module: ast.Module) -> set[str]:
    """The names a program's ``--param`` may bind: node parameters and ``let`` names."""
    names = {p.name for n in module.nodes for p in n.size_params}
    names |= {p.name for n in module.nodes for p in n.type_params}
    return names | {let.name for let in module.lets}


def split_params(module: ast.Module, spec: MappingSpec, params: Mapping[str, Binding]
                 ) -> tuple[dict[str, Binding], dict[str, int]]:
    """``params`` split into the program's and the mapping's; a name neither declares,
    or a type bound to a mapping parameter, is an error."""
    ours = {p.name for p in spec.params}
    theirs = program_parameters(module)
    for_program: dict[str, Binding] = {}
    for_mapping: dict[str, int] = {}
    for name, given_value in params.items():
        value = binding_value(name, given_value)
        if name in theirs:
            for_program[name] = value
        if name in ours:
            if not isinstance(value, int):
                raise SpecializationError(f"{given(name)} is {value}, but the mapping's "
                                          f"parameter '{name}' takes an integer")
            for_mapping[name] = value
        if name not in theirs and name not in ours:
            listed = "; ".join(
                f"{who}: {', '.join(sorted(names))}" for who, names in
                (("program", theirs), ("mapping", ours)) if names) or "none declared"
            raise SpecializationError(f"unknown {given(name)}: neither the program nor the "
                                      f"mapping declares it ({listed})")
    return for_program, for_mapping


def sizes(module: ast.Module, params: Mapping[str, Binding]) -> dict[str, int]:
    """The integer sizes a program is specialized with: its ``let`` values, overridden by
    ``params``."""
    values: dict[str, Binding] = {k: v for k, (v, _) in file_bindings(module).items()}
    values.update(params)
    return {k: v for k, v in values.items() if isinstance(v, int)}


def bound_mapping(module: ast.Module, spec: MappingSpec, params: Mapping[str, Binding]
                  ) -> MappingSpec:
    """The mapping with every parameter's value written in (``params`` as given on the
    command line, for both program and mapping)."""
    for_program, for_mapping = split_params(module, spec, params)
    theirs = program_parameters(module)
    if spec.direction:
        from dtg.mapping.direction import TILE_PARAMETERS

        for name in TILE_PARAMETERS:
            if name in theirs:
                raise SpecializationError(
                    f"the program has a parameter '{name}', which a direction-only placement "
                    f"uses for the tiling it chooses ({', '.join(TILE_PARAMETERS)}); rename "
                    "it or give the placement in full", spec.placement.loc)
    for param in spec.params:
        if param.name in theirs:
            raise SpecializationError(
                f"the mapping declares '{param.name}', which is also a parameter of the "
                "program; use the program's parameter or another name", param.loc)
    return bind_mapping(spec, {**sizes(module, for_program), **for_mapping})
