"""``dtg place``: a network's layers onto regions of the wafer, and the mapping that
links them (``mapping/network.py``, ``mapping/netplace.py``, docs/networks.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from dtg.lair.cli import UsageError
from dtg.lair.files import check_distinct, write_atomically
from dtg.lair.frontend import load_program
from dtg.lair.graph import Graph
from dtg.mapping.netplace import network_mapping, place
from dtg.mapping.network import NetworkPlan, parse_plan_file, print_plan
from dtg.pesim.cli import seed_arg


def add_parser(sub: Any, wafer: Callable[[str], tuple[int, int]]) -> None:
    cmd = sub.add_parser(
        "place", help="place a network's layers on regions of the wafer and write the "
                      "mapping that links them")
    cmd.add_argument("program", metavar="NET.lair")
    cmd.add_argument("--wafer", type=wafer, metavar="PE[W, H]",
                     help="the wafer to place the layers on (needed without --plan)")
    cmd.add_argument("--plan", metavar="PLAN.net",
                     help="a plan written by hand (default: chosen automatically)")
    cmd.add_argument("--stream", action="append", default=None, metavar="TENSOR",
                     help="an input that streams in at the first layer (repeatable; default: "
                          "the inputs not in NET.npz beside the program)")
    cmd.add_argument("-o", "--output", metavar="DIR",
                     help="where NET.net and NET.map go (default: beside the program)")


def streamed_inputs(graph: Graph, program: Path, given: list[str] | None) -> tuple[str, ...]:
    """The inputs that stream in: as given, or those not among the weights in the
    ``.npz`` beside the program (``dtg import`` writes the initializers there)."""
    if given:
        return tuple(dict.fromkeys(given))
    weights = program.with_suffix(".npz")
    if not weights.exists():
        raise UsageError(f"which inputs stream in? {weights} (the weights) does not exist; "
                         "name them with --stream TENSOR")
    with np.load(weights) as data:
        resident = set(data.files)
    return tuple(t.name for t in graph.inputs if t.name not in resident)


def place_network(args: argparse.Namespace) -> None:
    program_path = Path(args.program)
    program = load_program(program_path)
    graph = program.graph
    if args.plan is not None:
        plan = parse_plan_file(args.plan)
        if args.stream:
            plan = NetworkPlan(plan.wafer, tuple(args.stream), plan.layers, plan.file, plan.loc)
        automatic = False
    else:
        if args.wafer is None:
            raise UsageError("give the wafer (--wafer 'PE[632, 632]') or a plan (--plan)")
        plan = place(graph, args.wafer, streamed_inputs(graph, program_path, args.stream))
        automatic = True
    mapping = network_mapping(graph, plan)  # (verifies the plan against the program)
    out = Path(args.output) if args.output else program_path.parent
    if out.exists() and not out.is_dir():
        raise UsageError(f"-o {out}: not a directory")
    out.mkdir(parents=True, exist_ok=True)
    stem = program_path.stem
    net, map_path = out / f"{stem}.net", out / f"{stem}.map"
    written = [(map_path, "the mapping")] + ([(net, "the plan")] if automatic else [])
    check_distinct(written, [(program_path, "the program")] + (
        [(Path(args.plan), "the plan")] if args.plan else []))
    box = plan.bounding_box()
    header = (f"Placed by dtg place on the wafer PE[{plan.wafer[0]}, {plan.wafer[1]}]: "
              f"{len(plan.layers)} layers on {sum(lay.region.pes for lay in plan.layers)} "
              f"PEs of the bounding box {box}.")
    for path, _ in written:
        if path.is_dir():
            raise UsageError(f"cannot write {path}: it is a directory (nothing was written)")
    had = {path: path.exists() for path, _ in written}
    try:
        write_atomically(map_path, f"# The network plan {net if automatic else args.plan} as "
                                   f"one mapping over the layers' bounding box.\n" + mapping,
                         "the mapping")
        if automatic:
            write_atomically(net, print_plan(plan, header=header), "the plan")
    except BaseException:  # (the pair is written whole or not at all)
        for path, existed in had.items():
            if not existed:
                path.unlink(missing_ok=True)
        raise
    if automatic:
        print(f"wrote {net}")
    print(f"wrote {map_path}")
    print(plan.describe())


def add_run_parser(sub: Any) -> None:
    cmd = sub.add_parser(
        "run", help="compile a placed network into one wafer module, simulate it and "
                    "verify it (against the LAIR interpreter, and ONNX with --onnx)")
    cmd.add_argument("plan", metavar="NET.net", help="the plan")
    cmd.add_argument("--program", metavar="PROG.lair",
                     help="the network (default: NET.lair beside the plan); its weights are "
                          "PROG.npz beside it")
    cmd.add_argument("-m", "--mapping", metavar="MAP",
                     help="the mapping dtg place linked from the plan (default: NET.map "
                          "beside the plan)")
    cmd.add_argument("--onnx", metavar="MODEL.onnx",
                     help="also compare the outputs with onnx.reference on this model")
    cmd.add_argument("--inputs", metavar="IN.npz",
                     help="the streamed inputs (default: random integers from --seed)")
    cmd.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                     help="seed of the random streamed inputs (default 0)")
    cmd.add_argument("--engine", choices=("auto", "fast", "simpy"), default="fast",
                     help="the simulator (default: fast)")
    cmd.add_argument("--heatmap", metavar="PICTURE.png",
                     help="draw the wafer's busy cycles and links with the layers' regions")
    cmd.add_argument("--report", metavar="FILE.json", help="write the JSON report")


def run_network(args: argparse.Namespace) -> None:
    """``dtg run``: the whole network as one module on the layers' bounding box."""
    import json
    import time

    from rich.console import Console
    from rich.table import Table

    import dtg
    from dtg.codegen.bound import statements_compute
    from dtg.lair.files import check_new_file
    from dtg.lair.interp import random_inputs

    plan_path = Path(args.plan)
    lair = Path(args.program) if args.program else plan_path.with_suffix(".lair")
    mapping = Path(args.mapping) if args.mapping else plan_path.with_suffix(".map")
    weights = lair.with_suffix(".npz")
    for path, what in ((plan_path, "the plan"), (lair, "the program"), (mapping, "the mapping")):
        if not path.exists():
            option = {"the program": " (or name it with --program)",
                      "the mapping": " (dtg place writes it; or name it with -m)"}.get(what, "")
            raise UsageError(f"{path} ({what}) does not exist{option}")
    check_distinct([(args.heatmap, "the heatmap"), (args.report, "the report")],
                   [(plan_path, "the plan"), (lair, "the program"), (mapping, "the mapping"),
                    (weights, "the weights"), (args.onnx, "the model"),
                    (args.inputs, "the inputs")])
    for path, what in ((args.heatmap, "the heatmap"), (args.report, "the report")):
        if path:
            check_new_file(path, what)
    plan = parse_plan_file(plan_path)
    graph_only = load_program(lair).graph
    plan.verify(graph_only)
    linked = network_mapping(graph_only, plan)
    written = "".join(line for line in mapping.read_text().splitlines(keepends=True)
                      if not line.startswith("#"))
    if written != linked:
        raise UsageError(f"{mapping} is not the mapping of {plan_path} (it was linked from "
                         f"another plan, or edited): run 'dtg place {lair} --plan "
                         f"{plan_path}' again, or simulate {mapping} alone with pesim")
    streamed = set(plan.streams)
    resident = [t.name for t in graph_only.inputs if t.name not in streamed]
    if resident and not weights.exists():
        raise UsageError(f"{weights} (the weights: {', '.join(resident)}) does not exist; "
                         "dtg import writes it beside the program")
    given: dict[str, np.ndarray] = {}
    if args.inputs:
        from dtg.pesim.run import read_inputs
        given = read_inputs(args.inputs)
        unknown = sorted(set(given) - streamed)
        if unknown:
            raise UsageError(f"--inputs {args.inputs}: {', '.join(unknown)} "
                             f"{'is' if len(unknown) == 1 else 'are'} not streamed in "
                             f"(the streamed inputs: {', '.join(sorted(streamed))}); the "
                             f"weights come from {weights}")
    model = _onnx_model(args.onnx, graph_only) if args.onnx else None
    start = time.perf_counter()
    compiled = dtg.compile(lair, mapping)
    compile_seconds = time.perf_counter() - start
    graph = compiled.program.graph
    plan.verify(graph)
    inputs = random_inputs(graph, args.seed)
    if resident:
        from dtg.pesim.run import read_inputs
        inputs.update(read_inputs(weights))
    inputs.update(given)
    start = time.perf_counter()
    result = dtg.simulate(compiled, inputs=inputs, engine=args.engine)
    seconds = time.perf_counter() - start
    onnx_check = _onnx_check(model, result) if model is not None else None
    box = plan.bounding_box()
    rows = []
    for lay in plan.layers:
        inside = [s for (x, y), s in result.pes.items()
                  if lay.region.x0 <= x + box.x0 < lay.region.x1 and
                  lay.region.y0 <= y + box.y0 < lay.region.y1]
        busy = max((s.busy for s in inside), default=0)
        names = {s.name for s in graph.statements if s.node in lay.nodes}
        bound = statements_compute(compiled.program.model, compiled.mapping, names,
                                   compiled.fabric)
        rows.append({"layer": lay.name, "region": str(lay.region), "pes": lay.region.pes,
                     "busy": busy, "bound": bound})
    slowest = max(rows, key=lambda r: int(str(r["busy"])))
    table = Table(title=f"dtg run: {plan_path.name} ({box.width} x {box.height} PEs)")
    for col in ("layer", "region", "PEs", "busy cycles (busiest PE)", "compute bound",
                "busy / bound"):
        table.add_column(col)
    for r in rows:
        ratio = f"{int(str(r['busy'])) / int(str(r['bound'])):.2f}" if r["bound"] else "-"
        mark = " (slowest)" if r is slowest else ""
        table.add_row(str(r["layer"]) + mark, str(r["region"]), str(r["pes"]), str(r["busy"]),
                      str(r["bound"]), ratio)
    console = Console()
    console.print(table)
    verified = "yes" if result.verified else f"no: {result.mismatch}"
    console.print(f"outputs match the LAIR interpreter: {verified}"
                  f"{' (exact)' if result.exact and result.verified else ''}")
    if onnx_check is not None:
        console.print(f"outputs match onnx.reference: {onnx_check[1]}")
    whole = result.bound
    samples = sample_times(result.outcome.result)
    console.print(f"cycles: {result.cycles} (bound {whole.cycles if whole else '-'}); "
                  f"slowest layer: {slowest['layer']}; compiled in {compile_seconds:.1f} s, "
                  f"simulated in {seconds:.1f} s on the {result.report().get('engine')} engine")
    if samples is not None and samples["interval"] is None:
        console.print(f"1 sample: its outputs complete {samples['latency']} cycles after "
                      "the start")
    elif samples is not None:
        console.print(f"{samples['samples']} samples: the first one's outputs complete "
                      f"{samples['latency']} cycles after the start, then one every "
                      f"{samples['interval']} cycles (median)")
    if args.heatmap:
        outlines = [(lay.name, lay.region.x0 - box.x0, lay.region.y0 - box.y0,
                     lay.region.width, lay.region.height) for lay in plan.layers]
        from dtg.pesim.heatmap import draw_heatmap
        frame = (f"wafer PE[{plan.wafer[0]}, {plan.wafer[1]}]", -box.x0, -box.y0,
                 plan.wafer[0], plan.wafer[1])
        draw_heatmap(result.outcome.result, args.heatmap, compiled.module, outlines, frame)
        print(f"wrote {args.heatmap}")
    if args.report:
        from dtg.lair.files import write_atomically
        report = {"plan": str(plan_path), "layers": rows, "slowest_layer": slowest["layer"],
                  "cycles": result.cycles, "samples": samples, "verified": result.verified,
                  "onnx_verified": None if onnx_check is None else onnx_check[0],
                  # (without every PE's and link's figures: on a wafer those are most of
                  # the report; pesim --report gives them)
                  "run": {k: v for k, v in result.report().items()
                          if k not in ("pes", "links")}}
        write_atomically(args.report, json.dumps(report, indent=1, default=str) + "\n",
                         "the report")
        print(f"wrote {args.report}")
    if not result.verified:
        from dtg.errors import SimulationError
        raise SimulationError(f"the outputs differ from the reference: {result.mismatch}")
    if onnx_check is not None and not onnx_check[0]:
        from dtg.errors import SimulationError
        raise SimulationError(f"the outputs differ from onnx.reference: {onnx_check[1]}")


def _onnx_model(path: str, graph: Graph) -> tuple[Any, Any]:
    """The ONNX model and its import (names), read before the run: a model that cannot
    be read, or whose inputs and outputs are not this network's, fails first."""
    import onnx

    from dtg.lair.onnx_import import import_onnx

    imported = import_onnx(path)
    try:
        proto = onnx.load(path)
    except Exception as exc:  # (import_onnx read it already: this is unexpected)
        raise UsageError(f"--onnx {path}: cannot read the model ({exc})") from None
    constants = {init.name for init in proto.graph.initializer}
    shapes = {t.name: t.shape for t in graph.tensors}
    ends = [(vi.name, "input") for vi in proto.graph.input if vi.name not in constants] + [
        (vi.name, "output") for vi in proto.graph.output]
    dims = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
            for vi in (*proto.graph.input, *proto.graph.output)}
    for name, role in ends:
        lair = imported.names.get(name)
        mine = shapes.get(lair) if lair is not None else None
        if mine is None or tuple(mine) != dims.get(name):
            raise UsageError(f"--onnx {path}: the model's {role} {name} is not this network's "
                             "(is it the model the network was imported from?)")
    return imported, proto


def _onnx_check(model: tuple[Any, Any], result: object) -> tuple[bool, str]:
    """Run ``onnx.reference`` on the run's inputs; compare the model's outputs."""
    from onnx.reference import ReferenceEvaluator

    imported, proto = model
    inputs = result.inputs  # type: ignore[attr-defined]
    constants = {init.name for init in proto.graph.initializer}
    wanted = {vi.name: imported.names.get(vi.name) for vi in proto.graph.input
              if vi.name not in constants}
    outputs_wanted = {o.name: imported.names.get(o.name) for o in proto.graph.output}
    missing = [n for n, lair in {**wanted, **outputs_wanted}.items()
               if lair is None or (n in wanted and lair not in inputs) or
               (n in outputs_wanted and lair not in result.outputs)]  # type: ignore[attr-defined]
    if missing:
        raise UsageError(f"--onnx: the model's {', '.join(missing)} "
                         f"{'is' if len(missing) == 1 else 'are'} not in the network (is it "
                         "the model this network was imported from?)")
    feeds = {name: inputs[lair] for name, lair in wanted.items()}
    got = ReferenceEvaluator(proto).run(None, feeds)
    outputs = result.outputs  # type: ignore[attr-defined]
    worst = 0.0
    for out, want in zip(proto.graph.output, got, strict=True):
        mine = outputs[imported.names[out.name]].astype(np.float64)
        theirs = np.asarray(want, dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(mine - theirs), initial=0.0)))
        if result.exact:  # type: ignore[attr-defined]
            ok = np.array_equal(mine, theirs)
        else:
            ok = bool(np.allclose(mine, theirs, rtol=1e-5, atol=1e-5))
        if not ok:
            return False, f"output {out.name} differs (max abs error {worst:g})"
    how = "exactly" if result.exact else "within float32 tolerance"  # type: ignore[attr-defined]
    return True, f"yes, {how} (max abs error {worst:g})"


def sample_times(run: object) -> dict[str, object] | None:
    """Per sample (the first dimension of the streamed outputs): the cycle its last
    output element reached a sink; the first one's latency from the run's start and the
    median interval between consecutive samples. None without streamed outputs."""
    cycles = getattr(run, "output_cycles", {})
    if not cycles:
        return None
    batch = min(a.shape[0] for a in cycles.values() if a.ndim)
    done = [max(int(a[b].max()) for a in cycles.values()) for b in range(batch)]
    start = int(getattr(run, "start", 0))
    gaps = sorted(b - a for a, b in pairwise(done))
    interval = gaps[len(gaps) // 2] if gaps else None
    return {"samples": batch, "done": done, "latency": done[0] - start, "interval": interval}
