"""Fixed-seed fuzz batches through the three front ends, and the harness itself.

``benchmarks/fuzz.py`` runs the same generator at any size; these batches keep the suite
honest: no input may end in an internal error (a traceback, a crash) or a hang. Every run
of the suite fuzzes the first ``BATCH`` inputs; the long batches (``-m long``, run by CI
after the suite) the next ``LONG_CHUNKS`` x ``LONG_BATCH``.
"""

from __future__ import annotations

import time
from pathlib import Path

import fuzzing
import pytest

from dtg.errors import DtgError

BATCH = 200
SEED = 20240917
LONG_CHUNKS, LONG_BATCH = 4, 1000


def check_batch(start: int, count: int) -> None:
    """Inputs ``start`` to ``start + count - 1`` of the run with ``SEED``."""
    summary = fuzzing.run_cases(fuzzing.cases(SEED, count, start), jobs=2, timeout=20)
    assert summary.total == count
    bad = [f"#{case.index} {case.kind} ({case.origin}): {result.outcome}: {result.detail}"
           for case, result in summary.bad]
    assert not bad, "\n".join(bad)
    assert summary.counts["internal"] == summary.counts["hang"] == 0
    # the batch reaches past the parsers: every kind has accepted inputs and clean errors
    for kind in fuzzing.KINDS:
        assert summary.by_kind[kind]["clean"] > 0, kind
        assert summary.by_kind[kind]["accepted"] > 0, kind


def test_fixed_seed_batch_has_no_internal_error_and_no_hang() -> None:
    check_batch(0, BATCH)


@pytest.mark.long
@pytest.mark.parametrize("chunk", range(LONG_CHUNKS))
def test_long_fixed_seed_batch_has_no_internal_error_and_no_hang(chunk: int) -> None:
    check_batch(BATCH + chunk * LONG_BATCH, LONG_BATCH)


def test_corpus_covers_every_example_and_compiled_modules() -> None:
    seeds = fuzzing.corpus()
    names = {s.name for s in seeds}
    for path in fuzzing.EXAMPLES.rglob("*.lair"):
        assert str(path.relative_to(fuzzing.ROOT)) in names
    for path in fuzzing.EXAMPLES.rglob("*.map"):
        assert str(path.relative_to(fuzzing.ROOT)) in names
        assert f"{path.relative_to(fuzzing.ROOT)} (simd).pe" in names
    assert any(s.name.endswith("gemv_checkerboard.pe") for s in seeds)


def test_every_example_is_accepted_by_its_front_end(tmp_path: Path) -> None:
    for seed in fuzzing.corpus():
        case = fuzzing.Case(0, seed.kind, seed.text.encode(), seed.name, seed.program,
                            seed.params)
        result = fuzzing.run_case(case, tmp_path)
        assert result.outcome == "accepted", (seed.name, result.detail)


def test_cases_depend_only_on_seed_and_index() -> None:
    first = list(fuzzing.cases(7, 20))
    again = [fuzzing.make_case(7, k) for k in range(20)]
    assert first == again
    assert first != list(fuzzing.cases(8, 20))


def _slow(case: fuzzing.Case, path: Path, backend: bool = False) -> None:
    if case.index == 1:
        time.sleep(60)
    if case.index == 2:
        raise KeyError("a bug")
    if case.index == 3:
        raise DtgError("a user error")


def test_harness_tells_hangs_internal_errors_and_clean_errors_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuzzing, "check", _slow)  # the workers fork after this
    cases = [fuzzing.Case(k, "lair", b"", "test") for k in range(5)]
    summary = fuzzing.run_cases(cases, jobs=2, timeout=1.0)
    # (case 1 sleeps a minute: "hang" means the harness cut it at its timeout)
    outcomes = {case.index: result.outcome for case, result in summary.bad}
    assert outcomes == {1: "hang", 2: "internal"}
    assert summary.counts == {"accepted": 2, "clean": 1, "hang": 1, "internal": 1}
    detail = next(r.detail for c, r in summary.bad if c.index == 2)
    assert detail.startswith("KeyError: 'a bug'")
