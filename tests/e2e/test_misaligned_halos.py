"""Halos between two tilings that do not line up in 2-D (issue 27): a 3 x 3 stencil
writing ``u`` in tiles of 17 and a second one reading it in tiles of 16. The part of a
sender's tile a receiver reads is then 1 to 3 rows of 15 to 17 columns, sizes varying in
both dimensions. Each part goes by one SIMD instruction all the same: the rows cut to a
length (`run ... length(...)`), the columns one of a few variants, every sender sending
its block at the largest number of columns so that blocks land with one stride and a
receiver copies its sender's variant out of it (`codegen.blocks._cut_and_variants`).
Where eight displacements take more configurations than a PE has, the configuration
budget takes the halo in two phases, the rows a PE below reads of its diagonal
neighbour relayed by the PE beside it even where that PE does not read them itself
(`codegen.direct.two_phase_halo`, ``relay``).

An independently written two-sweep stencil: 18.7x its bound (every element of ``u`` sent
as a (value, index) pair) -> 1.08x. Each case verified exactly on both engines, with and
without SIMD."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import alike_on_both_engines, exact_against_reference, write_pair
from hypothesis import given, settings
from hypothesis import strategies as st

import dtg


def two_sweeps(mesh: tuple[int, int], first: int, second: int, n: int) -> tuple[str, str]:
    """``u = w * x`` (``(n + 2)`` square) in tiles of ``first``, then ``v = w2 * u``
    (``n`` square) in tiles of ``second``, on ``mesh`` PEs (the last tiles take the
    rest: ``min``)."""
    w, h = mesh
    u, x = n + 2, n + 4
    return (f"lair s1(): float32 x[{x}][{x}], float32 w[3][3] -> float32 u[{u}][{u}]\n"
            f"{{ all (i, j, a, b) in ({u}, {u}, 3, 3) u[i][j] += x[i + a][j + b] * w[a][b] }}\n"
            f"lair s2(): float32 u[{u}][{u}], float32 w2[3][3] -> float32 v[{n}][{n}]\n"
            f"{{ all (i, j, a, b) in ({n}, {n}, 3, 3) v[i][j] += u[i + a][j + b] * w2[a][b] }}\n",
            f"rectangle {{ PE[{w}, {h}] }}\n"
            f"placement {{ s1[i, j, a, b] -> PE[min(j//{first}, {w - 1}), "
            f"min(i//{first}, {h - 1})]; s2[i, j, a, b] -> PE[min(j//{second}, {w - 1}), "
            f"min(i//{second}, {h - 1})] }}\n"
            f"input x resident\ninput w resident\ninput w2 resident\noutput v resident\n")


PAIRS = {
    # receivers read their neighbours on both sides: 8 displacements, in two phases
    "wider_first": two_sweeps((4, 4), 17, 16, 64),
    # receivers read only the PEs after them: 3 displacements, in one
    "narrower_first": two_sweeps((4, 4), 16, 17, 62),
    "rectangle": two_sweeps((4, 2), 17, 16, 64),
}


def _sends(path: Path) -> list[str]:
    compiled = dtg.compile(path)
    assert compiled.module is not None
    return sorted(c.name for c in compiled.module.programs[0].configs
                  if c.name.startswith("out_u") and c.name.endswith("_send"))


def test_parts_varying_in_both_dimensions_go_by_simd(tmp_path: Path) -> None:
    path = write_pair(tmp_path, *PAIRS["narrower_first"])
    compiled = dtg.compile(path)
    assert compiled.module is not None
    configs = {c.name: c for c in compiled.module.programs[0].configs}
    assert "send(" not in dtg.module_text(compiled)  # (no (value, index) pairs)
    sends = [c for name, c in configs.items() if name.startswith("out_u_")
             and name.endswith("_send")]
    assert len(sends) == 3
    for send in sends:
        receive = configs[send.name.removesuffix("_send") + "_recv"]
        # (sent at the largest size, received as its sender's variant of it)
        assert len(send.variants) == 1 and len(receive.variants) > 1
        assert max(receive.variants, key=lambda v: v[1]) == send.variants[0]
    assert " length(" in dtg.module_text(compiled)


def test_eight_displacements_go_in_two_phases(tmp_path: Path) -> None:
    path = write_pair(tmp_path, *PAIRS["wider_first"])
    assert _sends(path) == [f"out_u_{k}_send" for k in range(4)]
    text = dtg.module_text(dtg.compile(path))
    assert "send(" not in text and "got_u_b" in text


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("simd", [True, False])
def test_misaligned_halos_verify_on_both_engines(tmp_path: Path, name: str,
                                                 simd: bool) -> None:
    alike_on_both_engines(write_pair(tmp_path, *PAIRS[name]), simd=simd)


@settings(max_examples=10, deadline=None)
@given(st.sampled_from([(2, 2), (3, 2), (2, 3), (3, 3), (4, 2)]),
       st.sampled_from([(9, 8), (8, 9), (10, 8), (7, 8), (9, 7)]), st.integers(0, 3))
def test_random_misaligned_sweeps_compute_the_program(
        mesh: tuple[int, int], tiles: tuple[int, int], seed: int) -> None:
    """Two sweeps in tiles of different sizes on random meshes: exact against the
    reference."""
    first, second = tiles
    n = second * max(mesh)
    lair, mapping = two_sweeps(mesh, first, second, n)
    exact_against_reference(lair, mapping, seed=seed)
