"""Inputs beyond the simulator's budget and runs that would never end: each is a quick,
clear error (exit status 1), never a MemoryError, a hang or a traceback
(``docs/limits.md``)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES
from pesim_support import GEMV_PE, sim
from test_pesim_cli import copy_gemv

from dtg.errors import LimitError
from dtg.lair.limits import (
    FAST_BYTES_PER_PE,
    FAST_BYTES_PER_ROUTE,
    MAX_COLORS,
    MAX_INPUT_ARRAY_BYTES,
    MAX_SIM_BYTES,
    memory_limit,
)
from dtg.pesim.cli import main
from dtg.pesim.routers import RouteCycleError, TimeLimitError

SECRET = "SECRET-CONTENT-7731"


def run_quickly(cli, *args: object, seconds: float = 10.0):
    start = time.monotonic()
    result = cli(main, *args)
    assert time.monotonic() - start < seconds, "took too long"
    assert result.status == 1, result.err
    assert "Traceback" not in result.err and "internal error" not in result.err
    return result


# ---------------------------------------------------------------------- --config


@pytest.mark.parametrize("text, message", [
    ("colors = 10000000\n", f"setting 'colors' in {{}} is 10000000; expected at least 1 and at "
                            f"most {MAX_COLORS}"),
    ("clock_mhz = nan\n", "setting 'clock_mhz' in {} is nan; expected a finite number"),
    ("clock_mhz = inf\n", "setting 'clock_mhz' in {} is inf; expected a finite number"),
    ("clock_mhz = -850.0\n", "setting 'clock_mhz' in {} is -850.0; expected a finite number"),
    ("scalar_op = -1\n", "setting 'scalar_op' in {} is -1; expected at least 0"),
    ("hop_cycles = 1000000000000\n", "setting 'hop_cycles' in {} is 1000000000000; expected "
                                     "at least 1 and at most 2147483647"),
    ("cycle_limit = 9223372036854775807\n", "setting 'cycle_limit' in {} is "
                                            "9223372036854775807; expected at least 1"),
    ("memory_bytes = 1099511627776\n", "setting 'memory_bytes' in {} is 1099511627776"),
])
def test_config_values_outside_their_range(cli, tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "fabric.toml"
    config.write_text(text)
    result = run_quickly(cli, GEMV_PE, "--config", config)
    assert message.format(config) in result.err


def test_config_nested_1000_deep_is_a_located_error(cli, tmp_path: Path) -> None:
    config = tmp_path / "fabric.toml"
    config.write_text("colors = 4\nx = " + "[" * 1000 + "]" * 1000 + "\n")
    result = run_quickly(cli, GEMV_PE, "--config", config)
    assert result.err.startswith(f"{config}:2:21: error: arrays or tables nested more than 16 "
                                 "levels deep")


@pytest.mark.parametrize("kind", ["binary", "module", "directory", "device", "long value"])
def test_a_config_of_the_wrong_kind_is_refused_without_echo(cli, tmp_path: Path,
                                                           kind: str) -> None:
    config = tmp_path / "fabric.toml"
    if kind == "binary":
        config.write_bytes(SECRET.encode() + b"\x00\xff\xfe" * 100)
    elif kind == "module":
        config.write_text(f"module {SECRET}\n" + GEMV_PE.read_text())
    elif kind == "directory":
        config.mkdir()
    elif kind == "device":
        config = Path("/dev/zero")
    else:
        config.write_text(f'colors = "{SECRET}{"x" * 100_000}"\n')
    result = run_quickly(cli, GEMV_PE, "--config", config)
    assert SECRET not in result.err
    assert len(result.err) < 400


def test_a_config_of_unknown_keys_lists_a_few(cli, tmp_path: Path) -> None:
    config = tmp_path / "fabric.toml"
    config.write_text("".join(f"key{k} = 1\n" for k in range(1000)))
    result = run_quickly(cli, GEMV_PE, "--config", config)
    assert "unknown settings key0, key1, key10, key100, key101 and 995 more" in result.err


# ------------------------------------------------------------- seed and inputs


@pytest.mark.parametrize("seed", ["-1", "1e3", "99999999999999999999999"])
def test_bad_seed_is_a_usage_error(cli, seed: str) -> None:
    result = run_quickly(cli, GEMV_PE, "--seed", seed)
    assert "argument --seed: expected an integer from 0 to 9223372036854775807" in result.err


@pytest.mark.parametrize("seconds", ["0", "-5", "nan", "inf", "soon"])
def test_bad_max_seconds_is_a_usage_error(cli, seconds: str) -> None:
    result = run_quickly(cli, GEMV_PE, "--max-seconds", seconds)
    assert "argument --max-seconds: expected a positive number of seconds" in result.err


def test_an_npy_file_as_inputs_says_npz(cli, tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.zeros(16))
    result = run_quickly(cli, GEMV_PE, "--inputs", path)
    assert f"error: {path} is a single .npy array; --inputs takes an .npz archive" in result.err


@pytest.mark.parametrize("kind", ["directory", "device", "text"])
def test_inputs_of_the_wrong_kind(cli, tmp_path: Path, kind: str) -> None:
    path = {"directory": tmp_path, "device": Path("/dev/zero"),
            "text": tmp_path / "in.npz"}[kind]
    if kind == "text":
        path.write_text(SECRET)
    result = run_quickly(cli, GEMV_PE, "--inputs", path)
    assert SECRET not in result.err


def never_allocate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the paths that allocate inputs fail loudly, should a run reach them."""
    from dtg.pesim import run

    def allocated(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the inputs were allocated")

    monkeypatch.setattr(run, "random_inputs", allocated)
    monkeypatch.setattr(run.np, "load", allocated)


def npz_claiming(path: Path, shape: tuple[int, ...]) -> Path:
    """An .npz whose W.npy header declares ``shape`` while holding 64 bytes."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f2", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("W.npy", header.getvalue() + bytes(64))
        x = io.BytesIO()
        np.save(x, np.zeros(16, np.float16))
        archive.writestr("x.npy", x.getvalue())
    return path


def test_an_npz_whose_header_claims_a_trillion_elements(cli, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = npz_claiming(tmp_path / "bomb.npz", (1_000_000, 1_000_000))
    assert path.stat().st_size < 1000
    never_allocate(monkeypatch)
    result = cli(main, GEMV_PE, "--inputs", path)
    assert result.status == 1 and "Traceback" not in result.err
    assert result.err == (f"error: {path}: W.npy declares 1000000 x 1000000 float16 elements "
                          "(2000000000000 bytes); the arrays take more than the limit of "
                          f"{MAX_INPUT_ARRAY_BYTES} bytes (nothing was loaded)\n")


@pytest.mark.parametrize("damage, message", [
    (lambda data: data.replace(b"\x93NUMPY", b"\x93NUMPX"), "W.npy is not a .npy array"),
    (lambda data: data.replace(b"\x93NUMPY\x01", b"\x93NUMPY\x07"),
     "W.npy is a .npy array of format 7.0"),
])
def test_an_npz_member_that_is_no_npy_array(cli, tmp_path: Path, damage, message: str) -> None:  # type: ignore[no-untyped-def]
    import zipfile

    path = npz_claiming(tmp_path / "in.npz", (32, 16))
    with zipfile.ZipFile(path) as archive:
        data = archive.read("W.npy")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("W.npy", damage(data))
    result = cli(main, GEMV_PE, "--inputs", path)
    assert result.status == 1 and message in result.err


def test_a_reference_sized_beyond_memory_is_a_located_error(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled GEMV whose reference line was edited to N = 10**9."""
    from dtg.codegen.driver import main as codegen

    assert cli(codegen, EXAMPLES / "gemv" / "gemv.lair", "-o", tmp_path).status == 0
    module = tmp_path / "gemv.pe"
    lines = module.read_text().splitlines()
    lines[2] += " N=1000000000"
    module.write_text("\n".join(lines) + "\n")
    never_allocate(monkeypatch)
    result = cli(main, module)
    assert result.status == 1 and "Traceback" not in result.err
    assert result.err.startswith(
        f"{module}:3:1: error: the inputs of the reference program gemv.lair "
        "(W[32][1000000000] float16, x[1000000000] float16) take 66000000000 bytes, more than "
        f"the limit of {MAX_INPUT_ARRAY_BYTES}; simulate smaller sizes")


def test_every_tensor_of_the_reference_counts(cli, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs within their budget, but an output too large for the interpreter."""
    program = tmp_path / "big.lair"
    program.write_text("let N = 4\nlair big<T=float32>(N):\n  T x[N] -> T y[N][N][N]\n{\n"
                       "  all (i, j, k) in (N, N, N)\n    y[i][j][k] = x[i]\n}\n")
    from dtg.lair.frontend import load_program
    from dtg.pesim.sources import check_tensor_sizes

    with pytest.raises(LimitError, match=rf"the tensors of the program \(x\[1024\] float32, "
                                         rf"y\[1024\]\[1024\]\[1024\] float32\) take "
                                         rf"4294971392 bytes, more than the limit of "
                                         rf"{MAX_SIM_BYTES} for checking a run"):
        check_tensor_sizes(load_program(program, {"N": 1024}).graph)


# ---------------------------------------------------- modules beyond the fabric


@pytest.mark.parametrize("old, new, message", [
    ("0 <= y <= 3 }", "0 <= y <= 2147483648 }", "program gemv runs on PE[0, 4], outside the "
                                                "mesh PE[4, 4]"),
    ("origin PE[0, 0]", "origin PE[1000000000000, 0]",
     "program gemv runs on PE[1000000000000, 0], outside the mesh"),
    ("PE[j//4, -1]", "PE[1000000000000 + j//4, -1]",
     "input stream x arrives from PE[1000000000000, -1], which is not next to the mesh"),
    ("x[j = 0:15] -> [PE[j//4, -1] -> index[j mod 4]]",
     "x[j = 0:2147483647] -> [PE[0, -1] -> index[j]]",
     "the relation of input stream x names x[16], outside its shape [16]"),
])
def test_sets_beyond_the_mesh_are_refused_before_enumeration(cli, tmp_path: Path, old: str,
                                                             new: str, message: str) -> None:
    path = copy_gemv(tmp_path, old, new)
    result = run_quickly(cli, path)
    assert message in result.err


def test_a_mesh_beyond_the_memory_budget_is_refused_before_allocation(
        cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DTG_MEMORY_LIMIT", str(1 << 30))
    path = copy_gemv(tmp_path, "mesh PE[4, 4]", "mesh PE[1024, 1024]")
    path.write_text(path.read_text().replace("0 <= x <= 3 and 0 <= y <= 3",
                                             "0 <= x <= 1023 and 0 <= y <= 1023"))
    result = run_quickly(cli, path)
    assert (f"{path}:8:8: error: simulating module gemv_checkerboard (1048576 PEs running "
            "programs) on the fast engine needs about") in result.err
    assert f"more than the limit of {memory_limit()}" in result.err


def test_the_memory_limit_is_the_users_to_set(cli, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64 x 64 mesh estimated on each engine against a limit set between the two."""
    from dtg.pe.parser import parse_module
    from dtg.pesim.engines import check_budget
    from dtg.pesim.sim import simulation_bytes

    path = copy_gemv(tmp_path, "mesh PE[4, 4]", "mesh PE[64, 64]")
    path.write_text(path.read_text().replace("0 <= x <= 3 and 0 <= y <= 3",
                                             "0 <= x <= 63 and 0 <= y <= 63"))
    module = parse_module(path.read_text())
    simpy = simulation_bytes(module)[1]
    fast = simulation_bytes(module, per_pe=FAST_BYTES_PER_PE, per_route=FAST_BYTES_PER_ROUTE)[1]
    assert fast < simpy
    monkeypatch.setenv("DTG_MEMORY_LIMIT", str((fast + simpy) // 2))
    check_budget(module, engine="fast")
    with pytest.raises(LimitError, match="on the simpy engine needs about"):
        check_budget(module, engine="simpy")


def test_a_reference_of_the_wrong_kind_is_refused_without_echo(cli, tmp_path: Path) -> None:
    binary = tmp_path / "ref.lair"
    binary.write_bytes(b"\xff" + SECRET.encode())
    path = copy_gemv(tmp_path, '"../../gemv/gemv.lair"', f'"{binary}"')
    result = run_quickly(cli, path)
    assert SECRET not in result.err and "is not UTF-8 text" in result.err
    path = copy_gemv(tmp_path / "b", '"../../gemv/gemv.lair"', f'"{tmp_path}"')
    assert "is a directory" in run_quickly(cli, path).err


# ------------------------------------------------------------------- runaways

PING_PONG = """
module t
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[1] store y;
  route 0: RAMP -> E if (PE_X == 0);
  route 0: E -> E if (PE_X == 0);
  route 0: W -> W, RAMP if (PE_X == 1);
  task main {
    if (PE_X == 0) { send(0, 1.0); }
  }
}
"""


def test_a_route_cycle_is_reported_with_its_pes_and_color() -> None:
    start = time.monotonic()
    with pytest.raises(RouteCycleError) as err:
        sim(PING_PONG, {}, {"y": ((2,), "float32")})
    assert time.monotonic() - start < 5
    assert err.value.format().startswith(
        "error: a wavelet on color 0 enters a cycle of routes at PE[1, 0] at cycle ")
    assert "PE[1, 0] from W -> PE[0, 0] from E -> PE[1, 0] again (2 routers)" in str(err.value)


def test_a_route_cycle_through_the_cli_is_exit_1(cli, tmp_path: Path) -> None:
    path = copy_gemv(tmp_path, "route 0: N -> RAMP if (PE_Y == 3);",
                     "route 0: N -> RAMP, N if (PE_Y == 3);")
    path.write_text(path.read_text().replace("route 0: N -> RAMP, S if (PE_Y < 3);",
                                             "route 0: N -> RAMP, S if (PE_Y < 3);\n"
                                             "  route 0: S -> N if (PE_Y > 0 && PE_Y < 3);\n"
                                             "  route 0: S -> S if (PE_Y == 0);"))
    result = run_quickly(cli, path)
    assert "enters a cycle of routes" in result.err and "color 0" in result.err


SELF_ACTIVATING = """
module t
mesh PE[1, 1]
program p origin PE[0, 0] pes { PE[0, 0] }
{
  array float32 a[1] store y;
  task main { activate again; }
  task again local { if (PE_X == 0) { activate again; } }
}
"""


@pytest.mark.parametrize("text", [
    SELF_ACTIVATING,
    SELF_ACTIVATING.replace("task again local { if (PE_X == 0) { activate again; } }",
                            "task again local { for (i = 0; i <= 4611686018427387904; i++) "
                            "{ a[0] += 1.0; } }"),
])
def test_wall_time_limit_stops_a_run_that_never_ends(text: str) -> None:
    start = time.monotonic()
    with pytest.raises(TimeLimitError) as err:
        sim(text, {}, {"y": ((1,), "float32")}, cycle_limit=1 << 50, task_dispatch=0,
            scalar_op=0, for_iteration=0, max_seconds=0.5)
    assert time.monotonic() - start < 5
    assert "ran longer than 0.5 s of wall time" in str(err.value)


def test_max_seconds_on_the_command_line(cli, tmp_path: Path) -> None:
    path = copy_gemv(tmp_path, "task main {",
                     "task spin local { if (PE_X >= 0) { activate spin; } }\n  task main {"
                     " activate spin;")
    config = tmp_path / "fabric.toml"
    config.write_text("cycle_limit = 1125899906842624\ntask_dispatch = 0\nscalar_op = 0\n")
    result = run_quickly(cli, path, "--config", config, "--max-seconds", "0.5")
    assert "error: the simulation ran longer than 0.5 s of wall time" in result.err
