"""The compiled engine's state, made from the simpy engine's set-up of the same run.

The simpy engine's :class:`pesim.sim._Run` builds cores, router buffers, sources and
sinks in a definite order, loads every local array and schedules the first events
(each core's start, each source's first forward) with their sequence numbers. Taking
all of that from it, rather than building it a second time, makes the two engines
start from the same state by construction; the arrays below are that state in the
layout of :mod:`pesim.fast.layout`.
"""

from __future__ import annotations

import numpy as np

from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule, PeProgram
from dtg.pesim.fast import calendar, kernel
from dtg.pesim.fast.errors import E_LEAVES_MESH, E_NO_ROUTE_DOWN, E_NO_ROUTE_ENTRY
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_CAP,
    B_COLOR,
    B_ERROR,
    B_ERROR_ARG,
    B_LEN,
    B_ON_CYCLE,
    B_PORT,
    B_SCHEDULED,
    B_SOURCE,
    B_START,
    B_TARGETS,
    B_X,
    B_Y,
    BUFFER_FIELDS,
    CONFIGURED,
    CORE_FIELDS,
    END,
    ENV,
    ERROR_ARGS,
    EV_CORE,
    EV_FIRE,
    F_BUFFER,
    F_DISPATCH,
    F_HOP,
    F_LIMIT,
    F_SCALAR_OP,
    F_STARTUP,
    G_FREE,
    GLOBAL_FIELDS,
    MAX_TARGETS,
    MAX_WAITERS,
    NO_INDEX,
    NONE,
    PC,
    PE_X_ABS,
    PE_Y_ABS,
    PORTS,
    PROFILE,
    PROGRAM,
    Q_BATCHED,
    Q_COLOR,
    Q_CONTROL,
    Q_CORE,
    Q_DATA,
    Q_RING_AT,
    QUEUE_FIELDS,
    QUEUES,
    RAMPS,
    RING_RECORD,
    SETTINGS,
    SETUP,
    SINK_FIELDS,
    SK_DENSE,
    SK_DONE,
    SK_GROUP_START,
    SK_GROUPS,
    SK_ORDER,
    SK_SIZE,
    STACK,
    START,
    T_BUFFER,
    T_CORE,
    T_SINK,
    TASK,
    TRIGGER_CAP,
    TRIGGERS,
    Program,
    State,
    rows,
    untraced,
)
from dtg.pesim.fast.lower import Tables
from dtg.pesim.routers import OPPOSITE, STEP, Buffer

STACK_EXTRA = 4  # a fabric SIMD instruction's scalar, inputs and result


class Layout:
    """Which row is what: the simpy objects behind the state's rows (for results)."""

    def __init__(self) -> None:
        self.cores: list = []  # Core objects, by core row
        self.buffers: list[Buffer] = []  # by buffer row (router buffers, then sources)
        self.links: list[tuple[tuple[int, int], tuple[int, int]]] = []  # mesh links by row
        self.reported_links = 0  # rows below this are fabric links; ramps after
        self.sinks: list = []


def program_table(t: Tables) -> Program:
    return Program(t.code, t.ints, t.int_at, t.floats, t.float_at, t.consts, t.addresses,
                   t.tasks, t.arrays, t.programs, t.queues, t.configs, t.variants,
                   t.offsets, t.bases)


def from_run(run, module: PeModule, tables: Tables, config: FabricConfig
             ) -> tuple[State, Layout]:
    """The state of ``run`` (a :class:`pesim.sim._Run` not yet started)."""
    fabric = run.fabric
    layout = Layout()
    cap = config.buffer_wavelets
    program_row = {p.name: k for k, p in enumerate(module.programs)}
    info = tables.info

    # ------------------------------------------------------------------- cores
    cores = list(fabric.cores.items())
    layout.cores = [core for _, core in cores]
    core_row = {pe: k for k, (pe, _) in enumerate(cores)}
    n = len(cores)
    core = rows(n, CORE_FIELDS)
    env_pool: list[int] = []
    stack_size = 0
    trig_size = 0
    prof_size = 0
    arr_offsets: list[int] = []
    mem32: list[np.ndarray] = []
    mem16: list[np.ndarray] = []
    size32 = size16 = 0
    configured: list[int] = []
    ramp: list[int] = []
    queues: list[list[int]] = []
    buffer_row: dict[tuple, int] = {}
    for k, b in enumerate(fabric.buffers.values()):
        buffer_row[(b.pe, b.color, b.port)] = k
    sources = list(fabric.sources)
    n_router = len(fabric.buffers)
    for k, (pe, c) in enumerate(cores):
        prog = program_row[c.code.program.name]
        pinfo = info[prog]
        row = tables.programs[prog]
        core[k, PROGRAM] = prog
        core[k, PC] = pinfo.prologue
        core[k, START] = core[k, END] = core[k, TASK] = NONE
        core[k, SETUP] = c.setup_cycles
        core[k, PE_X_ABS], core[k, PE_Y_ABS] = pe
        core[k, ENV] = len(env_pool)
        env_pool += [int(c.env.get(name, init)) for name, init in
                     zip(pinfo.slots, pinfo.int_init, strict=True)]
        depth = pinfo.stack + STACK_EXTRA
        core[k, STACK] = stack_size
        stack_size += depth
        triggers = len(pinfo.colors) * (cap + 1) + 8 + 2 * activations(c.code.program) + \
            ring_triggers(c.code.program)
        core[k, TRIGGERS], core[k, TRIGGER_CAP] = trig_size, triggers
        trig_size += triggers
        core[k, PROFILE] = prof_size
        prof_size += len(pinfo.tasks)
        core[k, ARRAYS] = len(arr_offsets)
        for name in pinfo.arrays:
            a = c.arrays[name]
            if a.dtype == np.float16:
                arr_offsets.append(size16)
                mem16.append(a.reshape(-1).view(np.uint16))
                size16 += a.size
            else:
                arr_offsets.append(size32)
                mem32.append(a.reshape(-1))
                size32 += a.size
        if c.configured is None:
            core[k, CONFIGURED] = NONE
        else:
            # indexed by variant row: this program's variants start at its first one
            core[k, CONFIGURED] = len(configured) - first_variant(tables, prog, module)
            for cfg in c.code.program.configs:
                for v in range(len(cfg.variants)):
                    configured.append(int((cfg.name, v) in c.configured))
        core[k, RAMPS] = len(ramp)
        ramp += [buffer_row.get((pe, color, "RAMP"), NONE) for color in pinfo.sends]
        core[k, QUEUES] = len(queues)
        for qrow in tables.queues[row[6]:row[6] + row[7]]:
            color, data, control, batched = (int(x) for x in qrow)
            entry = [0] * QUEUE_FIELDS
            entry[Q_CORE], entry[Q_COLOR], entry[Q_DATA] = k, color, data
            entry[Q_CONTROL], entry[Q_BATCHED] = control, batched
            queues.append(entry)

    # ----------------------------------------------------------------- buffers
    all_buffers = [*fabric.buffers.values(), *sources]
    layout.buffers = all_buffers
    nb = len(all_buffers)
    buffer = rows(nb, BUFFER_FIELDS)
    pool_size = n_router * cap + sum(len(b.q) for b in sources)
    q_ready = np.zeros(pool_size, dtype=np.int64)
    q_value = np.zeros(pool_size, dtype=np.float64)
    q_index = np.full(pool_size, NO_INDEX, dtype=np.int64)
    q_end = np.zeros(pool_size, dtype=np.int8)
    target_kind = np.zeros(nb * MAX_TARGETS, dtype=np.int64)
    target_obj = np.zeros(nb * MAX_TARGETS, dtype=np.int64)
    target_link = np.zeros(nb * MAX_TARGETS, dtype=np.int64)
    link_row: dict[tuple[tuple[int, int], tuple[int, int]], int] = {}
    ramp_links: dict[tuple[int, int], int] = {}
    sink_row = {id(sk): k for k, sk in enumerate(run.sinks)}
    queue_row = {(q[Q_CORE], q[Q_COLOR]): k for k, q in enumerate(queues)}

    def link(a: tuple[int, int], b: tuple[int, int]) -> int:
        if (a, b) not in link_row:
            link_row[(a, b)] = len(link_row)
        return link_row[(a, b)]

    ramp_targets: list[tuple[int, tuple[int, int]]] = []
    start = 0
    for k, b in enumerate(all_buffers):
        buffer[k, B_X], buffer[k, B_Y] = b.pe
        buffer[k, B_COLOR] = b.color
        buffer[k, B_PORT] = PORTS.index(b.port)
        buffer[k, B_START] = start
        buffer[k, B_ON_CYCLE] = int(b.on_cycle)
        if b.source is not None:
            buffer[k, B_SOURCE] = 1
            buffer[k, B_CAP] = 0
            for i, (ready, w) in enumerate(b.q):
                q_ready[start + i] = ready
                if w is None:
                    q_end[start + i] = 1
                else:
                    q_value[start + i] = w[0]
                    q_index[start + i] = NO_INDEX if w[1] is None else w[1]
            buffer[k, B_LEN] = len(b.q)
            start += len(b.q)
        else:
            buffer[k, B_CAP] = cap
            start += cap
        targets = []
        error = (0, 0)
        if b.source is not None:
            entry, port = b.entry, b.route[0]
            down = buffer_row.get((entry, b.color, port))
            if down is None:
                error = (E_NO_ROUTE_ENTRY, PORTS.index(port))
            else:
                targets.append((T_BUFFER, down, link(b.pe, entry)))
        else:
            for port in b.route:
                if port == "RAMP":
                    targets.append((T_CORE, queue_row[(core_row[b.pe], b.color)], -1))
                    ramp_targets.append((k * MAX_TARGETS + len(targets) - 1, b.pe))
                    continue
                dx, dy = STEP[port]
                nxt = (b.pe[0] + dx, b.pe[1] + dy)
                lk = link(b.pe, nxt)
                if not fabric.inside(nxt):
                    sink = fabric.sinks.get((nxt, b.color))
                    if sink is None:
                        error = (E_LEAVES_MESH, PORTS.index(port))
                        break
                    targets.append((T_SINK, sink_row[id(sink)], lk))
                    continue
                down = buffer_row.get((nxt, b.color, OPPOSITE[port]))
                if down is None:
                    error = (E_NO_ROUTE_DOWN, PORTS.index(port))
                    break
                targets.append((T_BUFFER, down, lk))
        buffer[k, B_ERROR], buffer[k, B_ERROR_ARG] = error
        if error[0] == 0:
            buffer[k, B_TARGETS] = len(targets)
            for i, (kind, obj, lk) in enumerate(targets):
                target_kind[k * MAX_TARGETS + i] = kind
                target_obj[k * MAX_TARGETS + i] = obj
                target_link[k * MAX_TARGETS + i] = lk
    layout.links = list(link_row)
    layout.reported_links = len(link_row)
    for t, pe in ramp_targets:
        if pe not in ramp_links:
            ramp_links[pe] = len(link_row) + len(ramp_links)
        target_link[t] = ramp_links[pe]
    n_links = len(link_row) + len(ramp_links)

    # ------------------------------------------------------------------- sinks
    layout.sinks = list(run.sinks)
    sink, sink_index, sink_groups = sink_tables(run.sinks)

    # ------------------------------------------------------------ first events
    queue = run.env._queue
    first = sorted(queue)  # (time, priority, sequence number, event): as simpy runs them
    times = np.array([e[0] for e in first], dtype=np.int64)
    kinds = np.zeros(len(first), dtype=np.int64)
    objs = np.zeros(len(first), dtype=np.int64)
    source_row = {id(b): n_router + k for k, b in enumerate(sources)}
    inits = sorted((entry for entry in queue if not hasattr(entry[3], "clock")),
                   key=lambda e: e[2])
    init_core = {id(e[3]): k for k, e in enumerate(inits)}  # in order of creation
    for i, (_, _, _, event) in enumerate(first):
        if id(event) in init_core:
            kinds[i], objs[i] = EV_CORE, init_core[id(event)]
        else:
            buf = event.callbacks[0].__self__
            kinds[i], objs[i] = EV_FIRE, source_row[id(buf)]
            buffer[source_row[id(buf)], B_SCHEDULED] = 1
    g = np.zeros(GLOBAL_FIELDS, dtype=np.int64)
    g[G_FREE] = 0
    settings = np.zeros(SETTINGS, dtype=np.int64)
    settings[F_BUFFER], settings[F_HOP] = cap, config.hop_cycles
    settings[F_DISPATCH], settings[F_SCALAR_OP] = config.task_dispatch, config.scalar_op
    settings[F_STARTUP], settings[F_LIMIT] = config.simd_startup, config.cycle_limit
    nq = len(queues)
    queue = np.array(queues, dtype=np.int64).reshape(nq, QUEUE_FIELDS)
    state = State(
        g=g, error=np.zeros(ERROR_ARGS, dtype=np.int64),
        deferred=np.zeros(ERROR_ARGS, dtype=np.int64), settings=settings,
        **calendar.empty(nb + 2 * n + 16),
        core=core, value=np.zeros(n), env=np.array(env_pool, dtype=np.int64),
        stack=np.zeros(stack_size),
        trig_t=np.zeros(trig_size, dtype=np.int64), trig_seq=np.zeros(trig_size, dtype=np.int64),
        trig_task=np.zeros(trig_size, dtype=np.int64),
        trig_color=np.zeros(trig_size, dtype=np.int64),
        prof_runs=np.zeros(prof_size, dtype=np.int64),
        prof_busy=np.zeros(prof_size, dtype=np.int64),
        prof_first=np.full(prof_size, -1, dtype=np.int64),
        arr_offset=np.array(arr_offsets, dtype=np.int64),
        mem32=(np.concatenate(mem32) if mem32 else np.zeros(0, dtype=np.float32)),
        mem16=(np.concatenate(mem16) if mem16 else np.zeros(0, dtype=np.uint16)),
        configured=np.array(configured, dtype=np.uint8),
        ramp=np.array(ramp, dtype=np.int64),
        queue=queue,
        fifo_value=np.zeros(nq * cap), fifo_index=np.full(nq * cap, NO_INDEX, dtype=np.int64),
        fifo_end=np.zeros(nq * cap, dtype=np.int8),
        queue_waiters=np.zeros(nq * MAX_WAITERS, dtype=np.int64),
        ring_rec=np.zeros(ring_offsets(queue, tables), dtype=np.int64),
        buffer=buffer, q_ready=q_ready, q_value=q_value, q_index=q_index, q_end=q_end,
        buffer_waiters=np.zeros(nb * MAX_WAITERS, dtype=np.int64),
        target_kind=target_kind, target_obj=target_obj, target_link=target_link,
        link_free=np.zeros(n_links, dtype=np.int64), link_count=np.zeros(n_links, dtype=np.int64),
        sink=sink, sink_index=sink_index,
        sink_value=np.zeros(len(sink_index)), sink_got=np.zeros(len(sink_index), dtype=np.int8),
        sink_time=np.zeros(len(sink_index), dtype=np.int64),
        sink_groups=sink_groups,
        trace=untraced())
    kernel.start(state, times, kinds, objs)
    return state, layout


def sink_tables(sinks: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sinks' rows, each order position's index (sparse sinks) and the first order
    position of each sparse group."""
    sink = np.zeros((len(sinks), SINK_FIELDS), dtype=np.int64)
    sink_index: list[int] = []
    sink_groups: list[int] = []
    for k, sk in enumerate(sinks):
        sink[k, SK_DENSE] = int(sk.kind == "dense")
        sink[k, SK_ORDER] = len(sink_index)
        sink[k, SK_SIZE] = len(sk.order)
        sink[k, SK_DONE] = NONE
        sink[k, SK_GROUPS] = len(sk.groups)
        sink[k, SK_GROUP_START] = len(sink_groups)
        if sk.kind == "dense":
            sink_index += [NO_INDEX] * len(sk.order)
            sink_groups.append(0)
            continue
        position = 0
        for group in sk.groups:
            sink_groups.append(position)
            sink_index += list(group)
            position += len(group)
        sink_groups.append(position)
    return (sink, np.array(sink_index, dtype=np.int64),
            np.array(sink_groups, dtype=np.int64))


def first_variant(tables: Tables, prog: int, module: PeModule) -> int:
    """The row of program ``prog``'s first SIMD variant in the variant table."""
    first_config = sum(len(p.configs) for p in module.programs[:prog])
    if first_config >= len(tables.configs):
        return 0
    return int(tables.configs[first_config, 4])


def ring_offsets(queue: np.ndarray, tables: Tables) -> int:
    """Each batched queue's first record in the pool of ring records (``Q_RING_AT``:
    RING_RECORD per slot of its ring, in queue order), and the pool's size."""
    sizes = np.where(queue[:, Q_BATCHED] != 0,
                     RING_RECORD * tables.tasks[np.maximum(queue[:, Q_DATA], 0), 10], 0)
    queue[:, Q_RING_AT] = np.cumsum(sizes) - sizes
    return int(sizes.sum())


def ring_triggers(program: PeProgram) -> int:
    """Triggers a program's landing rings may have pending beyond one per color: per
    ring of N, N closed batches and N end marks landed ahead."""
    return sum(2 * t.ring for t in program.tasks if t.batch is not None and t.ring > 1)


def activations(program) -> int:
    from dtg.pe.ir import Activate, For, If

    def count(body) -> int:
        total = 0
        for st in body:
            if isinstance(st, Activate):
                total += 1
            elif isinstance(st, For):
                total += count(st.body)
            elif isinstance(st, If):
                total += count(st.then) + count(st.orelse)
        return total

    return sum(count(t.body) for t in program.tasks)


__all__ = ["Layout", "activations", "first_variant", "from_run", "program_table",
           "sink_tables"]
