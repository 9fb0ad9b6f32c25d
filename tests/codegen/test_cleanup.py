"""Counters nothing reads are dropped with their updates."""

from __future__ import annotations

from codegen.cleanup import drop_unread_ints
from codegen.peprint import program as program_text
from pesim.parser import parse_module

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
