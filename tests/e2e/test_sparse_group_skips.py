"""Sparse streams taken in batches of whole groups skip the batches with nothing sent
(issue 27): their zeros contribute nothing, as a window with nothing sent never opens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import write_pair

from dtg.pesim.run import run_program

SPARSE_GROUPS = ("""
    lair cm(): float32 X[8][16][64], float32 M[64][32] -> float32 Y[8][16][32]
    { all (c, i, o, kk) in (8, 16, 32, 64) Y[c][i][o] += X[c][i][kk] * M[kk][o] }
    """, """
    rectangle { PE[4, 4] }
    placement { cm[c, i, o, kk] -> PE[i//4, c//2] }
    input X sparse { X[c = 0:7, i = 0:15, kk = 0:63] -> [PE[-1, c//2] -> index[c mod 2, i, kk]] }
    input M resident
    output Y resident
    """)


@pytest.mark.parametrize("engine", ["simpy", "fast"])
def test_whole_groups_of_a_sparse_stream_with_nothing_sent_are_skipped(
        tmp_path: Path, engine: str) -> None:
    """A helper's sparse stream taken in batches of whole groups computed over every slot
    of a batch with nothing sent: 16,427 cycles for an all-zero input against a bound of
    4. Such a batch is now skipped (its zeros contribute nothing), as a window with
    nothing sent never opens; a batch with some elements sent computes as before."""
    path = write_pair(tmp_path, *SPARSE_GROUPS)
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, (8, 16, 64)).astype(np.float32)
    m = rng.integers(-3, 4, (64, 32)).astype(np.float32)
    cycles = []
    for zeros in (slice(None), slice(0, 4), slice(0, 0)):
        given = x.copy()
        given[zeros] = 0
        np.savez(tmp_path / "in.npz", X=given, M=m)
        outcome = run_program(path, inputs_path=tmp_path / "in.npz", engine=engine)
        assert outcome.comparison.verified and outcome.comparison.exact
        cycles.append(outcome.result.cycles)
    assert cycles[0] < 100 < cycles[1] < cycles[2], cycles
