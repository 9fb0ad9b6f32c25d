"""Fabric settings from TOML, and static rules on modules built in code (no positions)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dtg.errors import DtgError
from dtg.pe.fabric import ConfigError, FabricConfig, config_from_mapping, load_config
from dtg.pe.ir import Cmp, IConst, IVar, Route, SetInt, StreamIO, Task
from dtg.pe.parser import parse_module
from dtg.pesim.verify import ModuleError, verify_module

GEMV_PE = (Path(__file__).resolve().parents[2] / "examples" / "handwritten"
           / "gemv_checkerboard" / "gemv_checkerboard.pe")


def test_defaults_follow_the_cost_table() -> None:
    c = FabricConfig()
    assert (c.colors, c.buffer_wavelets, c.hop_cycles, c.memory_bytes) == (24, 4, 1, 49152)
    assert (c.task_dispatch, c.scalar_op, c.for_setup, c.for_iteration, c.if_branch) == (
        3, 1, 2, 3, 1)
    assert (c.simd_config, c.simd_startup, c.simd_variant_select) == (8, 4, 2)
    assert (c.simd_width("float16"), c.simd_width("float32")) == (4, 1)
    assert c.clock_mhz == 850.0 and c.microseconds(850) == 1.0


def test_toml_overrides_flat_or_in_a_table(tmp_path: Path) -> None:
    flat = tmp_path / "a.toml"
    flat.write_text("buffer_wavelets = 8\nclock_mhz = 1000\n")
    assert load_config(flat) == FabricConfig(buffer_wavelets=8, clock_mhz=1000.0)
    table = tmp_path / "b.toml"
    table.write_text("[fabric]\ncycle_limit = 99\n")
    assert load_config(table).cycle_limit == 99


@pytest.mark.parametrize("values, message", [
    ({"colours": 3}, "unknown setting colours"),
    ({"colors": "many"}, "setting 'colors' in the fabric settings is 'many'; expected an integer"),
    ({"colors": True}, "expected an integer"),
    ({"colors": 0}, "expected at least 1"),
    ({"task_dispatch": -1}, "expected at least 0"),
])
def test_bad_settings_are_errors(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_mapping(values)


def test_malformed_toml_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("colors = \n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(path)


GEMV = parse_module(GEMV_PE.read_text())


def test_the_hand_written_gemv_passes_verification() -> None:
    verify_module(GEMV)


def with_program(**changes: object) -> object:
    return replace(GEMV, programs=(replace(GEMV.programs[0], **changes),))


@pytest.mark.parametrize("module, message", [
    (replace(GEMV, width=0), r"the mesh PE\[0, 4\] is empty"),
    (replace(GEMV, streams=(*GEMV.streams, GEMV.streams[0])),
     "input stream x is declared in parts that share elements"),
    (replace(GEMV, streams=(StreamIO("input", "x", "dense", 0,
                                     "{ x[i = 0:3] -> [PE[1, 1] -> index[i]] }"),)),
     r"arrives from PE\[1, 1\], inside the mesh"),
    (with_program(routes=(Route(0, "N", ("S", "S")),)), "route target port S is listed twice"),
    (with_program(routes=(Route(0, "UP", ("S",)),)), "route source port UP is not one of"),
    (with_program(routes=(Route(0, "N", ("S",), Cmp("<", IVar("n"), IConst(1))),)),
     "a guard may use only PE_X and PE_Y"),
    (with_program(tasks=(Task("main", "main", (SetInt("PE_X", "=", IConst(1)),)),)),
     "assigns to 'PE_X', which is not an int"),
    (with_program(tasks=(Task("a", "main", ()), Task("b", "main", ()))), "has 2 main tasks"),
    (with_program(tasks=(Task("a", "control", (), 1, True),)), "only data tasks can be sparse"),
    (with_program(tasks=(Task("a", "local", (), 1),)), "cannot be bound to a color"),
])
def test_static_rules_on_modules_built_in_code(module: object, message: str) -> None:
    with pytest.raises(ModuleError, match=message) as err:
        verify_module(module)  # type: ignore[arg-type]
    assert err.value.loc is None  # built in code: no file position
    assert isinstance(err.value, DtgError)


def test_verifier_limits_follow_the_config() -> None:
    verify_module(GEMV, FabricConfig(max_simd_configs=5))
    with pytest.raises(ModuleError, match="at most 4"):
        verify_module(GEMV, FabricConfig(max_simd_configs=4))
    with pytest.raises(ModuleError, match=r"colors are 0\.\.1"):
        verify_module(GEMV, FabricConfig(colors=2))
    verify_module(GEMV, FabricConfig(memory_bytes=80))  # W_local 64 bytes, y_local 16
    with pytest.raises(ModuleError, match=r"need 80 bytes .* a PE has 79 bytes of local memory"):
        verify_module(GEMV, FabricConfig(memory_bytes=79))


def test_presets_hold_the_public_figures() -> None:
    from dtg.pe.fabric import PRESETS, preset

    assert set(PRESETS) == {"paper", "wse2", "wse3"} and preset("paper") == FabricConfig()
    wse2, wse3 = preset("wse2"), preset("wse3")
    assert wse2.hop_cycles == 2 and wse3.hop_cycles == 1
    for c in (wse2, wse3):
        assert (c.colors, c.memory_bytes) == (24, 48 * 1024)
    assert [wse2.simd_width(t, op) for t, op in
            [("float16", "fmac"), ("float16", "fadd"), ("float32", "fmac"),
             ("float32", "fmul"), ("float32", "fadd"), ("float32", "copy")]] == [4, 4, 1, 1, 2, 2]
    assert [wse3.simd_width(t, op) for t, op in
            [("float16", "fmac"), ("float32", "fmac"), ("float32", "fsub")]] == [8, 1, 4]
    assert wse3.widest("float32") == 4 and wse2.widest("float16") == 4


def test_a_config_file_overrides_the_chosen_preset(tmp_path: Path) -> None:
    from dtg.pe.fabric import chosen_fabric

    path = tmp_path / "f.toml"
    path.write_text("task_dispatch = 5\n")
    chosen = chosen_fabric("wse3", path)
    assert chosen.task_dispatch == 5 and chosen.simd_width_float16 == 8
    with pytest.raises(ConfigError, match="unknown fabric 'wse9'; known fabrics are paper"):
        chosen_fabric("wse9")
