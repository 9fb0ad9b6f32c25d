"""The order in which the PEs of an exchange's lines take turns sending.

The exchange protocol (docs/codegen.md) lets each PE of a line (a row, a column or the
whole region) send what it holds, one after the other, and every PE count the end marks
it receives. When every PE of the line takes a turn, a line of ``n`` PEs needs ``n``
turns even if only a few hold anything (a reduction chain's last column holding all the
totals: 64 turns on 8 x 8 PEs, 8 of them useful). Where the PEs holding elements form a
box, only they take turns, in the same order (west to east, north to south), and the
others just count their end marks; elsewhere every PE does, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from dtg.codegen.islast import condition_of
from dtg.mapping import poly
from dtg.mapping.flows import Exchange, Region
from dtg.pe.ir import BoolOp, Cmp, Cond, IBin, IConst, IExpr, ISel, IVar


@dataclass(frozen=True)
class TurnOrder:
    """The senders of an exchange: the box ``x0 <= PE_X < x0 + width``, ``y0 <= PE_Y <
    y0 + height`` (the whole region when ``every``), in row-major order along the axis."""

    axis: str
    x0: int
    y0: int
    width: int
    height: int
    every: bool
    holder: Cond | None = None  # whether this PE takes a turn (None: every PE does)
    all_lines: bool = True  # every line of the axis has senders

    @property
    def rank(self) -> IExpr:
        """This PE's turn among the senders of its line (where it is one)."""
        x = _minus(IVar("PE_X"), self.x0)
        y = _minus(IVar("PE_Y"), self.y0)
        if self.axis == "row":
            return x
        if self.axis == "column":
            return y
        return _plus(IBin("*", y, IConst(self.width)), x) if self.width > 1 else y

    @property
    def count(self) -> IExpr:
        """Turns in this PE's line (0 on lines without a sender)."""
        if self.axis == "row":
            return IConst(self.width) if self.all_lines else ISel(
                _within(IVar("PE_Y"), self.y0, self.height), IConst(self.width), IConst(0))
        if self.axis == "column":
            return IConst(self.height) if self.all_lines else ISel(
                _within(IVar("PE_X"), self.x0, self.width), IConst(self.height), IConst(0))
        return IConst(self.width * self.height)

    @property
    def position(self) -> IExpr:
        """This PE's turn where it sends, past every turn where it does not: the ``j``-th
        block it receives comes from sender ``j``, or ``j + 1`` from its own turn on."""
        holder = self.holder
        return self.rank if holder is None else ISel(holder, self.rank, self.count)

    def sender(self, s: IExpr) -> dict[str, IExpr]:
        """The coordinates of the ``s``-th sender of this PE's line."""
        if self.axis == "row":
            return {"PE_X": _plus(s, IConst(self.x0))}
        if self.axis == "column":
            return {"PE_Y": _plus(s, IConst(self.y0))}
        w = IConst(self.width)
        return {"PE_X": _plus(IBin("%", s, w), IConst(self.x0)),
                "PE_Y": _plus(IBin("//", s, w), IConst(self.y0))}


def every_pe(region: Region, axis: str) -> TurnOrder:
    """Every PE of every line takes a turn (the protocol for any set of holders)."""
    return TurnOrder(axis, 0, 0, region.width, region.height, True)


def turn_order(ex: Exchange, region: Region) -> TurnOrder:
    """Only the PEs holding elements of ``ex`` take turns, where they form a box."""
    holders = ex.produced.domain()
    box = poly.set_box_hull(holders, affine=True)
    if box is None or len(box.size) != 2 or holders.is_empty():
        return every_pe(region, ex.axis)
    offset = [box.offset.get_at(d) for d in range(2)]
    if not all(o.is_cst() for o in offset):
        return every_pe(region, ex.axis)
    x0, y0 = (int(o.get_constant_val().to_python()) for o in offset)
    if not poly.box_set(box).is_equal(holders):
        return every_pe(region, ex.axis)
    width, height = box.size
    if (x0, y0, width, height) == (0, 0, region.width, region.height):
        return every_pe(region, ex.axis)
    if {"row": width == region.width, "column": height == region.height}.get(ex.axis, False):
        return every_pe(region, ex.axis)  # as many turns per line: the simpler code
    context = region.context()
    holder = condition_of(holders.bind(poly.multi_id(holders.get_space(), poly.PE_NAMES)),
                          context)
    all_lines = {"row": height == region.height, "column": width == region.width}.get(
        ex.axis, True)
    return TurnOrder(ex.axis, x0, y0, width, height, False, holder, all_lines)


def _within(v: IExpr, low: int, n: int) -> Cond:
    """``low <= v < low + n``."""
    return BoolOp("&&", Cmp(">=", v, IConst(low)), Cmp("<=", v, IConst(low + n - 1)))


def _plus(e: IExpr, f: IExpr) -> IExpr:
    return e if isinstance(f, IConst) and f.value == 0 else IBin("+", e, f)


def _minus(e: IExpr, c: int) -> IExpr:
    return e if c == 0 else IBin("-", e, IConst(c))

