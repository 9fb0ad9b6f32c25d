"""pytest fixtures for mapping research (registered through the ``pytest11`` entry
point, so a test suite that has dtg installed has them without a conftest)::

    def test_my_gemv_mapping(dtg_example, dtg_compile, dtg_simulate):
        gemv = dtg_example("gemv")
        c = dtg_compile(gemv.program, "my_gemv.map")
        r = dtg_simulate(c)
        assert r.verified and r.cycles <= 60
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dtg.api import Result, compile, simulate
from dtg.catalog import Example, example, examples
from dtg.codegen.pipeline import Compilation


@pytest.fixture
def dtg_example() -> Callable[[str], Example]:
    """``dtg_example(name)``: a shipped example (``dtg.example``)."""
    return example


@pytest.fixture
def dtg_examples() -> list[Example]:
    """Every shipped example (``dtg.examples()``)."""
    return examples()


@pytest.fixture
def dtg_compile() -> Callable[..., Compilation]:
    """``dtg_compile(program, mapping=None, **options)``: ``dtg.compile``."""
    return compile


@pytest.fixture
def dtg_simulate() -> Callable[..., Result]:
    """``dtg_simulate(compilation_or_module, **options)``: ``dtg.simulate``."""
    return simulate
