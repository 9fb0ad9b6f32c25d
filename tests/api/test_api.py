"""The Python API: dtg.compile, dtg.simulate, the example catalog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

import dtg
from dtg.errors import InputError, MappingError

GEMV_MAP = (EXAMPLES / "gemv" / "gemv.map").read_text()
GEMV_LAIR = (EXAMPLES / "gemv" / "gemv.lair").read_text()


def test_compile_and_simulate_a_file() -> None:
    c = dtg.compile(EXAMPLES / "gemv" / "gemv.lair")
    r = dtg.simulate(c)
    assert r.verified and r.exact
    assert r.bound is not None and r.ratio == pytest.approx(r.cycles / r.bound.cycles)
    assert set(r.outputs) == {"y"}
    np.testing.assert_array_equal(r.outputs["y"], r.expected["y"])
    assert len(r.pes) == 16 and sum(r.links.values()) > 0
    assert r.report()["cycles"] == r.cycles


def test_text_and_file_give_the_same_code() -> None:
    from_text = dtg.compile(GEMV_LAIR, GEMV_MAP)
    from_file = dtg.compile(EXAMPLES / "gemv" / "gemv.lair", EXAMPLES / "gemv" / "gemv.map")

    def body(c: dtg.Compilation) -> list[str]:  # all but the module's name and files
        return [line for line in dtg.module_text(c).splitlines()
                if not line.startswith(("module ", "reference ", "mapping "))]

    assert body(from_text) == body(from_file)


def test_given_inputs_are_used() -> None:
    c = dtg.compile(EXAMPLES / "gemv" / "gemv.lair")
    W = np.ones((32, 16), dtype=np.float16)
    x = np.arange(16, dtype=np.float16)
    r = dtg.simulate(c, inputs={"W": W, "x": x})
    assert r.verified
    np.testing.assert_array_equal(r.outputs["y"], np.full(32, 120, dtype=np.float16))


def test_fabric_by_name() -> None:
    paper = dtg.simulate(dtg.compile(EXAMPLES / "gemv" / "gemv.lair"))
    wse2 = dtg.simulate(dtg.compile(EXAMPLES / "gemv" / "gemv.lair", fabric="wse2"))
    assert wse2.verified and wse2.cycles != paper.cycles


def test_errors_are_dtg_errors_with_locations() -> None:
    with pytest.raises(MappingError) as err:
        dtg.compile(GEMV_LAIR, GEMV_MAP.replace("PE[j//4, i//8]", "PE[j//4, i//2]"))
    assert str(err.value).startswith("<mapping>:")
    with pytest.raises(InputError, match="needs its mapping"):
        dtg.compile(GEMV_LAIR)
    assert issubclass(MappingError, dtg.DtgError)


def test_simulate_a_module_file() -> None:
    r = dtg.simulate(EXAMPLES / "handwritten" / "gemv_checkerboard" / "gemv_checkerboard.pe")
    assert r.verified and r.bound is None and r.ratio is None


def test_catalog_lists_every_example_and_runs_them_with_their_sizes() -> None:
    names = {e.name for e in dtg.examples()}
    maps = {p.relative_to(EXAMPLES).with_suffix("").as_posix() for p in EXAMPLES.rglob("*.map")}
    assert len(names) >= len(maps)
    for name in ("gemv", "fc/train", "polybench/gemm", "polybench/gemm.large", "paper/listing1",
                 "handwritten/gemv_checkerboard", "gemv/gemv.tiled"):
        assert name in names
    large = dtg.example("polybench/atax.large")
    assert large.params == {"M": 76, "N": 84}
    assert large.compile().program.graph.tensor("A").shape == (76, 84)
    assert dtg.example("conv1d").simulate(simd=False).verified


def test_unknown_example_suggests() -> None:
    with pytest.raises(InputError, match=r"no example called 'gem'; try one of: .*gemv"):
        dtg.example("gem")


def test_version() -> None:
    assert dtg.__version__.count(".") >= 2


def test_no_top_level_packages_besides_dtg() -> None:
    import importlib.util

    top = Path(dtg.__file__).resolve().parent.parent
    for name in ("lair", "mapping", "codegen", "pesim"):
        spec = importlib.util.find_spec(f"dtg.{name}")
        assert spec is not None and spec.origin is not None
        assert Path(spec.origin).parent.name == name
    assert (top / "dtg").is_dir()


def test_the_readme_example_runs_and_prints_what_it_says(tmp_path: Path, monkeypatch,
                                                          capsys) -> None:  # type: ignore[no-untyped-def]
    readme = (EXAMPLES.parent / "README.md").read_text()
    block = readme.split("## From Python\n\n```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(EXAMPLES.parent)
    code = block.replace('"gemv.json"', repr(str(tmp_path / "gemv.json"))).replace(
        '"gemv.png"', repr(str(tmp_path / "gemv.png")))
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    promised = [line.split("# ", 1)[1] for line in block.splitlines() if "print(" in line
                and "# " in line]
    assert printed[0] == promised[0]
    assert (tmp_path / "gemv.json").exists() and (tmp_path / "gemv.png").exists()


def test_the_report_is_the_one_pesim_writes(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    import json

    from dtg.codegen.driver import main as codegen
    from dtg.pesim.cli import main as pesim

    gemv, tiled = EXAMPLES / "gemv" / "gemv.lair", EXAMPLES / "gemv" / "gemv.tiled.map"
    path = tmp_path / "r.json"
    assert cli(pesim, gemv, "-m", tiled, "--param", "TI=4", "--report", path, "-q").status == 0
    written = json.loads(path.read_text())
    given = dtg.simulate(dtg.compile(gemv, tiled, params={"TI": 4})).report()
    assert set(given) == set(written)
    same = ("schema_version", "tool", "dtg_version", "params", "seed", "fabric_preset",
            "fabric_config", "mapping", "inputs", "cycles", "bound", "cycles_over_bound",
            "verified", "compared", "exact", "pes", "links")
    assert {k: given[k] for k in same} == {k: written[k] for k in same}
    # a module file, as dtg-codegen wrote it
    assert cli(codegen, gemv, "-m", tiled, "--param", "TI=4", "-o", tmp_path / "m").status == 0
    assert cli(pesim, tmp_path / "m", "--report", path, "-q").status == 0
    written = json.loads(path.read_text())
    given = dtg.simulate(tmp_path / "m", inputs=dtg.simulate(tmp_path / "m").inputs).report()
    assert set(given) == set(written)
    assert given["bound"] == written["bound"] is not None
    assert (given["seed"], given["inputs"], given["params"]) == (None, "<arrays>", {"TI": 4})
    assert given["mapping"] == written["mapping"] == written["mapping_file"] == \
        str(tiled.resolve())


def test_fabric_preset_in_the_report() -> None:
    c = dtg.compile(EXAMPLES / "gemv" / "gemv.lair", fabric="wse3")
    assert dtg.simulate(c).report()["fabric_preset"] == "wse3"
    custom = dtg.FabricConfig(clock_mhz=123.0)
    assert dtg.simulate(c, fabric=custom).report()["fabric_preset"] is None
