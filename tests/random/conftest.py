"""The ``random`` marker: random differential tests (``DTG_RANDOM_EXAMPLES=N`` runs more)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "random: random differential tests of compiler and simulator; "
        "DTG_RANDOM_EXAMPLES=N sets the number of pairs, DTG_RANDOM_SHRINK=1 shrinks failures")
