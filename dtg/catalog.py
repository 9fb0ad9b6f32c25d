"""The examples shipped in the package: fixtures for mapping research.

Every ``.map`` file of ``examples/`` is an example (its program is the ``.lair`` file
of the same stem, ``gemm.large.map`` maps ``gemm.lair``); so is every hand-written
``.pe`` module and every program without a mapping (the paper's listings). An
example's name is its path without suffix, shortened to the folder's name where the
folder holds one example of its own name: ``gemv``, ``fc/train``, ``polybench/gemm``,
``polybench/gemm.large``, ``handwritten/gemv_checkerboard``, ``paper/listing1``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dtg.errors import InputError

if TYPE_CHECKING:
    from dtg.api import Result
    from dtg.codegen.pipeline import Compilation

# the examples are package data (dtg/corpus links to examples/ in the repository)
CORPUS = Path(str(files("dtg").joinpath("corpus")))


@dataclass(frozen=True)
class Example:
    """A program with its mapping (or a hand-written PE module), and the sizes it is
    compiled with."""

    name: str
    program: Path | None  # the .lair file (None for a module without a reference)
    mapping: Path | None = None  # the .map file
    module: Path | None = None  # a hand-written .pe module
    params: dict[str, int] = field(default_factory=dict)

    @property
    def about(self) -> str:
        """The first comment line of its mapping, module or program."""
        source = self.mapping or self.module or self.program
        assert source is not None
        for line in source.read_text().splitlines():
            text = line.strip()
            if text.startswith(("#", "//")):
                return text.lstrip("#/ ").strip()
            if text:
                break
        return ""

    def compile(self, **options: Any) -> Compilation:
        """``dtg.compile`` of this example with its sizes (options as there)."""
        from dtg.api import compile as compile_program

        if self.mapping is None or self.program is None:
            raise InputError(f"example {self.name} has no mapping to compile")
        params = {**self.params, **options.pop("params", {})}
        return compile_program(self.program, self.mapping, params=params, **options)

    def simulate(self, **options: Any) -> Result:
        """Compile (when it has a mapping) and simulate; options of ``dtg.simulate``, and
        ``simd``, ``arrival``, ``params`` and ``fabric`` for the compiler."""
        from dtg.api import simulate

        if self.module is not None:
            return simulate(self.module, **options)
        compile_options = {k: options.pop(k) for k in ("simd", "arrival", "params", "fabric")
                           if k in options}
        return simulate(self.compile(**compile_options), **options)


def _name(relative: Path) -> str:
    stem = relative.name.split(".")[0]
    rest = relative.name[len(stem):].removesuffix(relative.suffix)
    folder = relative.parent.as_posix()
    if folder != "." and relative.parent.name == stem and not rest:
        return folder
    return (f"{folder}/" if folder != "." else "") + stem + rest


@cache
def _catalog() -> dict[str, Example]:
    params_file = CORPUS / "params.toml"
    sizes: dict[str, dict[str, int]] = (
        tomllib.loads(params_file.read_text()) if params_file.exists() else {})
    found: dict[str, Example] = {}
    mapped: set[Path] = set()
    for path in sorted(CORPUS.rglob("*.map")):
        program = path.with_name(path.name.split(".")[0] + ".lair")
        name = _name(path.relative_to(CORPUS))
        found[name] = Example(name, program if program.exists() else None, path,
                              params=dict(sizes.get(name, {})))
        mapped.add(program)
    for path in sorted(CORPUS.rglob("*.pe")):
        name = _name(path.relative_to(CORPUS))
        found[name] = Example(name, None, module=path)
    for path in sorted(CORPUS.rglob("*.lair")):
        if path not in mapped:
            name = _name(path.relative_to(CORPUS))
            found[name] = Example(name, path, params=dict(sizes.get(name, {})))
    return dict(sorted(found.items()))


def examples() -> list[Example]:
    """Every example shipped in the package, by name."""
    return list(_catalog().values())


def example(name: str) -> Example:
    """The example called ``name`` (see :func:`examples`)."""
    found = _catalog().get(name)
    if found is None:
        near = [n for n in _catalog() if name in n] or list(_catalog())[:8]
        raise InputError(f"no example called {name!r}; try one of: {', '.join(near)}")
    return found
