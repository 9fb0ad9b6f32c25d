"""Properties: random small 1-D and 2-D convolutions (and filter gradients) with random
sizes, placements and stream kinds compile with whatever SIMD case applies, and the
simulated outputs equal the reference exactly."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtg.pesim.run import run_program


@st.composite
def conv1d(draw: st.DrawFn) -> tuple[str, str, str]:
    k = draw(st.integers(1, 3))
    n = draw(st.integers(3, 12))
    r = draw(st.integers(1, min(4, n)))
    out = n - r + 1
    gradient = draw(st.booleans())
    kind = draw(st.sampled_from(["sparse", "dense"]))
    layout = draw(st.sampled_from(["column", "row", "single"]))
    if gradient:
        lair = (f"lair C(): float16 x[{n}], float16 g[{k}][{out}] -> float16 y[{k}][{r}]\n"
                f"{{ all (k, w, r) in ({k}, {out}, {r}) y[k][r] += x[w + r] * g[k][w] }}\n")
        other = "g"
    else:
        lair = (f"lair C(): float16 x[{n}], float16 W[{k}][{r}] -> float16 y[{k}][{out}]\n"
                f"{{ all (k, w, r) in ({k}, {out}, {r}) y[k][w] += x[w + r] * W[k][r] }}\n")
        other = "W"
    rect, place, source = {
        "column": (f"PE[1, {k}]", "PE[0, k]", "PE[0, -1]"),
        "row": (f"PE[{k}, 1]", "PE[k, 0]", "PE[-1, 0]"),
        "single": ("PE[1, 1]", "PE[0, 0]", "PE[0, -1]"),
    }[layout]
    mapping = (f"rectangle {{ {rect} }}\nplacement {{ C[k, w, r] -> {place} }}\n"
               f"input x {kind} {{ x[i = 0:{n - 1}] -> [{source} -> index[i]] }}\n"
               f"input {other} resident\noutput y resident\n")
    return lair, mapping, f"1d {layout} {kind} {'grad' if gradient else 'conv'}"


@st.composite
def conv2d(draw: st.DrawFn) -> tuple[str, str, str]:
    k = draw(st.integers(1, 2))
    n = draw(st.integers(3, 6))
    r = draw(st.integers(1, min(3, n)))
    out = n - r + 1
    layout = draw(st.sampled_from(["column", "single"]))
    rect, place = {"column": (f"PE[1, {k}]", "PE[0, k]"),
                   "single": ("PE[1, 1]", "PE[0, 0]")}[layout]
    lair = (f"lair C(): float16 x[{n}][{n}], float16 W[{k}][{r}][{r}] -> "
            f"float16 y[{k}][{out}][{out}]\n"
            f"{{ all (k, w, h, a, b) in ({k}, {out}, {out}, {r}, {r}) "
            f"y[k][w][h] += x[w + a][h + b] * W[k][a][b] }}\n")
    mapping = (f"rectangle {{ {rect} }}\nplacement {{ C[k, w, h, a, b] -> {place} }}\n"
               f"input x sparse {{ x[i = 0:{n - 1}, j = 0:{n - 1}] -> "
               f"[PE[0, -1] -> index[i, j]] }}\n"
               "input W resident\noutput y resident\n")
    return lair, mapping, f"2d {layout}"


FIXTURE = [HealthCheck.function_scoped_fixture]


def check(case: tuple[str, str, str], tmp: Path, seed: int) -> None:
    lair, mapping, label = case
    (tmp / "p.lair").write_text(lair)
    (tmp / "p.map").write_text(mapping)
    for simd in (True, False):
        result = run_program(tmp / "p.lair", simd=simd, seed=seed)
        assert result.comparison.verified, (label, simd, result.comparison.mismatch)
        assert result.comparison.exact


@settings(max_examples=25, deadline=None, suppress_health_check=FIXTURE)
@given(conv1d(), st.integers(0, 1000))
def test_random_1d_convolutions(tmp_path: Path, case: tuple[str, str, str], seed: int) -> None:
    check(case, tmp_path, seed)


@settings(max_examples=10, deadline=None, suppress_health_check=FIXTURE)
@given(conv2d(), st.integers(0, 1000))
def test_random_2d_convolutions(tmp_path: Path, case: tuple[str, str, str], seed: int) -> None:
    check(case, tmp_path, seed)
