"""Shared helpers for the test suite."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
# every program with a mapping beside it (the paper's listings in paper/ have none)
def flat(table: str) -> str:
    """A printed table's words in one line (rich wraps the cells)."""
    return " ".join(re.sub(r"[\u2500-\u257f]", " ", table).split())


EXAMPLE_PROGRAMS = sorted(p for p in EXAMPLES.glob("*/*.lair") if p.with_suffix(".map").exists())


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


# Tests run on loaded machines and in parallel (pytest -n auto): Hypothesis' default
# limit of 200 ms per example would fail them by chance, not by a bug.
# CI draws the same examples on every run (Hypothesis' derandomized seed), so that a red
# CI is a change of the code, reproducible with CI=true, never a newly drawn case; local
# runs keep drawing new ones.
settings.register_profile("dtg", deadline=None)
settings.register_profile("dtg-ci", deadline=None, derandomize=True, database=None)
settings.load_profile("dtg-ci" if os.environ.get("CI") else "dtg")


def pytest_configure(config: pytest.Config) -> None:
    """Markers are registered in pyproject.toml. ``DTG_UPDATE_PINS=1`` rewrites shared pin
    files (tests/run_pins.py, tests/e2e): parallel workers would lose each other's pins,
    so that run stays in one process (this runs before xdist starts its workers)."""
    if os.environ.get("DTG_UPDATE_PINS") and getattr(config.option, "numprocesses", None):
        config.option.numprocesses = 0
        config.option.dist = "no"
        config.option.tx = []
    if not hasattr(config, "workerinput"):  # in the controller, before any worker starts
        _compile_fast_engine()


def _compile_fast_engine() -> None:
    """Tests run the compiled engine in every worker: compiled (and cached) here first,
    a new machine pays the compile once, not once per worker at the same time."""
    from dtg.pesim.engines import needs_compiling

    if not needs_compiling():
        return
    import dtg

    print("compiling the fast engine once for the test run (about half a minute)", flush=True)
    dtg.simulate(dtg.compile(EXAMPLES / "gemv" / "gemv.lair"), engine="fast")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The random batches take the longest: started first, they do not leave one worker
    running them alone at the end of a parallel run (the sort keeps every other order)."""
    items.sort(key=lambda item: item.get_closest_marker("random") is None)


def write_pair(directory: Path, lair: str, mapping: str) -> Path:
    """Write a program and its mapping (dedented) into ``directory`` as ``p.lair`` and
    ``p.map``; the program's path."""
    import textwrap

    (directory / "p.lair").write_text(textwrap.dedent(lair))
    (directory / "p.map").write_text(textwrap.dedent(mapping))
    return directory / "p.lair"


def verify_pair(directory: Path, lair: str, mapping: str, *, simd: bool,
                seeds: Sequence[int] = (0, 1)) -> None:
    """Write a program and its mapping (dedented) into ``directory``, compile and simulate
    them, and check every output against the reference interpreter for each seed."""
    from dtg.pesim.run import run_program

    write_pair(directory, lair, mapping)
    for seed in seeds:
        outcome = run_program(directory / "p.lair", simd=simd, seed=seed)
        assert outcome.comparison.verified, outcome.comparison.mismatch


def exact_against_reference(lair: str, mapping: str, *, seed: int) -> None:
    """Compile and simulate a program and its mapping (in a directory of their own) and
    check every output exactly against the reference interpreter."""
    import tempfile

    from dtg.pesim.run import run_program

    with tempfile.TemporaryDirectory() as tmp:
        outcome = run_program(write_pair(Path(tmp), lair, mapping), seed=seed)
        assert outcome.comparison.verified and outcome.comparison.exact, (lair, mapping)


def alike_on_both_engines(path: Path, *, simd: bool, seed: int = 1) -> None:
    """Simulate ``path`` on the simpy and the fast engine: both verify exactly against
    the reference interpreter, in the same number of cycles."""
    from dtg.pesim.run import run_program

    cycles = set()
    for engine in ("simpy", "fast"):
        outcome = run_program(path, simd=simd, seed=seed, engine=engine)
        assert outcome.comparison.verified and outcome.comparison.exact
        cycles.add(outcome.result.cycles)
    assert len(cycles) == 1, cycles
