"""Fuzz the LAIR, mapping and PE-code front ends; print how each input ended.

    .venv/bin/python benchmarks/fuzz.py [-n N] [--seed S] [--jobs J] [--timeout SEC]
                                        [--backend] [--only K] [--save DIR]
                                        [--target lair|map|pe]

Inputs are random bytes and token-level mutations of every example (see
``tests/fuzz/fuzzing.py``). Each input ends as a clean error (a located DtgError), is
accepted, raises anything else (an internal error: a bug), or runs past the time limit
(a hang: a bug). Internal errors and hangs are listed, grouped by where they happen;
``--save`` writes each such input to a file, ``--only K`` reruns input K of the seed,
``--target`` keeps only the inputs of one front end (their numbers stay those of the seed).
The exit status is 1 when there was any internal error or hang.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "fuzz")]

from fuzzing import (  # noqa: E402
    KINDS,
    OUTCOMES,
    SUFFIX,
    Case,
    Kind,
    Summary,
    cases,
    corpus,
    make_case,
    run_cases,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000, help="number of inputs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="wall-time limit per input in seconds (default 10)")
    parser.add_argument("--backend", action="store_true",
                        help="also compile accepted mappings to PE code, then parse and "
                             "verify it")
    parser.add_argument("--only", type=int, metavar="K", help="run input K of the seed alone")
    parser.add_argument("--save", metavar="DIR", help="write each bad input to DIR")
    parser.add_argument("--target", choices=KINDS, help="fuzz only this front end")
    args = parser.parse_args()

    start = time.monotonic()
    seeds = corpus()
    count, first = (1, args.only) if args.only is not None else (args.n, 0)
    print(f"{len(seeds)} example inputs; {count} fuzz inputs, seed {args.seed}, "
          f"{args.jobs} job(s), {args.timeout:g} s per input", flush=True)
    step = max(1, count // 20)

    def progress(summary: Summary) -> None:
        if summary.total % step == 0:
            print(f"  {summary.total}/{count}: {_counts(summary)} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)

    summary = run_cases(of_kind(args.seed, count, first, args.target), jobs=args.jobs,
                        timeout=args.timeout,
                        backend=args.backend, progress=progress)
    print(f"\ninputs {summary.total}: {_counts(summary)}")
    for kind, counts in sorted(summary.by_kind.items()):
        print(f"  {kind:5}: " + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES))
    seconds, index = summary.slowest
    print(f"slowest input: #{index}, {seconds:.2f} s; total {time.monotonic() - start:.0f} s")
    groups: dict[str, list[int]] = defaultdict(list)
    for case, result in summary.bad:
        groups[f"{case.kind} {result.outcome}: {result.detail}"].append(case.index)
    for signature, indices in sorted(groups.items(), key=lambda g: -len(g[1])):
        shown = ", ".join(map(str, indices[:8])) + (" ..." if len(indices) > 8 else "")
        print(f"\n{len(indices)} x {signature}\n  inputs: {shown}")
    if args.save and summary.bad:
        out = Path(args.save)
        out.mkdir(parents=True, exist_ok=True)
        for case, result in summary.bad:
            path = out / f"seed{args.seed}_{case.index}_{result.outcome}{SUFFIX[case.kind]}"
            path.write_bytes(case.data)
            path.with_suffix(path.suffix + ".txt").write_text(
                f"{case.origin}\nprogram: {case.program} {dict(case.params)}\n{result.detail}\n")
        print(f"\nwrote {len(summary.bad)} inputs to {out}")
    return 1 if summary.bad else 0


def of_kind(seed: int, count: int, first: int, kind: Kind | None) -> Iterator[Case]:
    """``count`` inputs of the seed from ``first`` on, only those of ``kind`` if given."""
    if kind is None:
        yield from cases(seed, count, first)
        return
    index, found = first, 0
    while found < count:
        case = make_case(seed, index)
        index += 1
        if case.kind == kind:
            found += 1
            yield case


def _counts(summary: Summary) -> str:
    return ", ".join(f"{o} {summary.counts[o]}" for o in OUTCOMES)


if __name__ == "__main__":
    sys.exit(main())
