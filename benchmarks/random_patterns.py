"""Which data-movement patterns random programs and mappings exercise.

Draws the pairs ``bench_random.py`` would (same Hypothesis seed), plans the task graph of
each pair the compiler accepts, and counts the pairs using each pattern of the planner
(docs/codegen.md): so the differential tests are known to cover every pattern, and by
how many pairs.

Run: ``.venv/bin/python benchmarks/random_patterns.py -n 1000 --seed 20250109``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "random"))

from bench_random import draw_pairs  # noqa: E402

from dtg.errors import DtgError  # noqa: E402
from dtg.lair.frontend import program_from_text  # noqa: E402
from dtg.mapping.flows import TaskGraph  # noqa: E402
from dtg.mapping.spec import parse_mapping  # noqa: E402
from dtg.mapping.tasks import build_task_graph  # noqa: E402
from dtg.mapping.validate import validate_mapping  # noqa: E402


def patterns(tg: TaskGraph) -> set[str]:
    """The planner's patterns one task graph uses."""
    found: set[str] = set()
    for flow in tg.inputs:
        found.add("input: multicast trees" if flow.members is not None else
                  "input: adapters" if flow.adapter is not None else "input: direct")
        if flow.members is not None and len(tg.input_flows(flow.tensor)) > 1:
            found.add("input: trees on several colors")
        if not isinstance(flow.groups, int):
            found.add("input: groups counted per receiver")
    if any(len({f.side for f in tg.input_flows(f.tensor)}) > 1 for f in tg.inputs):
        found.add("input: stream on two sides")
    gathered = {ex.tensor for ex in tg.exchanges}
    for out in tg.outputs:
        found.add("output: chain along its line" if out.chain else
                  "output: gathered next to the side" if out.tensor in gathered else
                  "output: sent next to the side")
    for red in (*tg.reductions, *tg.combines):
        found.add(f"partial results: chain towards {red.side}")
    chains = [*tg.reductions, *tg.combines]
    if any(len([r for r in chains if r.tensor == t]) > 1 for t in {r.tensor for r in chains}):
        found.add("partial results: 2-D chains (rows, then a column)")
    for ex in tg.exchanges:
        found.add("partial results: reducing exchange" if ex.reduce else
                  f"internal/output: exchange over the {ex.axis}")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20250109)
    args = parser.parse_args(argv)
    counts: Counter[str] = Counter()
    planned = rejected = 0
    for lair, mapping_text, _ in draw_pairs(args.n, args.seed):
        try:
            program = program_from_text(lair)
            mapping = validate_mapping(parse_mapping(mapping_text), program.model)
            tg = build_task_graph(program.model, mapping)
        except DtgError:
            rejected += 1
            continue
        planned += 1
        counts.update(patterns(tg))
    table = Table(title=f"patterns in {planned} planned pairs ({rejected} rejected), "
                        f"seed {args.seed}")
    table.add_column("pattern")
    table.add_column("pairs", justify="right")
    for name, count in sorted(counts.items()):
        table.add_row(name, str(count))
    Console().print(table)


if __name__ == "__main__":
    main()
