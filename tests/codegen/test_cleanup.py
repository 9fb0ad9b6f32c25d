"""Counters nothing reads are dropped with their updates."""

from __future__ import annotations

from dtg.codegen.cleanup import drop_unread_ints, drop_unrun_configs, merge_adjacent_ifs
from dtg.pe.parser import parse_module
from dtg.pe.printer import program as program_text
from dtg.pe.printer import task as task_text

TEXT = """
module m
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[4];
  int n = 0;
  int g = 0;
  int h = 0;
  int k = 0;
  task main {
    k = 2;
  }
  task on_x data color 0 batch 4 land a {
    n += count;
    h = g + 1;
    if (PE_X == 0) {
      g += 1;
    }
    a[k] = 1.0;
  }
  task end_x control color 0 {
    n = 0;
  }
}
"""


def test_unread_counters_and_their_updates_go() -> None:
    program = drop_unread_ints(parse_module(TEXT).programs[0])
    # n is never read; h only feeds nothing; then g only fed h: all three go, k stays
    assert [v.name for v in program.ints] == ["k"]
    text = program_text(program)
    assert "n +=" not in text and "h =" not in text and "g +=" not in text
    assert "if (PE_X == 0)" not in text  # the emptied branch goes too
    assert "k = 2;" in text and "a[k] = 1.0;" in text
    # the control task is left with nothing to do: the end mark needs no task
    assert [t.name for t in program.tasks] == ["main", "on_x"]


def test_one_stream_ending_once_finishes_in_the_task_of_its_only_batch(tmp_path) -> None:
    from dtg.codegen.driver import compile_file
    from dtg.pesim.run import run_program

    (tmp_path / "g.lair").write_text("""
lair g(): float16 W[16][16], float16 x[16] -> float16 y[16]
{ all (i, j) in (16, 16) y[i] += W[i][j] * x[j] }
""")
    # x reaches columns 1 and 2 only; y's chain runs through idle columns 0 and 3
    (tmp_path / "g.map").write_text("""
rectangle { PE[4, 2] }
placement { g[i, j] -> PE[1 + j//8, i//8] }
input  x dense { x[j = 0:15] -> [PE[1 + j//8, -1] -> index[j mod 8]] }
input  W resident
output y dense { y[i = 0:15] -> [PE[-1, i//8] -> index[i mod 8]] }
""")
    compiled = compile_file(tmp_path / "g.lair")
    assert compiled.module is not None
    (program,) = [p for p in compiled.module.programs if p.name == "compute"]
    assert "pending" not in {v.name for v in program.ints}
    assert {t.name for t in program.tasks} == {"main", "on_x"}
    on_x = next(t for t in program.tasks if t.name == "on_x")
    main = next(t for t in program.tasks if t.name == "main")
    # the PEs x reaches take its 8 wavelets as one batch that its end mark closes, and
    # finish in that task; the others in main
    assert (on_x.batch, on_x.groups) == (8, 1)
    assert "run out_y" in "\n".join(task_text(on_x))
    assert main.body
    for seed in (0, 1):
        result = run_program(tmp_path / "g.lair", seed=seed)
        assert result.comparison.verified and result.comparison.exact


MERGE = """
module m
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[4];
  int k = 0;
  task main {
    if (PE_X == 1) {
      a[0] = 1.0;
    }
    if (PE_X == 1) {
      a[1] = 2.0;
    }
    if (k == 0) {
      k = 1;
    }
    if (k == 0) {
      a[2] = 3.0;
    }
    if (PE_X == 0) {
      a[3] = 4.0;
    } else {
      a[3] = 5.0;
    }
    if (PE_X == 0) {
      a[0] = 6.0;
    }
  }
}
"""


def test_adjacent_tests_of_one_condition_are_one_test() -> None:
    """Merged where nothing in between changes the condition; not where the first body
    assigns what the condition reads, nor after an ``else``."""
    program = merge_adjacent_ifs(parse_module(MERGE).programs[0])
    text = program_text(program)
    assert text.count("if (PE_X == 1)") == 1
    assert "a[0] = 1.0;\n      a[1] = 2.0;" in text
    assert text.count("if (k == 0)") == 2
    assert text.count("if (PE_X == 0)") == 2


SETTLE = """
module m
mesh PE[2, 2]
program p origin PE[0, 0] pes { PE[x, y] : 0 <= x <= 1 and 0 <= y <= 1 }
{
  int n = 0;
  task main {
    if (PE_X == 0) {
      n = 1;
      for (i = 0; i <= 1; i++) {
        if (PE_X + PE_Y > 0 || PE_Y == 1) {
          n += 1;
        }
      }
    } else {
      if (n == 0 && PE_X == 1) {
        n = 2;
      }
    }
  }
}
"""


def test_only_tests_of_the_pe_alone_are_settled_where_the_code_is_placed() -> None:
    from dtg.codegen.cleanup import settle_pe_branches

    text = program_text(settle_pe_branches(parse_module(SETTLE).programs[0]))
    assert "if static (PE_X == 0) {" in text
    assert "if static (PE_X + PE_Y > 0 || PE_Y == 1) {" in text  # (inside a loop too)
    assert "if (n == 0 && PE_X == 1) {" in text  # (reads a variable: tested at run time)


NESTED = """
module m
mesh PE[4, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 3 }
{
  int n = 0;
  task main {
    if (PE_X >= 2) {
      n = 1;
      if (PE_X <= 1) {
        n = 2;
      } else {
        n = 3;
      }
    } else {
      if (PE_X < 2 || PE_Y == 5) {
        n = 4;
      }
    }
  }
}
"""


def test_a_test_the_tests_around_it_settle_is_dropped() -> None:
    from dtg.codegen.cleanup import settle_pe_branches

    text = program_text(settle_pe_branches(parse_module(NESTED).programs[0]))
    body = text.split("task main {", 1)[1]
    assert body.count("if static") == 1 and "n = 2;" not in body
    assert "n = 3;" in body and "n = 4;" in body and "PE_Y == 5" not in body


def test_configurations_no_run_names_are_dropped() -> None:
    text = """
module m
mesh PE[2, 1]
program p origin PE[0, 0] pes { PE[x, 0] : 0 <= x <= 1 }
{
  array float32 a[4];
  simd used [4]: a[i0] = a[i0] + a[i0];
  simd nested [4]: a[i0] = a[i0] * a[i0];
  simd settled_away [4] if (false): a[i0] = max(a[i0], a[i0]);
  task main {
    run used {a: 0};
    if static (PE_X == 0) {
      for (k = 0; k <= 1; k++) {
        run nested {a: 0};
      }
    }
  }
}
"""
    program = drop_unrun_configs(parse_module(text).programs[0])
    assert [c.name for c in program.configs] == ["used", "nested"]
