"""Exchanges of internal tensors (docs/codegen.md, "Internal tensors"): PEs take turns
sending what they hold along their lines; every PE keeps what it reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import count
from typing import Literal

from dtg.codegen.blocks import BlockExchange, block_exchange, reduce_block_exchange
from dtg.codegen.direct import (
    DirectExchange,
    direct_exchange,
    halo_exchange,
    two_phase_halo,
)
from dtg.codegen.emitstate import EmitterState
from dtg.codegen.islast import (
    aff_expr,
    condition_of,
    scan,
    substitute_stmts,
)
from dtg.codegen.routes import broadcast_routes
from dtg.codegen.simd import row_major
from dtg.codegen.stmtutil import and_cond, guarded, simplify
from dtg.codegen.turns import TurnOrder, every_pe, turn_order
from dtg.errors import CompilerBug
from dtg.mapping import poly
from dtg.mapping.flows import (
    Exchange,
)
from dtg.mapping.memory import LocalTensor
from dtg.pe.ir import (
    MAX_SIMD_CONFIGS,
    Activate,
    BoolOp,
    Cmp,
    Cond,
    FValue,
    IBin,
    IConst,
    IExpr,
    If,
    IntVar,
    ISel,
    IVar,
    Load,
    Not,
    Route,
    Send,
    SendEnd,
    SetInt,
    Stmt,
    Store,
    Task,
)


class Sharing(EmitterState):
    """Emits the exchanges of internal tensors."""

    def _exchange(self, ex: Exchange, k: int, after: list[Stmt]) -> None:
        """Routes and tasks sharing ``ex`` along lines: each PE sends its elements when the
        PEs before it in its line have sent theirs (one at a time, so no PE waits on a
        neighbour that waits on it); ``after`` runs once all of them have arrived."""
        local = self.memory.of(ex.tensor)
        if local is None:
            raise CompilerBug(f"internal tensor '{ex.tensor}' has no local array")
        t = exchange_name(ex)
        got, sent = f"got_{t}", f"sent_{t}"
        self.ints.extend([IntVar(got), IntVar(sent)])
        c = ex.color
        context = self.region.context()
        direct = direct_exchange(ex, local, self.region, name=t, fresh=self._fresh_color,
                                 op="fmax" if self._reduction_op(ex.tensor) == "fmax"
                                 else "fadd",
                                 shape=self.tg.model.graph.tensor(ex.tensor).shape
                                 ) if self._simd_out(
            "exchange", ex.tensor) else None
        if direct is not None:
            self._direct(ex, k, after, direct)
            return
        turns = turn_order(ex, self.region)
        block = None
        if self._simd_out("exchange", ex.tensor) and ex.reduce:
            block = reduce_block_exchange(ex, local, self.region, name=t, got=got, turns=turns,
                                          op=self._reduction_op(ex.tensor))  # type: ignore[arg-type]
        elif self._simd_out("exchange", ex.tensor):
            shape = self.tg.model.graph.tensor(ex.tensor).shape
            block = block_exchange(ex, local, self.region, name=t, got=got, turns=turns,
                                   shape=shape)
            if block is None and not turns.every:  # blocks kept in part: every PE's turn
                block = block_exchange(ex, local, self.region, name=t, got=got,
                                       turns=every_pe(self.region, ex.axis), shape=shape)
                turns = every_pe(self.region, ex.axis) if block is not None else turns
        if self._simd_out("exchange", ex.tensor) and self._simd_out("halo", ex.tensor):
            # (a halo: one exchange without turns per displacement, where the turns
            # would send every element (value, index) pairs, or are predicted slower;
            # not where the configuration budget gave it up for the turns)
            spare = count(1 << 20)
            trial = halo_exchange(ex, local, self.region, name=t, fresh=lambda: next(spare),
                                  shape=self.tg.model.graph.tensor(ex.tensor).shape)
            shape = self.tg.model.graph.tensor(ex.tensor).shape
            phased = None
            if trial is not None and (2 * len(trial) > MAX_SIMD_CONFIGS or not self._simd_out(
                    "halo2", ex.tensor)):
                # (more configurations than a PE has, or than the budget leaves: in two
                # phases, where a convex window's diagonal parts go by the PEs beside)
                # (relayed by PEs that do not read what they pass on, only where the
                # budget chose it: it moves more than the one phase it replaces)
                relay = not self._simd_out("halo2", ex.tensor)
                phased = two_phase_halo(ex, local, self.region, name=t,
                                        fresh=lambda: next(spare), shape=shape, relay=relay)
                if phased is not None and (block is None or _halo_cycles(
                        (*phased[0], *phased[1])) < _turn_cycles(turns, block.size)):
                    made = two_phase_halo(ex, local, self.region, name=t,
                                          fresh=self._fresh_color, shape=shape, relay=relay)
                    assert made is not None  # (as the trial)
                    self._note_halo(ex, (*made[0], *made[1]), block, turns)
                    self._direct(ex, k, after, *made)
                    return
            if trial is not None and (block is None or _halo_cycles(trial) < _turn_cycles(
                    turns, block.size)):
                parts = halo_exchange(ex, local, self.region, name=t, fresh=self._fresh_color,
                                      shape=shape)
                assert parts is not None  # (as the trial)
                self._note_halo(ex, parts, block, turns)
                self._note_two_phases(ex, parts, local, shape)
                self._direct(ex, k, after, parts)
                return
        if ex.axis == "region":
            self.routes += broadcast_routes(c, self.region.width, self.region.height, context)
        else:
            row = ex.axis == "row"
            pos = IVar("PE_X" if row else "PE_Y")
            length = self.region.width if row else self.region.height
            back, fwd = ("W", "E") if row else ("N", "S")
            first = Cmp("==", pos, IConst(0))
            last = Cmp("==", pos, IConst(length - 1))
            inner = BoolOp("&&", Cmp(">", pos, IConst(0)), Cmp("<", pos, IConst(length - 1)))
            self.routes += [
                Route(c, "RAMP", (fwd,), first), Route(c, "RAMP", (back,), last),
                Route(c, "RAMP", (back, fwd), inner),
                Route(c, back, ("RAMP", fwd), Not(last)), Route(c, back, ("RAMP",), last),
                Route(c, fwd, ("RAMP", back), Not(first)), Route(c, fwd, ("RAMP",), first),
            ]
        if block is not None:
            self.configs.extend(block.configs)
            self.extra_arrays.append(block.land)
            self._turns(ex, k, after, turns,
                        (*block.send, SendEnd(c), SetInt(sent, "=", IConst(1))),
                        Task(f"share_{t}", "data", block.receive, c, False, block.size,
                             block.land.name))
            return
        shape = self.tg.model.graph.tensor(ex.tensor).shape
        strides = row_major(shape)
        offset = local.offset_aff()
        offsets = [aff_expr(offset.get_at(d), context) for d in range(len(shape))]
        # Receive: element (index // stride) % size, kept where it falls in the array.
        element = [simplify(IBin("%", IBin("//", IVar("index"), IConst(st)), IConst(n))
                             if d else IBin("//", IVar("index"), IConst(st)))
                   for d, (st, n) in enumerate(zip(strides, shape, strict=True))]
        where = [simplify(IBin("-", e, o)) for e, o in zip(element, offsets, strict=True)]
        if ex.reduce:  # add partial results into the totals this PE keeps
            names = [f"e{d}" for d in range(len(shape))]
            keeps = poly.bind_leading(poly.bind_pe(ex.needed), names).params()
            op: Literal["+=", "max="] = "max=" if self._reduction_op(
                ex.tensor) == "fmax" else "+="
            add = (Store(Load(local.name, tuple(where)), op, FValue()),)
            keep = substitute_stmts(guarded(condition_of(keeps, context), add),
                                    dict(zip(names, element, strict=True)))
        else:
            inside: Cond | None = None
            for w, n in zip(where, local.size, strict=True):
                bound = BoolOp("&&", Cmp(">=", w, IConst(0)), Cmp("<", w, IConst(n)))
                inside = and_cond(inside, bound)
            keep = guarded(inside, [Store(Load(local.name, tuple(where)), "=", FValue())])

        # Send: the elements this PE computed, with their flat index.
        produced = poly.bind_pe(ex.produced).set_tuple_name(ex.tensor)

        def send(_: str, coords: Sequence[IExpr]) -> list[Stmt]:
            flat: IExpr = IConst(0)
            for coord, st in zip(coords, strides, strict=True):
                flat = IBin("+", flat, IBin("*", IConst(st), coord))
            index = tuple(simplify(IBin("-", coord, o))
                          for coord, o in zip(coords, offsets, strict=True))
            return [Send(c, Load(local.name, index), simplify(flat))]

        sending = (*scan(produced, context, send), SendEnd(c), SetInt(sent, "=", IConst(1)))
        self._turns(ex, k, after, turns, sending, Task(f"share_{t}", "data", keep, c, True))

    def _note_halo(self, ex: Exchange, parts: Sequence[DirectExchange],
                   block: BlockExchange | None, turns: TurnOrder) -> None:
        """What the block turns would free and cost in place of a halo's ``parts``, for
        the configuration budget (``halo:T``)."""
        if block is None:
            return
        mine = sum(len(c.variants) for part in parts for c in part.configs)
        theirs = sum(len(c.variants) for c in block.configs)
        if mine > theirs:
            self.halo_choices[f"halo:{ex.tensor}"] = (
                mine - theirs, float(_turn_cycles(turns, block.size) - _halo_cycles(parts)))

    def _note_two_phases(self, ex: Exchange, parts: Sequence[DirectExchange],
                         local: LocalTensor, shape: tuple[int, ...]) -> None:
        """What a halo in two phases would free and cost in place of ``parts`` (its
        diagonal parts relayed by the PEs beside), for the configuration budget
        (``halo2:T``)."""
        spare = count(1 << 20)
        phased = two_phase_halo(ex, local, self.region, name=exchange_name(ex),
                                fresh=lambda: next(spare), shape=shape, relay=True)
        if phased is None:
            return
        mine = sum(len(c.variants) for part in parts for c in part.configs)
        theirs = sum(len(c.variants) for part in (*phased[0], *phased[1])
                     for c in part.configs)
        if mine > theirs:
            # (the second phase waits for the first: its parts cost their cycles again)
            later = _halo_cycles(phased[1])
            self.halo_choices[f"halo2:{ex.tensor}"] = (
                mine - theirs, float(_halo_cycles((*phased[0], *phased[1])) + later
                                     - _halo_cycles(parts)))

    def _direct(self, ex: Exchange, k: int, after: Sequence[Stmt],
                parts: tuple[DirectExchange, ...],
                later: tuple[DirectExchange, ...] = ()) -> None:
        """The tasks of an exchange without turns: in its phase, a sender sends its block
        at once (on its part's color); ``after`` runs once a PE has sent (if it sends)
        and landed its block (if it receives one: its end mark counts). With ``later``
        parts (a halo in two phases), a PE sends those once it has landed every part of
        the first phase it receives, and ``after`` waits for them too."""
        if later:
            self._two_phases(ex, k, after, parts, later)
            return
        t = exchange_name(ex)
        got, sent = f"got_{t}", f"sent_{t}"
        first = parts[0]
        self._declare_parts(parts)
        mine = Cmp("==", IVar(sent), IConst(0))
        if len(parts) == 1:
            sending: tuple[Stmt, ...] = (*first.send, SendEnd(first.color),
                                         SetInt(sent, "=", IConst(1)))
            # (the sender's condition apart, on the PE alone: configure.py sets the
            # send's SIMD configuration up only there)
            send: Stmt = If(mine, sending)
            if first.sender is not None:
                send = If(first.sender, (send,))
            sender, receiver = _flag(first.sender), _flag(first.receiver)
        else:  # (each sender on the color of its part; every part has its senders)
            sends: list[Stmt] = [s for part in parts for s in guarded(
                part.sender, (*part.send, SendEnd(part.color)))]
            anyone: Cond | None = None
            if all(part.sender is not None for part in parts):
                for part in parts:
                    assert part.sender is not None
                    anyone = part.sender if anyone is None else BoolOp("||", anyone,
                                                                       part.sender)
            send = If(mine, (*sends, SetInt(sent, "=", IConst(1))))
            if anyone is not None:
                send = If(anyone, (send,))
            sender = _flag(anyone)
            receiver = _any(part.receiver for part in parts)  # (blocks it lands)
        total = simplify(IBin("+", sender, receiver))
        turn = (If(Cmp("==", IVar("phase"), IConst(k)), (
            send,
            If(Cmp("==", simplify(IBin("+", IVar(got), IVar(sent))), total),
               (SetInt("phase", "=", IConst(-k)), Activate(f"step_{t}"))),
        )),)
        self._part_tasks(t, parts, (got,) * len(parts), turn, after)

    def _declare_parts(self, parts: Sequence[DirectExchange]) -> None:
        """The routes, configurations and landing arrays of an exchange's parts."""
        for part in parts:
            self.routes += list(part.routes)
            self.configs.extend(part.configs)
        for land in dict.fromkeys(part.land for part in parts):
            self.extra_arrays.append(land)

    def _part_tasks(self, t: str, parts: Sequence[DirectExchange], counters: Sequence[str],
                    turn: tuple[Stmt, ...], after: Sequence[Stmt]) -> None:
        """Per part, a data task landing its block and a control task counting its end
        mark in its counter and taking the turn; then the turn and the step after it."""
        tasks: list[Task] = []
        for n, (part, counter) in enumerate(zip(parts, counters, strict=True)):
            suffix = f"_{n}" if n else ""
            self.task_pes[f"share_{t}{suffix}"] = part.receivers  # (routes deliver there)
            tasks += [Task(f"share_{t}{suffix}", "data", part.receive, part.color, False,
                           part.size, part.land.name),
                      Task(f"end_{t}{suffix}", "control", (SetInt(counter, "+=", IConst(1)),
                                                           *turn), part.color)]
        self.extra_tasks += [
            *tasks,
            Task(f"turn_{t}", "local", turn),
            Task(f"step_{t}", "local", tuple(after)),
        ]

    def _two_phases(self, ex: Exchange, k: int, after: Sequence[Stmt],
                    first: tuple[DirectExchange, ...],
                    second: tuple[DirectExchange, ...]) -> None:
        """A halo in two phases (codegen.direct.two_phase_halo): ``sent_T`` counts the
        phases a PE has sent (0, 1, 2), ``got_T`` and ``got_T_b`` the end marks of each."""
        t = exchange_name(ex)
        got, got_b, sent = f"got_{t}", f"got_{t}_b", f"sent_{t}"
        self.ints.append(IntVar(got_b))
        self._declare_parts((*first, *second))

        def sends(parts: tuple[DirectExchange, ...]) -> list[Stmt]:
            return [s for part in parts for s in guarded(
                part.sender, (*part.send, SendEnd(part.color)))]

        landed_a = Cmp("==", IVar(got), _any(part.receiver for part in first))
        landed_b = Cmp("==", IVar(got_b), _any(part.receiver for part in second))
        turn = (If(Cmp("==", IVar("phase"), IConst(k)), (
            If(Cmp("==", IVar(sent), IConst(0)), (*sends(first), SetInt(sent, "=", IConst(1)))),
            If(BoolOp("&&", Cmp("==", IVar(sent), IConst(1)), landed_a),
               (*sends(second), SetInt(sent, "=", IConst(2)))),
            If(BoolOp("&&", Cmp("==", IVar(sent), IConst(2)), landed_b),
               (SetInt("phase", "=", IConst(-k)), Activate(f"step_{t}"))),
        )),)
        self._part_tasks(t, (*first, *second),
                         (got,) * len(first) + (got_b,) * len(second), turn, after)

    def _turns(self, ex: Exchange, k: int, after: Sequence[Stmt], turns: TurnOrder,
               sending: Sequence[Stmt], share: Task) -> None:
        """The tasks taking turns: a sender sends once all senders before it in its line
        have (it has received that many end marks); ``after`` runs once a PE has every
        other sender's end mark (and sent its own)."""
        t = exchange_name(ex)
        got, sent, c = f"got_{t}", f"sent_{t}", ex.color
        phase_k = Cmp("==", IVar("phase"), IConst(k))
        mine = BoolOp("&&", Cmp("==", IVar(sent), IConst(0)), Cmp("==", IVar(got),
                                                                    simplify(turns.rank)))
        holder = turns.holder
        turn = (If(phase_k, (
            If(mine if holder is None else BoolOp("&&", holder, mine), tuple(sending)),
            If(Cmp("==", simplify(IBin("+", IVar(got), IVar(sent))), simplify(turns.count)),
               (SetInt("phase", "=", IConst(-k)), Activate(f"step_{t}"))),
        )),)
        # (an end mark takes the turn at once: activating the turn task would cost a
        # dispatch per turn on the exchange's critical path)
        self.extra_tasks += [
            share,
            Task(f"end_{t}", "control", (SetInt(got, "+=", IConst(1)), *turn), c),
            Task(f"turn_{t}", "local", turn),
            Task(f"step_{t}", "local", tuple(after)),
        ]


# a part's send and copy set-up, its end mark's control task and the hand-over between
# colors, about (gemv_out_north, when its totals were gathered: 3 parts of 8 ran 289
# cycles where 4 turns ran 248)
HALO_PART = 25
TURN = 20  # a turn's end mark, control task and hand-over, about
# over the whole region every PE lands every block, a data and a control task each (a
# padded 3 x 3 convolution's 16 turns of 64 and of 512 elements: about 63 and 85 cycles
# a turn beyond the block)
TURN_REGION = 64


def _halo_cycles(parts: Sequence[DirectExchange]) -> int:
    """About what a halo's exchanges cost a PE that sends and lands every part: each
    part sent by the core and copied into place."""
    return sum(2 * (part.size + HALO_PART) for part in parts)


def _turn_cycles(turns: TurnOrder, size: int) -> int:
    """About what a block exchange with turns costs: one block per turn of its line."""
    per_line = {"row": turns.width, "column": turns.height}.get(
        turns.axis, turns.width * turns.height)
    return per_line * (size + (TURN_REGION if turns.axis == "region" else TURN))


def _any(conds: Iterable[Cond | None]) -> IExpr:
    """How many of ``conds`` hold (1 where one of several that exclude each other)."""
    total: IExpr = IConst(0)
    for cond in conds:
        total = IBin("+", total, _flag(cond))
    return simplify(total)


def _flag(cond: Cond | None) -> IExpr:
    """1 where ``cond`` holds (everywhere when None), else 0."""
    return IConst(1) if cond is None else ISel(cond, IConst(1), IConst(0))


def exchange_name(ex: Exchange) -> str:
    """Names the tasks and counters of an exchange (a tensor may have several: its
    partial results summed, in phases, then its totals shared)."""
    if not ex.reduce:
        return ex.tensor
    return f"{ex.tensor}_sum" + (f"_{ex.phase}" if ex.phase else "")
