"""The layers: ``dtg.pe`` (the PE code) sits below the compiler and the simulator, and
``dtg.errors`` below everything. A module that imports upwards would tie the two ends
of the pipeline together again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imports(path: Path) -> set[str]:
    """Every ``dtg.`` module a file imports, at any depth (lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {name for name in found if name.startswith("dtg.")}


@pytest.mark.parametrize("path", sorted((ROOT / "pe").glob("*.py")), ids=lambda p: p.name)
def test_the_pe_code_imports_neither_the_compiler_nor_the_simulator(path: Path) -> None:
    upwards = {m for m in imports(path)
               if m.startswith(("dtg.codegen", "dtg.pesim", "dtg.mapping", "dtg.api"))}
    assert not upwards, f"{path.name} imports {sorted(upwards)}"


def test_the_errors_import_nothing_of_dtg() -> None:
    assert imports(ROOT / "dtg" / "errors.py") == set()


@pytest.mark.parametrize("path", sorted((ROOT / "codegen").glob("*.py")), ids=lambda p: p.name)
def test_the_compiler_reaches_the_simulator_only_to_run_what_it_compiled(path: Path) -> None:
    """Only the driver (``dtg-codegen --simulate``) may call the simulator."""
    simulator = {m for m in imports(path) if m.startswith("dtg.pesim")}
    allowed = {"dtg.pesim.run", "dtg.pesim.run.make_inputs", "dtg.pesim.run.run_module"}
    if path.name == "driver.py":
        simulator -= allowed
    assert not simulator, f"{path.name} imports {sorted(simulator)}"
