"""The resource budget of dtg's front ends (``docs/limits.md``).

Inputs are checked against these limits before any expensive work, so a mistaken or
hostile input (``/dev/zero``, a 10 MiB comment, a 5000-digit literal, an expression
nested 10 000 deep) ends in a located error, quickly and in bounded memory, instead of
exhausting memory, time or Python's stack.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from lark import Tree

from dtg.errors import SourceLoc

MAX_INPUT_BYTES = 1 << 20
"""Largest program, mapping or PE module file read (1 MiB)."""

MAX_INT = (1 << 63) - 1
"""Integer literals and every integer constant the front end computes fit in 64 bits
(isl's ``int_from_si`` takes a C ``long``)."""

MAX_SIZE = (1 << 31) - 1
"""Largest tensor dimension and statement extent."""

MAX_RANK = 16
"""Most dimensions of a tensor and most iterators of a statement."""

MAX_NESTING = 200
"""Deepest nesting of expressions (operators, calls, subscripts) in LAIR: every later
stage walks them recursively."""

MAX_PE_NESTING = 2 * MAX_NESTING
"""Deepest nesting of expressions, conditions and blocks in PE code: room for what the
compiler makes of a LAIR expression at :data:`MAX_NESTING` inside its loops."""

MAX_PE_BLOCKS = 64
"""Deepest nesting of loops and conditionals in PE code (the simulator spends several
stack frames per level; the compiler nests about one level per statement iterator)."""

MAX_PES = 1 << 20
"""Most PEs in a mapping's rectangle (a wafer has fewer than a million)."""

MAX_POINTS = 1 << 24
"""Most points a polyhedral helper lists one by one (``mapping.poly.points``): about
20 s and 2 GB of Python tuples; beyond, listing would take minutes."""

MAX_COORD = (1 << 31) - 1
"""Largest magnitude of a PE coordinate, tensor element or stream index in a mapping."""

MAX_ISL_CHARS = 10_000
"""Longest isl text of one mapping entry or PE-module declaration: isl's parser and
operations grow faster than linearly with the number of disjuncts and dimensions."""

_LITERAL_DIGITS = len(str(MAX_INT))


def literal_value(digits: str) -> int | None:
    """The value of a decimal literal, or None beyond :data:`MAX_INT`; never calls
    ``int()`` on a long string (it refuses more than 4300 digits, and is quadratic)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > _LITERAL_DIGITS:
        return None
    value = int(significant)
    return value if value <= MAX_INT else None


def abbreviate(text: str, limit: int = 24) -> str:
    """``text``, or its first characters and its length when it is long (for messages)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless the count is one: "1 dimension", "2 PEs"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def number_text(digits: str) -> str:
    """A decimal number for a message: long ones are described by their number of digits."""
    sign = "-" if digits.startswith("-") else ""
    body = digits.lstrip("-")
    if len(body) <= 30:
        return digits
    return f"{sign}{body[:6]}... (a number of {len(body)} digits)"


def too_deep(tree: Tree[Any], counts: Callable[[str], bool], limit: int = MAX_NESTING
             ) -> Tree[Any] | None:
    """The first subtree (depth first) nested more than ``limit`` deep, counting only the
    nodes whose rule ``counts``, or None. Iterative: the tree may be arbitrarily deep."""
    stack: list[tuple[Tree[Any], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if counts(node.data):
            depth += 1
            if depth > limit:
                return node
        stack.extend((c, depth) for c in reversed(node.children) if isinstance(c, Tree))
    return None


def tree_loc(tree: Tree[Any], file: str) -> SourceLoc:
    """Where a subtree's text starts (lark's ``propagate_positions``)."""
    meta = tree.meta
    if getattr(meta, "empty", True):
        return SourceLoc(file, 1, 1)
    return SourceLoc(file, meta.line, meta.column)


def rule_names(names: Iterable[str]) -> Callable[[str], bool]:
    frozen = frozenset(names)
    return lambda name: str(name) in frozen


_ISL_NUMBER = re.compile(r"(?<![A-Za-z0-9_])[0-9]+")


def isl_text_problem(text: str) -> tuple[str, int] | None:
    """Why isl text is beyond the budget, and the offset in ``text`` of the culprit; or
    None. Too long; nested deeper than :data:`MAX_NESTING` (isl's parser is recursive and
    overflows the C stack); a tuple of more than :data:`MAX_RANK` dimensions (isl's
    parser takes cubic time on repeated names); a literal beyond 64 bits."""
    if len(text) > MAX_ISL_CHARS:
        return (f"the isl text has {len(text)} characters, more than the limit of "
                f"{MAX_ISL_CHARS}", 0)
    stack: list[list[int]] = []  # per open bracket: [is '[', commas at its level]
    for offset, char in enumerate(text):
        if char in "([":
            stack.append([char == "[", 0])
            if len(stack) > MAX_NESTING:
                return (f"the isl text nests parentheses or brackets more than {MAX_NESTING} "
                        "levels deep, the limit", offset)
        elif char == "," and stack:
            stack[-1][1] += 1
            if stack[-1][0] and stack[-1][1] >= MAX_RANK:
                return (f"the isl text has a tuple of more than {MAX_RANK} dimensions, the "
                        "limit", offset)
        elif char in ")]" and stack:
            stack.pop()
    for number in _ISL_NUMBER.finditer(text):
        if literal_value(number.group()) is None:
            return (f"integer literal {number_text(number.group())} is larger than {MAX_INT}, "
                    "the largest integer dtg takes (64 bits)", number.start())
    return None


def offset_loc(start: SourceLoc, text: str, offset: int) -> SourceLoc:
    """The position of ``text[offset]`` when ``text`` starts at ``start``."""
    before = text[:offset]
    newlines = before.count("\n")
    if not newlines:
        return SourceLoc(start.file, start.line, start.column + offset)
    return SourceLoc(start.file, start.line + newlines, offset - before.rfind("\n"))


# ----------------------------------------------------------------- the simulator (pesim)

MAX_COLORS = 4096
"""Most colors of the simulated fabric (``colors`` in ``--config``)."""

MAX_CYCLES = 1 << 50
"""Largest ``cycle_limit``: simulated time stays exact in simpy's float clock."""

MAX_COST = (1 << 31) - 1
"""Largest cost (cycles) of one operation or hop in ``--config``."""

MAX_BUFFER_WAVELETS = 1 << 16
"""Deepest router buffer and core queue (``buffer_wavelets``)."""

MAX_PE_MEMORY = 1 << 30
"""Largest local memory of one PE (``memory_bytes``)."""

MAX_SIMD_WIDTH = 1 << 16
"""Widest SIMD engine and most SIMD configurations per PE in ``--config``."""

MAX_CLOCK_MHZ = 1e6
"""Fastest nominal clock (``clock_mhz``, a positive finite number)."""

MAX_CONFIG_NESTING = 16
"""Deepest nesting of arrays and tables in a ``--config`` file (settings are flat)."""

MAX_SIM_BYTES = 1 << 31
"""The tensors of a reference program (inputs and all it computes) that a run checks."""

SIM_BYTES_PER_PE = 24 << 10
"""Estimated bookkeeping of one core on the simpy engine (its objects, process, queues;
measured: a 128 x 128 GEMV with six routes a PE takes about 37 KB a PE)."""

SIM_BYTES_PER_ROUTE = 2 << 10
"""Estimated bookkeeping of one router input buffer on the simpy engine."""

FAST_BYTES_PER_PE = 2 << 10
"""Estimated state of one core on the compiled engine set up in arrays (its row, queues,
variables, triggers, profile)."""

FAST_BYTES_PER_ROUTE = 512
"""Estimated state of one router input buffer on the compiled engine (row, ring,
targets, waiters)."""


def memory_limit() -> int:
    """The memory a simulation may take: three quarters of this machine's physical
    memory (``$DTG_MEMORY_LIMIT`` bytes when set), so that a run that would not fit is
    refused before anything is allocated."""
    given = os.environ.get("DTG_MEMORY_LIMIT", "")
    if given.isdigit():
        return int(given)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") * 3 // 4
    except (ValueError, OSError, AttributeError):
        return MAX_SIM_BYTES

MAX_INPUT_ARRAY_BYTES = 1 << 30
"""Largest total size of the arrays of an ``--inputs`` archive (uncompressed)."""

MAX_SECONDS = 600.0
"""Default wall-time limit of one simulation (``pesim --max-seconds``)."""
