"""The compiled engine's state: arrays over cores, queues, router buffers, links and
sinks, and the names of their fields.

Everything the simpy engine keeps in Python objects (:class:`pesim.core.Core`,
:class:`pesim.routers.Buffer`, ``Link``, ``Sink``) is a row of an array here, so that
numba can run the event loop and so that a PE costs a few hundred bytes, not a few
kilobytes of objects. Field names are module constants: ``core[c, CLOCK]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np
from numba import types
from numba.core import cgutils
from numba.experimental import structref
from numba.extending import intrinsic

# ----------------------------------------------------------------- core fields
# (in the order of how often an event touches them: a core's first cache lines hold
# what nearly every event of it reads, which matters once the mesh outgrows the caches)
(PC, PHASE, PROGRAM, CLOCK, BUSY, ENV, STACK, DEPTH,
 WAKE, WAKE_KIND, QUEUES, ARRAYS, TASK, TRIGGERS, TRIGGER_COUNT, SEQ,
 SCALAR, SIMD_OPS, SIMD_RUNS, SIMD_FLOPS, FLOPS, TASKS_RUN, BUSY_BEFORE, BEGAN,
 START, END, COLOR, PROFILE, PROFILED, CONFIGURED, S_BASE0, S_BASE1,
 S_BASE2, WAITING, SENT, RAMPS, TRIGGER_CAP, STALL, WAIT, WAITING_SINCE,
 WAIT_COLOR, WAIT_WHAT, T0, SETUP, PE_X_ABS, PE_Y_ABS, DEAD,
 # a SIMD instruction with fabric operands in progress (S_BASE0-2 above; S_BASES its
 # row of bases and bound arrays), a send
 S_CONFIG, S_VARIANT, S_E, S_LAST, S_MARKS, S_FIRST, S_BEGAN, S_K, S_BUF, S_SCALAR, S_COST,
 P_BUF, P_INDEX, S_OPS, S_INNER, S_BASES) = range(63)
CORE_FIELDS = 64  # (a row is eight cache lines)
NONE = -1

# what a waiting core waits for (WAITING; 0 = nothing); the texts are the simpy engine's
W_SEND, W_SEND_END, W_SIMD_OUT, W_RECV, W_SIMD_IN = range(1, 6)
# the event a blocked core resumes on (WAKE_KIND) and whether it fired (WAKE)
K_NOTHING, K_TIMEOUT, K_IDLE, K_ARRIVAL, K_STALL = range(5)
SIGNAL_PENDING, SIGNAL_FIRED = 1, 2

# ---------------------------------------------------------- core queue fields
# (batches of whole groups: Q_BASE counts the open batch's end marks, Q_HAS_BASE says a
# batch is open, Q_POS is the position in the current group; Q_PENDING counts the closed
# batches whose task has not ended, Q_CLOSED_TOTAL those closed so far, Q_OPENED those
# opened ('once'); Q_RING_AT is the queue's first record in ``ring_rec``; Q_MARKS_AHEAD
# the end marks a ring landed whose control task has not run)
(Q_CORE, Q_COLOR, Q_LEN, Q_WAITERS, Q_ARRIVAL, Q_FILL, Q_BASE, Q_HAS_BASE, Q_PENDING,
 Q_OPENED, Q_END_WAITING, Q_DATA, Q_CONTROL, Q_BATCHED, Q_POS, Q_CLOSED_TOTAL,
 Q_RING_AT, Q_MARKS_AHEAD) = range(18)
QUEUE_FIELDS = 18
RING_RECORD = 2  # a closed batch's record in ``ring_rec``: its count, its first index

# ------------------------------------------------------------- buffer fields
# (what a forward reads first; a row is two cache lines)
(B_SCHEDULED, B_LEN, B_START, B_HEAD, B_CAP, B_TARGETS, B_WAITERS, B_ERROR,
 B_ON_CYCLE, B_ERROR_ARG, B_SOURCE, B_X, B_Y, B_COLOR, B_PORT) = range(15)
BUFFER_FIELDS = 16
MAX_WAITERS = 16  # buffers (and a core) waiting for space in one buffer or queue
MAX_TARGETS = 5
# target kinds
T_BUFFER, T_CORE, T_SINK = range(3)
PORTS = ("N", "S", "E", "W", "RAMP", "OUT")

# --------------------------------------------------------------- sink fields
(SK_DENSE, SK_ORDER, SK_SIZE, SK_COUNT, SK_GROUP, SK_GROUPS, SK_GROUP_START, SK_DONE
 ) = range(8)
SINK_FIELDS = 8

# ------------------------------------------------------------------ globals
(G_NOW, G_EID, G_PENDING, G_EVENTS, G_ERROR, G_CONTEXT, G_FAILED, G_FREE, G_LATE,
 G_TRACING, G_TRACE_N, G_TRACE_LOST, G_HOP_CYCLE, G_HOP_COUNT) = range(14)
GLOBAL_FIELDS = 14
ERROR_ARGS = 16

# ----------------------------------------------------------- fabric settings
(F_BUFFER, F_HOP, F_DISPATCH, F_SCALAR_OP, F_STARTUP, F_LIMIT, F_LAST_FIRST) = range(7)
SETTINGS = 7
# F_LAST_FIRST = 1 runs simultaneous events of equal priority last scheduled, first run:
# not simpy's order, so figures of contended cycles change (the tests' proof that a
# comparison of the engines can fail)

# ------------------------------------------------------------ trace records
# (a traced run's slices and wavelet hops, :mod:`pesim.fast.record`; a record is
# kind, core, what (task, SIMD configuration or color), start, end, argument)
R_MAIN, R_TASK, R_SIMD, R_STALL, R_WAIT, R_HOP = range(6)
TRACE_FIELDS = 6

# events: kinds (an event is ``obj << 2 | kind``), the cycles of the calendar's wheel
EV_FIRE, EV_CORE, EV_FAIL = range(3)
WHEEL = 4096

NO_INDEX = np.iinfo(np.int64).min  # a wavelet without an index


def rows(n: int, fields: int) -> np.ndarray:
    """A zeroed int64 table whose rows start on cache lines (64 bytes)."""
    raw = np.zeros(n * fields + 8, dtype=np.int64)
    skip = (-raw.ctypes.data % 64) // 8
    return raw[skip:skip + n * fields].reshape(n, fields)


def untraced() -> np.ndarray:
    """The trace records of a run that is not traced (none)."""
    return np.zeros((0, TRACE_FIELDS), dtype=np.int64)


class State(NamedTuple):
    """The run's mutable state (see the field constants above)."""

    g: np.ndarray  # int64 [GLOBAL_FIELDS]
    error: np.ndarray  # int64 [ERROR_ARGS]: error code, then its arguments
    deferred: np.ndarray  # int64 [ERROR_ARGS]: the first error of a core, reported when
    # its failure event comes (simpy raises a process's error when that event runs)
    settings: np.ndarray  # int64 [SETTINGS]
    # the event calendar (pesim.fast.calendar): a list of events per cycle of the
    # wheel (first and last node, a bit per slot in use), the nodes (next, event) and
    # the heap of events beyond the wheel (time, sequence number, event)
    slot_head: np.ndarray
    slot_tail: np.ndarray
    slot_bits: np.ndarray  # uint64
    ev_next: np.ndarray
    ev_what: np.ndarray
    late_time: np.ndarray
    late_seq: np.ndarray
    late_what: np.ndarray
    core: np.ndarray  # int64 [cores, CORE_FIELDS]
    value: np.ndarray  # float64 [cores]: the wavelet of the running data task
    env: np.ndarray  # int64 pool: each core's integer variables
    stack: np.ndarray  # float64 pool: each core's value stack
    trig_t: np.ndarray  # int64 pool: each core's trigger heap
    trig_seq: np.ndarray
    trig_task: np.ndarray
    trig_color: np.ndarray
    prof_runs: np.ndarray  # int64 pool: per core and task
    prof_busy: np.ndarray
    prof_first: np.ndarray  # the order in which a core first ran each task (-1: never)
    arr_offset: np.ndarray  # int64 pool: per core and array, its offset in its memory
    mem32: np.ndarray  # float32: every float32 local array
    mem16: np.ndarray  # uint16: every float16 local array (bit patterns)
    configured: np.ndarray  # uint8 pool: per core and SIMD variant, set up (1) or not
    ramp: np.ndarray  # int64 pool: per core and sending color slot, its RAMP buffer (or -1)
    queue: np.ndarray  # int64 [queues, QUEUE_FIELDS]
    fifo_value: np.ndarray  # float64 [queues * cap]
    fifo_index: np.ndarray  # int64
    fifo_end: np.ndarray  # int8
    queue_waiters: np.ndarray  # int64 [queues * MAX_WAITERS]: buffers
    ring_rec: np.ndarray  # int64 pool: per batched queue and ring slot, RING_RECORD fields
    buffer: np.ndarray  # int64 [buffers, BUFFER_FIELDS]
    q_ready: np.ndarray  # int64 pool: router buffers' rings and sources' streams
    q_value: np.ndarray  # float64
    q_index: np.ndarray  # int64
    q_end: np.ndarray  # int8
    buffer_waiters: np.ndarray  # int64 [buffers * MAX_WAITERS]: buffer b, or -(core + 1)
    target_kind: np.ndarray  # int64 [buffers * MAX_TARGETS]
    target_obj: np.ndarray
    target_link: np.ndarray
    link_free: np.ndarray  # int64 [links]
    link_count: np.ndarray
    sink: np.ndarray  # int64 [sinks, SINK_FIELDS]
    sink_index: np.ndarray  # int64 pool: sparse sinks' innermost index per order position
    sink_value: np.ndarray  # float64 pool: per order position
    sink_got: np.ndarray  # int8 pool: received (per order position)
    sink_time: np.ndarray  # int64 pool: the cycle it was received (per order position)
    sink_groups: np.ndarray  # int64 pool: first order position of each sparse group
    trace: np.ndarray  # int64 [records, TRACE_FIELDS]: recorded since the last drain


class Program(NamedTuple):
    """The lowered code (:class:`pesim.fast.lower.Tables`) as the kernel reads it."""

    code: np.ndarray
    ints: np.ndarray
    int_at: np.ndarray
    floats: np.ndarray
    float_at: np.ndarray
    consts: np.ndarray
    addresses: np.ndarray
    tasks: np.ndarray
    arrays: np.ndarray
    programs: np.ndarray
    queues: np.ndarray
    configs: np.ndarray
    variants: np.ndarray
    offsets: np.ndarray
    bases: np.ndarray


# Inside the kernel, the state and the program travel as numba structure references
# (one pointer) rather than as tuples of arrays: a call passing a tuple of 60 arrays
# copies every field in the generated code, which made the kernel take minutes to
# compile; by reference it takes seconds.


@structref.register
class _StateRefType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class StateRef(structref.StructRefProxy):
    """:class:`State` by reference (made in the kernel: ``StateRef(*state)``)."""


@structref.register
class _ProgramRefType(types.StructRef):
    def preprocess_fields(self, fields: Any) -> Any:
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class ProgramRef(structref.StructRefProxy):
    """:class:`Program` by reference."""


structref.define_proxy(StateRef, _StateRefType, list(State._fields))
structref.define_proxy(ProgramRef, _ProgramRefType, list(Program._fields))


def _borrowed(typingctx: Any, arrays: Any) -> Any:
    """The same tuple of arrays with their owners forgotten (a null meminfo), for use
    while the caller holds the originals. numba counts references to an array with an
    atomic increment and decrement on every access through a structure; for arrays
    without an owner both are a test of a null pointer, which made the event loop
    several times faster."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        out = args[0]
        for i, typ in enumerate(signature.args[0]):
            ary = context.make_array(typ)(context, builder, builder.extract_value(out, i))
            ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
            out = builder.insert_value(out, ary._getvalue(), i)
        return out
    return arrays(arrays), codegen


borrowed = cast(Callable[[Any], Any], intrinsic(_borrowed))
