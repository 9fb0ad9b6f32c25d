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
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from dtg.catalog import Example

# dtg is imported by the fixtures, not when pytest loads the plugin: a test session that
# uses none of them pays nothing


@pytest.fixture
def dtg_example() -> Callable[[str], Example]:
    """``dtg_example(name)``: a shipped example (``dtg.example``)."""
    from dtg.catalog import example

    return example


@pytest.fixture
def dtg_examples() -> list[Example]:
    """Every shipped example (``dtg.examples()``)."""
    from dtg.catalog import examples

    return examples()


@pytest.fixture
def dtg_compile() -> Callable[..., Any]:
    """``dtg_compile(program, mapping=None, **options)``: ``dtg.compile``."""
    from dtg.api import compile as compile_program

    return compile_program


@pytest.fixture
def dtg_simulate() -> Callable[..., Any]:
    """``dtg_simulate(compilation_or_module, **options)``: ``dtg.simulate``."""
    from dtg.api import simulate

    return simulate
