"""Shared helpers for the test suite."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
EXAMPLE_PROGRAMS = sorted(EXAMPLES.glob("*/*.lair"))


class CliResult:
    def __init__(self, status: int, out: str, err: str):
        self.status, self.out, self.err = status, out, err


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run a ``main(argv)`` in-process and capture its status and streams."""

    def run(main: Callable[[Sequence[str]], int], *argv: str | Path) -> CliResult:
        status = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return CliResult(status, captured.out, captured.err)

    return run


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "random: random differential tests of compiler and simulator "
        "(tests/random; DTG_RANDOM_EXAMPLES=N sets the number of pairs)")
