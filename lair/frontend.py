"""The LAIR front end in one call: parse, specialize, check, lower."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dtg.lair import ast
from dtg.lair.check import analyze
from dtg.lair.graph import Graph
from dtg.lair.lower import PolyModel, lower
from dtg.lair.parser import parse, parse_file
from dtg.lair.specialize import Binding, specialize


@dataclass(frozen=True)
class Program:
    """A LAIR program at every front-end stage, for drivers that stop at any of them."""

    source: ast.Module
    specialized: ast.Module
    graph: Graph
    model: PolyModel


def from_source(source: ast.Module, params: Mapping[str, Binding] | None = None) -> Program:
    """A parsed program, specialized, checked and lowered."""
    specialized = specialize(source, params)
    graph = analyze(specialized)
    return Program(source, specialized, graph, lower(graph))


def load_program(path: str | Path, params: Mapping[str, Binding] | None = None) -> Program:
    return from_source(parse_file(path), params)


def program_from_text(text: str, params: Mapping[str, Binding] | None = None,
                      file: str = "<string>") -> Program:
    return from_source(parse(text, file), params)
