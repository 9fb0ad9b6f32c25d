"""Random differential testing: random valid programs with random well-formed mappings
(``strategies.py``), each compiled with and without SIMD, simulated and compared with the
reference interpreter (``differential.py``). A pair may be rejected with a located error;
it must never give wrong outputs, an internal error, an unlocated error, or a different
answer with and without SIMD.

Every run of the suite draws a small batch (``DTG_RANDOM_EXAMPLES=N`` pairs, default 80,
about half a minute); the long batch (``-m long``, CI runs it after the suite) draws 600
more in chunks of 60, each its own test so that pytest shows it advance.
``DTG_RANDOM_SEED=S`` draws other batches. A whole batch runs and the failures are
listed, grouped, with the smallest pair of each group; ``DTG_RANDOM_SHRINK=1`` instead
lets Hypothesis shrink every kind of failure to a minimal pair.
``benchmarks/bench_random.py`` runs larger batches in parallel and saves failing pairs.
"""

from __future__ import annotations

import os
import time
from collections import Counter, defaultdict

import pytest
from differential import FAILURES, Outcome, hypothesis_batch

EXAMPLES = int(os.environ.get("DTG_RANDOM_EXAMPLES", "80"))
SEED = int(os.environ.get("DTG_RANDOM_SEED", "20250109"))
SHRINK = os.environ.get("DTG_RANDOM_SHRINK", "") not in ("", "0")
LONG_CHUNKS, LONG_CHUNK = 10, 60  # chunk k draws with seed SEED + 1 + k


def check_batch(examples: int, seed: int) -> None:
    """Draw ``examples`` pairs with ``seed`` and fail with every group of failing pairs."""
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    groups: dict[str, list[tuple[int, str, str, str, Outcome]]] = defaultdict(list)
    start = time.perf_counter()

    def record(lair: str, mapping: str, description: str, outcome: Outcome | None) -> None:
        assert outcome is not None
        counts[outcome.outcome] += 1
        if outcome.outcome == "rejected":
            reasons[outcome.reason] += 1
        if outcome.failed:
            groups[outcome.key].append((len(lair) + len(mapping), lair, mapping, description,
                                        outcome))

    shrunk = hypothesis_batch(examples, seed, shrink=SHRINK, callback=record)
    seconds = time.perf_counter() - start
    total = sum(counts.values())
    print(f"\n{total} pairs (seed {seed}) in {seconds:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    for reason, n in reasons.most_common():
        print(f"  {n:4} rejected: {reason}")
    assert not shrunk, "shrunk failures:\n\n" + "\n\n".join(s.text for s in shrunk)
    report = []
    for key, found in sorted(groups.items(), key=lambda g: -len(g[1])):
        _, lair, mapping, description, outcome = min(found, key=lambda f: f[0])
        first = outcome.detail.splitlines()[0] if outcome.detail else ""
        report.append(f"{len(found)} x {key}\n# {description}\n{lair}{mapping}{first}\n")
    assert not report, (f"{sum(len(g) for g in groups.values())} of {total} pairs failed "
                        f"({', '.join(sorted(FAILURES & set(counts)))}):\n\n"
                        + "\n".join(report))
    assert total >= min(examples, 300), f"only {total} pairs were drawn"
    # pairs are compiled and run, not only refused (a batch of 60 to 80 may have no
    # refusal at all: most drawn pairs compile)
    assert counts["verified"] > 0, counts


@pytest.mark.random
def test_random_pairs_are_verified_or_rejected_with_a_located_error() -> None:
    check_batch(EXAMPLES, SEED)


@pytest.mark.random
@pytest.mark.long
@pytest.mark.parametrize("chunk", range(LONG_CHUNKS))
def test_long_batch_of_random_pairs(chunk: int) -> None:
    check_batch(LONG_CHUNK, SEED + 1 + chunk)
