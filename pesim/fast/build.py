"""The compiled engine's state built in arrays over PEs: no Python object per PE, router
or queue, so that the set-up of a 632 x 632 mesh takes seconds and a few hundred bytes a
PE beyond its local arrays.

It makes the same state as :func:`pesim.fast.setup.from_run` makes from the simpy
engine's set-up (rows in the same order, the same first events; tested equal array by
array): each program's PEs as arrays of coordinates (a box of PEs without enumerating
it), guards and offsets evaluated for all of them at once (:mod:`pesim.fast.vector`),
local arrays loaded by one gather per array, routes resolved by sorting keys. Input
and output streams, one object per external PE, are made by the simpy engine's own code
(:meth:`pesim.sim._Run.stream`) on a fabric with no mesh.

What it does not build yet raises :class:`NotInArrays` (load and store sets, arrays
stored to outputs, routes on a cycle, a route that lists a buffer twice), and the
engine then sets up through the simpy engine as before: slower, the same run.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np
import simpy

from dtg.lair.limits import MAX_SECONDS
from dtg.pe.fabric import FabricConfig
from dtg.pe.ir import PeModule, PeProgram
from dtg.pesim.code import ProgramCode
from dtg.pesim.fast import calendar, kernel
from dtg.pesim.fast.errors import E_LEAVES_MESH, E_NO_ROUTE_DOWN, E_NO_ROUTE_ENTRY
from dtg.pesim.fast.layout import (
    ARRAYS,
    B_CAP,
    B_COLOR,
    B_ERROR,
    B_ERROR_ARG,
    B_LEN,
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
    QUEUE_FIELDS,
    QUEUES,
    RAMPS,
    SETTINGS,
    SETUP,
    STACK,
    START,
    T_BUFFER,
    T_CORE,
    T_SINK,
    TASK,
    TRIGGER_CAP,
    TRIGGERS,
    State,
    rows,
    untraced,
)
from dtg.pesim.fast.lower import Tables
from dtg.pesim.fast.scope import not_in_arrays
from dtg.pesim.fast.setup import (
    STACK_EXTRA,
    activations,
    first_variant,
    ring_offsets,
    ring_triggers,
    sink_tables,
)
from dtg.pesim.routers import OPPOSITE, STEP, Deadline, Fabric
from dtg.pesim.sim import NUMPY, TensorInfo, _Run
from dtg.pesim.vector import box_elements, cvalues
from dtg.pesim.verify import pe_coordinates


class NotInArrays(Exception):
    """The module uses something the set-up in arrays does not build yet."""


@dataclass
class Grid:
    """Which row is what, in arrays: each core's PE and program, each router buffer's
    PE, color and port, each link's ends (rows of sources follow the router buffers)."""

    core_x: np.ndarray
    core_y: np.ndarray
    core_program: np.ndarray
    link_from: np.ndarray  # [links, 2]: the mesh links by row (ramps are not reported)
    link_to: np.ndarray
    routers: int  # router buffers; sources after them


unsupported = not_in_arrays


def build(module: PeModule, inputs: dict[str, np.ndarray], outputs: dict[str, TensorInfo],
          tables: Tables, config: FabricConfig) -> tuple[State, Grid, _Run]:
    """The state of a run of ``module`` on ``inputs``, and a simpy run object holding
    only its streams (sources and sinks) for the results."""
    why = unsupported(module)
    if why is not None:
        raise NotInArrays(why)
    width, height = module.width, module.height
    cap = config.buffer_wavelets
    info = tables.info

    # ------------------------------------------------------------------- cores
    xs, ys, progs = [], [], []
    for k, program in enumerate(module.programs):
        x, y = pe_coordinates(program, width, height)
        xs.append(x)
        ys.append(y)
        progs.append(np.full(x.size, k, dtype=np.int64))
    core_x, core_y = np.concatenate(xs), np.concatenate(ys)
    core_program = np.concatenate(progs)
    n = core_x.size
    core = rows(n, CORE_FIELDS)
    core[:, PROGRAM] = core_program
    core[:, START] = core[:, END] = core[:, TASK] = NONE
    core[:, PE_X_ABS], core[:, PE_Y_ABS] = core_x, core_y
    env_parts: list[np.ndarray] = []
    mem16_parts: list[np.ndarray] = []
    mem32_parts: list[np.ndarray] = []
    offsets_parts: list[np.ndarray] = []
    configured_parts: list[np.ndarray] = []
    ramp_parts: list[np.ndarray] = []
    queue_parts: list[np.ndarray] = []
    counters = dict.fromkeys(("env", "stack", "triggers", "profile", "arrays", "size16",
                              "size32", "configured", "ramps", "queues"), 0)
    first = 0
    per_program = []
    for prog, program in enumerate(module.programs):
        count = xs[prog].size
        block = slice(first, first + count)
        per_program.append(block)
        first += count
        if not count:
            continue
        pinfo = info[prog]
        ox, oy = program.origin
        env = {"PE_X": xs[prog] - ox, "PE_Y": ys[prog] - oy}
        inits = {v.name: v.init for v in program.ints}
        index = np.arange(count, dtype=np.int64)
        core[block, PC] = pinfo.prologue
        # integer variables
        slots = len(pinfo.slots)
        values = np.empty((count, slots), dtype=np.int64)
        for i, (name, init) in enumerate(zip(pinfo.slots, pinfo.int_init, strict=True)):
            values[:, i] = env[name] if name in env else inits.get(name, init)
        core[block, ENV] = counters["env"] + index * slots
        counters["env"] += count * slots
        env_parts.append(values.reshape(-1))
        # stack, triggers, profile
        depth = pinfo.stack + STACK_EXTRA
        core[block, STACK] = counters["stack"] + index * depth
        counters["stack"] += count * depth
        triggers = len(pinfo.colors) * (cap + 1) + 8 + 2 * activations(program) + \
            ring_triggers(program)
        core[block, TRIGGERS] = counters["triggers"] + index * triggers
        core[block, TRIGGER_CAP] = triggers
        counters["triggers"] += count * triggers
        core[block, PROFILE] = counters["profile"] + index * len(pinfo.tasks)
        counters["profile"] += count * len(pinfo.tasks)
        # local arrays
        arrays = {a.name: a for a in program.arrays}
        core[block, ARRAYS] = counters["arrays"] + index * len(pinfo.arrays)
        counters["arrays"] += count * len(pinfo.arrays)
        sizes = {"size16": 0, "size32": 0}
        within = np.zeros(len(pinfo.arrays), dtype=np.int64)
        pools = []
        for i, name in enumerate(pinfo.arrays):
            kind = "size16" if NUMPY[arrays[name].dtype] == np.float16 else "size32"
            within[i] = sizes[kind]
            sizes[kind] += prod(arrays[name].shape)
            pools.append(kind)
        block16: list[np.ndarray] = []
        block32: list[np.ndarray] = []
        offsets = np.empty((count, len(pinfo.arrays)), dtype=np.int64)
        for i, name in enumerate(pinfo.arrays):
            kind = pools[i]
            offsets[:, i] = counters[kind] + index * sizes[kind] + within[i]
            data = _local(program, arrays[name], env, count, inputs)
            (block16 if kind == "size16" else block32).append(data)
        for kind, parts, pool in (("size16", block16, mem16_parts),
                                  ("size32", block32, mem32_parts)):
            if parts:
                merged = np.concatenate(parts, axis=1).reshape(-1)
                pool.append(merged.view(np.uint16) if kind == "size16" else merged)
            counters[kind] += count * sizes[kind]
        offsets_parts.append(offsets.reshape(-1))
        # SIMD configurations set up (guards), their set-up cycles
        code = ProgramCode(program, config)
        variants = [(c.name, v, g) for c in program.configs
                    for v, g in enumerate(c.guards or (None,) * len(c.variants))]
        flags = np.ones((count, len(variants)), dtype=np.uint8)
        for i, (_, _, guard) in enumerate(variants):
            if guard is not None:
                flags[:, i] = cvalues(guard, env, count)
        core[block, SETUP] = config.simd_config * flags.sum(axis=1, dtype=np.int64)
        if code.setup.guarded:
            start = counters["configured"] - first_variant(tables, prog, module)
            core[block, CONFIGURED] = start + index * len(variants)
            counters["configured"] += count * len(variants)
            configured_parts.append(flags.reshape(-1))
        else:
            core[block, CONFIGURED] = NONE
        # queues
        row = tables.programs[prog]
        qrows = tables.queues[row[6]:row[6] + row[7]]
        core[block, QUEUES] = counters["queues"] + index * len(qrows)
        counters["queues"] += count * len(qrows)
        q = np.zeros((count, len(qrows), QUEUE_FIELDS), dtype=np.int64)
        q[:, :, Q_CORE] = (block.start + index)[:, None]
        q[:, :, Q_COLOR] = qrows[:, 0]
        q[:, :, Q_DATA] = qrows[:, 1]
        q[:, :, Q_CONTROL] = qrows[:, 2]
        q[:, :, Q_BATCHED] = qrows[:, 3]
        queue_parts.append(q.reshape(-1, QUEUE_FIELDS))
        core[block, RAMPS] = counters["ramps"] + index * len(pinfo.sends)
        counters["ramps"] += count * len(pinfo.sends)

    # ----------------------------------------------------------- router buffers
    keys = _Keys(width, height)
    b_core, b_route, b_prog = [], [], []
    for prog, program in enumerate(module.programs):
        block = per_program[prog]
        count = block.stop - block.start
        if not count:
            continue
        ox, oy = program.origin
        env = {"PE_X": xs[prog] - ox, "PE_Y": ys[prog] - oy}
        for r, route in enumerate(program.routes):
            holds = (np.ones(count, dtype=bool) if route.guard is None
                     else cvalues(route.guard, env, count))
            chosen = np.flatnonzero(holds)
            b_core.append(block.start + chosen)
            b_route.append(np.full(chosen.size, r, dtype=np.int64))
            b_prog.append(np.full(chosen.size, prog, dtype=np.int64))
    if b_core:
        bc, br, bp = np.concatenate(b_core), np.concatenate(b_route), np.concatenate(b_prog)
        order = np.lexsort((br, bc))  # as the simpy engine adds them: by PE, then route
        bc, br, bp = bc[order], br[order], bp[order]
    else:
        bc = br = bp = np.zeros(0, dtype=np.int64)
    nr = bc.size
    routes = [(prog, r, route) for prog, program in enumerate(module.programs)
              for r, route in enumerate(program.routes)]
    first_route = np.cumsum([0] + [len(p.routes) for p in module.programs])
    rid = first_route[bp] + br  # each buffer's route, numbered over the module
    color = np.array([route.color for _, _, route in routes] or [0], dtype=np.int64)[rid]
    port = np.array([PORTS.index(route.source) for _, _, route in routes] or [0],
                    dtype=np.int64)[rid]
    bx, by = core_x[bc], core_y[bc]
    bkey = keys.buffer(bx, by, color, port)
    sorted_keys, unique_at = np.unique(bkey, return_index=True)
    if sorted_keys.size != nr:
        raise NotInArrays("two routes of a PE share a color and an entry port")
    row_of_sorted = unique_at  # buffer row of each sorted key

    def find(x: np.ndarray, y: np.ndarray, c: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The router buffer rows of (PE, color, port) keys (NONE where there is none)."""
        k = keys.buffer(x, y, c, p)
        at = np.searchsorted(sorted_keys, k)
        at = np.minimum(at, max(sorted_keys.size - 1, 0))
        found = (sorted_keys.size > 0) & (sorted_keys[at] == k) if sorted_keys.size else \
            np.zeros(k.size, dtype=bool)
        return np.where(found, row_of_sorted[at] if sorted_keys.size else 0, NONE)

    # ------------------------------------------------------- streams (sources, sinks)
    run = _stream_run(module, inputs, outputs, config)
    sinks = run.sinks
    sink_key = {(sk.ext, sk.color): k for k, sk in enumerate(sinks)}
    sources = list(run.fabric.sources)

    # targets, in the order of each route's ports; links numbered by first use
    target_kind = np.zeros((nr + len(sources)) * MAX_TARGETS, dtype=np.int64)
    target_obj = np.zeros_like(target_kind)
    target_link = np.zeros_like(target_kind)
    n_targets = np.zeros(nr, dtype=np.int64)
    error = np.zeros(nr, dtype=np.int64)
    error_arg = np.zeros(nr, dtype=np.int64)
    stopped = np.zeros(nr, dtype=bool)  # an earlier port of the route failed
    link_rows: list[np.ndarray] = []  # (buffer row, slot, link key) where links are used
    ramp_targets: list[np.ndarray] = []
    slot_of_color = _queue_slots(module, tables)
    successors: list[tuple[np.ndarray, np.ndarray]] = []
    longest = max((len(route.targets) for _, _, route in routes), default=0)
    if longest > MAX_TARGETS:
        raise NotInArrays(f"a route with {longest} targets")
    route_ports = [route.targets for _, _, route in routes]
    for slot in range(longest):
        for name in dict.fromkeys(p[slot] for p in route_ports if slot < len(p)):
            takes = np.array([slot < len(p) and p[slot] == name for p in route_ports])
            pick = np.flatnonzero(takes[rid] & ~stopped)
            if not pick.size:
                continue
            t = pick * MAX_TARGETS + n_targets[pick]
            if name == "RAMP":
                slots = slot_of_color(core_program[bc[pick]], color[pick])
                if np.any(slots < 0):
                    raise NotInArrays("a route to RAMP on a color without a queue")
                target_kind[t] = T_CORE
                target_obj[t] = core[bc[pick], QUEUES] + slots
                ramp_targets.append(np.stack([pick, t]))
                n_targets[pick] += 1
                continue
            dx, dy = STEP[name]
            nx, ny = bx[pick] + dx, by[pick] + dy
            link_rows.append(np.stack([pick, np.full(pick.size, slot),
                                       keys.link(bx[pick], by[pick], nx, ny), t]))
            inside = (nx >= 0) & (nx < width) & (ny >= 0) & (ny < height)
            out = pick[~inside]
            if out.size:  # (a sink per external PE and color: few)
                ext_rows = np.array([sink_key.get(((int(x), int(y)), int(c)), NONE)
                                     for x, y, c in zip(nx[~inside], ny[~inside], color[out],
                                                        strict=True)], dtype=np.int64)
                bad = ext_rows == NONE
                tt = t[~inside]
                target_kind[tt[~bad]] = T_SINK
                target_obj[tt[~bad]] = ext_rows[~bad]
                n_targets[out[~bad]] += 1
                error[out[bad]] = E_LEAVES_MESH
                error_arg[out[bad]] = PORTS.index(name)
                stopped[out[bad]] = True
            into = pick[inside]
            down = find(nx[inside], ny[inside], color[into],
                        np.full(into.size, PORTS.index(OPPOSITE[name])))
            missing = down == NONE
            ti = t[inside]
            target_kind[ti[~missing]] = T_BUFFER
            target_obj[ti[~missing]] = down[~missing]
            n_targets[into[~missing]] += 1
            error[into[missing]] = E_NO_ROUTE_DOWN
            error_arg[into[missing]] = PORTS.index(name)
            stopped[into[missing]] = True
            successors.append((into[~missing], down[~missing]))
    if _on_cycle(nr, successors):
        raise NotInArrays("routes that form a cycle")

    # links: numbered by first use, router buffers in row order and their ports in
    # order, then each source's link into the mesh, then a ramp link per PE
    if link_rows:
        used = np.concatenate(link_rows, axis=1)
        order = np.lexsort((used[1], used[0]))
        used = used[:, order]
    else:
        used = np.zeros((4, 0), dtype=np.int64)
    entries = [b.entry for b in sources]
    assert all(e is not None for e in entries)
    source_links = keys.link(np.array([b.pe[0] for b in sources], dtype=np.int64),
                             np.array([b.pe[1] for b in sources], dtype=np.int64),
                             np.array([e[0] for e in entries], dtype=np.int64),  # type: ignore[index]
                             np.array([e[1] for e in entries], dtype=np.int64))  # type: ignore[index]
    all_keys = np.concatenate([used[2], source_links])
    distinct, first_use, link_of = np.unique(all_keys, return_index=True, return_inverse=True)
    number = np.empty(distinct.size, dtype=np.int64)
    number[np.argsort(first_use, kind="stable")] = np.arange(distinct.size)
    link_ids = number[link_of]
    target_link[used[3]] = link_ids[:used.shape[1]]
    n_links = distinct.size
    link_from, link_to = keys.ends(distinct[np.argsort(number)])
    if ramp_targets:
        ramps = np.concatenate(ramp_targets, axis=1)
        order = np.argsort(ramps[1], kind="stable")  # by buffer row and slot
        ramps = ramps[:, order]
        pe_key = bx[ramps[0]] * (height + 2) + by[ramps[0]]
        pes, first_pe, which = np.unique(pe_key, return_index=True, return_inverse=True)
        ramp_number = np.empty(pes.size, dtype=np.int64)
        ramp_number[np.argsort(first_pe, kind="stable")] = np.arange(pes.size)
        target_link[ramps[1]] = n_links + ramp_number[which]
        n_links += pes.size

    # ramps of the cores: the RAMP buffer of each color a program sends on
    for prog in range(len(module.programs)):
        block = per_program[prog]
        count = block.stop - block.start
        sends = info[prog].sends
        if not count or not sends:
            continue
        got = np.empty((count, len(sends)), dtype=np.int64)
        for i, c in enumerate(sends):
            got[:, i] = find(core_x[block], core_y[block], np.full(count, c),
                             np.full(count, PORTS.index("RAMP")))
        ramp_parts.append(got.reshape(-1))

    # ------------------------------------------------------------ buffer table
    nb = nr + len(sources)
    buffer = rows(nb, BUFFER_FIELDS)
    buffer[:nr, B_X], buffer[:nr, B_Y] = bx, by
    buffer[:nr, B_COLOR], buffer[:nr, B_PORT] = color, port
    buffer[:nr, B_START] = np.arange(nr, dtype=np.int64) * cap
    buffer[:nr, B_CAP] = cap
    buffer[:nr, B_ERROR], buffer[:nr, B_ERROR_ARG] = error, error_arg
    buffer[:nr, B_TARGETS] = np.where(error == 0, n_targets, 0)
    wrong = np.flatnonzero(error)
    for bad in wrong.tolist():  # (a failed route has no targets: as the simpy engine's)
        target_kind[bad * MAX_TARGETS:(bad + 1) * MAX_TARGETS] = 0
        target_obj[bad * MAX_TARGETS:(bad + 1) * MAX_TARGETS] = 0
    ring = nr * cap + sum(len(b.q) for b in sources)
    q_ready = np.zeros(ring, dtype=np.int64)
    q_value = np.zeros(ring, dtype=np.float64)
    q_index = np.full(ring, NO_INDEX, dtype=np.int64)
    q_end = np.zeros(ring, dtype=np.int8)
    start = nr * cap
    for i, b in enumerate(sources):  # (one per external PE)
        k = nr + i
        buffer[k, B_X], buffer[k, B_Y] = b.pe
        buffer[k, B_COLOR], buffer[k, B_PORT] = b.color, PORTS.index(b.port)
        buffer[k, B_START], buffer[k, B_SOURCE], buffer[k, B_CAP] = start, 1, 0
        for j, (ready, wavelet) in enumerate(b.q):
            q_ready[start + j] = ready
            if wavelet is None:
                q_end[start + j] = 1
            else:
                q_value[start + j] = wavelet[0]
                q_index[start + j] = NO_INDEX if wavelet[1] is None else wavelet[1]
        buffer[k, B_LEN] = len(b.q)
        start += len(b.q)
        entry_port, (ex, ey) = b.route[0], entries[i]  # type: ignore[misc]
        down = find(np.array([ex]), np.array([ey]), np.array([b.color]),
                    np.array([PORTS.index(entry_port)]))[0]
        if down == NONE:
            buffer[k, B_ERROR], buffer[k, B_ERROR_ARG] = E_NO_ROUTE_ENTRY, PORTS.index(entry_port)
        else:
            buffer[k, B_TARGETS] = 1
            target_kind[k * MAX_TARGETS] = T_BUFFER
            target_obj[k * MAX_TARGETS] = down
            target_link[k * MAX_TARGETS] = link_ids[used.shape[1] + i]
    sink, sink_index, sink_groups = sink_tables(sinks)

    # ------------------------------------------------------------------- state
    g = np.zeros(GLOBAL_FIELDS, dtype=np.int64)
    g[G_FREE] = 0
    settings = np.zeros(SETTINGS, dtype=np.int64)
    settings[F_BUFFER], settings[F_HOP] = cap, config.hop_cycles
    settings[F_DISPATCH], settings[F_SCALAR_OP] = config.task_dispatch, config.scalar_op
    settings[F_STARTUP], settings[F_LIMIT] = config.simd_startup, config.cycle_limit
    queue = (np.concatenate(queue_parts) if queue_parts
             else np.zeros((0, QUEUE_FIELDS), dtype=np.int64))
    nq = len(queue)
    state = State(
        g=g, error=np.zeros(ERROR_ARGS, dtype=np.int64),
        deferred=np.zeros(ERROR_ARGS, dtype=np.int64), settings=settings,
        **calendar.empty(nb + 2 * n + 16),
        core=core, value=np.zeros(n), env=_joined(env_parts, np.int64),
        stack=np.zeros(counters["stack"]),
        trig_t=np.zeros(counters["triggers"], dtype=np.int64),
        trig_seq=np.zeros(counters["triggers"], dtype=np.int64),
        trig_task=np.zeros(counters["triggers"], dtype=np.int64),
        trig_color=np.zeros(counters["triggers"], dtype=np.int64),
        prof_runs=np.zeros(counters["profile"], dtype=np.int64),
        prof_busy=np.zeros(counters["profile"], dtype=np.int64),
        prof_first=np.full(counters["profile"], -1, dtype=np.int64),
        arr_offset=_joined(offsets_parts, np.int64), mem32=_joined(mem32_parts, np.float32),
        mem16=_joined(mem16_parts, np.uint16), configured=_joined(configured_parts, np.uint8),
        ramp=_joined(ramp_parts, np.int64), queue=queue,
        fifo_value=np.zeros(nq * cap), fifo_index=np.full(nq * cap, NO_INDEX, dtype=np.int64),
        fifo_end=np.zeros(nq * cap, dtype=np.int8),
        queue_waiters=np.zeros(nq * MAX_WAITERS, dtype=np.int64),
        ring_rec=np.zeros(ring_offsets(queue, tables), dtype=np.int64),
        buffer=buffer, q_ready=q_ready, q_value=q_value, q_index=q_index, q_end=q_end,
        buffer_waiters=np.zeros(nb * MAX_WAITERS, dtype=np.int64),
        target_kind=target_kind, target_obj=target_obj, target_link=target_link,
        link_free=np.zeros(n_links, dtype=np.int64), link_count=np.zeros(n_links, dtype=np.int64),
        sink=sink, sink_index=sink_index, sink_value=np.zeros(sink_index.size),
        sink_got=np.zeros(sink_index.size, dtype=np.int8),
        sink_time=np.zeros(sink_index.size, dtype=np.int64), sink_groups=sink_groups,
        trace=untraced())
    # the first events, as simpy orders them: every core's start (urgent, in order of
    # creation), then every source's first forward
    started = [k for k, b in enumerate(sources) if b.q]
    buffer[nr + np.array(started, dtype=np.int64), B_SCHEDULED] = 1
    times = np.zeros(n + len(started), dtype=np.int64)
    first_kinds = np.concatenate([np.full(n, EV_CORE), np.full(len(started), EV_FIRE)])
    objs = np.concatenate([np.arange(n), nr + np.array(started, dtype=np.int64)])
    kernel.start(state, times, first_kinds.astype(np.int64), objs.astype(np.int64))
    grid = Grid(core_x, core_y, core_program, link_from, link_to, nr)
    return state, grid, run


# ------------------------------------------------------------------ helpers


def _local(program: PeProgram, a, env: dict[str, np.ndarray], count: int,
           inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Array ``a`` on each of ``count`` PEs, flattened ([count, size]): its initial
    value, and where it loads a tensor, the elements of its box inside the tensor."""
    dtype = NUMPY[a.dtype]
    size = prod(a.shape)
    fill = 0 if a.init is None else a.init
    if a.load is None:
        return np.full((count, size), fill, dtype=dtype)
    data = inputs.get(a.load)
    if data is None or data.ndim != len(a.shape):
        raise NotInArrays(f"array {a.name} loads {a.load}, not an input of its rank")
    found = box_elements(a, a.load, a.load_set, data.shape, env, count)
    if found is None:
        raise NotInArrays(f"array {a.name} has a load set beyond affine constraints")
    valid, where = found
    if data.size == 0:
        return np.full((count, size), fill, dtype=dtype)
    inside = tuple(np.clip(g, 0, n - 1) for g, n in zip(where, data.shape, strict=True))
    values = data[inside].astype(dtype)
    return np.where(valid, values, np.asarray(fill, dtype=dtype)).reshape(count, size)


class _Keys:
    """Integer keys of (PE, color, port) and of links between PEs (external PEs, one
    step outside the mesh, included), for lookups by sorting."""

    COLORS, PORTS_ = 1 << 16, 8

    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width + 2, height + 2

    def pe(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return (x + 1) * self.h + (y + 1)

    def buffer(self, x: np.ndarray, y: np.ndarray, c: np.ndarray, p: np.ndarray
               ) -> np.ndarray:
        return (self.pe(x, y) * self.COLORS + c) * self.PORTS_ + p

    def link(self, ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray
             ) -> np.ndarray:
        return self.pe(ax, ay) * (self.w * self.h) + self.pe(bx, by)

    def ends(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = np.divmod(keys, self.w * self.h)
        return (np.stack(np.divmod(a, self.h), axis=1) - 1,
                np.stack(np.divmod(b, self.h), axis=1) - 1)


def _queue_slots(module: PeModule, tables: Tables):
    """A function of (programs, colors) arrays: each one's queue slot (-1: none)."""
    slots = {}
    for prog in range(len(module.programs)):
        row = tables.programs[prog]
        for i, qrow in enumerate(tables.queues[row[6]:row[6] + row[7]]):
            slots[(prog, int(qrow[0]))] = i

    def find(progs: np.ndarray, colors: np.ndarray) -> np.ndarray:
        pairs = np.stack([progs, colors], axis=1)
        kinds, which = np.unique(pairs, axis=0, return_inverse=True)
        looked = np.array([slots.get((int(p), int(c)), -1) for p, c in kinds],
                          dtype=np.int64)
        return looked[which.reshape(-1)]

    return find


def _on_cycle(n: int, edges: list[tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether the buffer graph has a cycle (buffers left when those nothing enters are
    taken away, again and again)."""
    if not edges or n == 0:
        return False
    src = np.concatenate([e[0] for e in edges])
    dst = np.concatenate([e[1] for e in edges])
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    start = np.searchsorted(src, np.arange(n + 1))
    indegree = np.bincount(dst, minlength=n)
    frontier = np.flatnonzero(indegree == 0)
    removed = frontier.size
    while frontier.size:
        lo, hi = start[frontier], start[frontier + 1]
        lengths = hi - lo
        if not lengths.sum():
            break
        idx = np.repeat(lo - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        targets = dst[idx]
        np.subtract.at(indegree, targets, 1)
        frontier = np.unique(targets[indegree[targets] == 0])
        removed += frontier.size
    return removed < n


def _stream_run(module: PeModule, inputs: dict[str, np.ndarray],
                outputs: dict[str, TensorInfo], config: FabricConfig) -> _Run:
    """A simpy run object with the module's streams only: its sources and sinks, made
    by the simpy engine's code (one object per external PE)."""
    run = _Run.__new__(_Run)
    run.module, run.inputs, run.outputs, run.config = module, inputs, outputs, config
    run.deadline = Deadline(MAX_SECONDS)
    run.env = simpy.Environment()
    run.fabric = Fabric(run.env, config, module.width, module.height, run.deadline)
    run.sinks, run.source_starts = [], []
    run.sets, run.halfspaces = {}, {}
    run.complete = True
    for k, stream in enumerate(module.streams):
        run.stream(stream, k)
    return run


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


__all__ = ["Grid", "NotInArrays", "build", "unsupported"]
