"""Random differential testing at scale: random valid programs with random well-formed
mappings, compiled with and without SIMD, simulated and checked against the reference.

    .venv/bin/python benchmarks/bench_random.py [-n N] [--seed S] [--jobs J]
        [--timeout SEC] [--out DIR] [--shrink]

Pairs are drawn by Hypothesis from ``tests/random/strategies.py`` (seeded: the same
``-n`` and ``--seed`` give the same pairs) and classified by
``tests/random/differential.py``: verified, rejected (a located user error; counted by
reason), or a failure (mismatch, internal, unlocated, inconsistent, invalid, timeout).
Every failing pair is written to ``DIR/NNN/{prog.lair,prog.map,outcome.txt}`` (default
``/tmp/dtg-random-failures``), and the smallest pair of each failure group to
``DIR/smallest/K/``; ``--shrink`` then reruns the batch in this process and lets
Hypothesis shrink each kind of failure, into ``DIR/shrunk/K/``. The exit status is 1
when any pair failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "random"), str(ROOT / "tests")]

from differential import (  # noqa: E402
    FAILURES,
    OUTCOMES,
    Outcome,
    classify,
    hypothesis_batch,
    write_failure,
)

Pair = tuple[str, str, str]
_TIMEOUT = 120.0


def draw_pairs(n: int, seed: int) -> list[Pair]:
    """The first ``n`` pairs Hypothesis draws with ``seed`` (duplicates removed)."""
    drawn: dict[Pair, None] = {}

    def keep(lair: str, mapping: str, description: str, _: Outcome | None) -> None:
        drawn.setdefault((lair, mapping, description))

    hypothesis_batch(n, seed, draw_only=True, callback=keep)
    return list(drawn)


def _init(timeout: float) -> None:
    global _TIMEOUT
    _TIMEOUT = timeout


def _classify(job: tuple[int, Pair]) -> tuple[int, Outcome, float]:
    index, (lair, mapping, _) = job
    start = time.perf_counter()
    return index, classify(lair, mapping, timeout=_TIMEOUT), time.perf_counter() - start


def table(title: str, header: tuple[str, str], rows: list[tuple[str, int]]) -> None:
    try:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table
    except ImportError:
        print(f"\n{title}")
        for name, count in rows:
            print(f"  {count:6}  {name}")
        return
    t = Table(title=title, title_justify="left")
    t.add_column(header[0], justify="right")
    t.add_column(header[1], overflow="fold")
    for name, count in rows:
        t.add_row(str(count), escape(name))
    Console(width=160).print(t)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1000, help="pairs to draw (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    parser.add_argument("--jobs", "-j", type=int, default=1, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds per compilation or simulation (default 120)")
    parser.add_argument("--out", default="/tmp/dtg-random-failures",
                        help="directory for the failing pairs")
    parser.add_argument("--shrink", action="store_true",
                        help="also let Hypothesis shrink each kind of failure")
    args = parser.parse_args()

    start = time.monotonic()
    pairs = draw_pairs(args.n, args.seed)
    print(f"{len(pairs)} distinct pairs drawn (seed {args.seed}) in "
          f"{time.monotonic() - start:.0f} s; {args.jobs} job(s)", flush=True)
    outcomes: list[Outcome | None] = [None] * len(pairs)
    slowest = (0.0, -1)
    step = max(1, len(pairs) // 20)
    jobs = list(enumerate(pairs))
    counts: Counter[str] = Counter()

    def done(index: int, outcome: Outcome, seconds: float) -> None:
        nonlocal slowest
        outcomes[index] = outcome
        counts[outcome.outcome] += 1
        slowest = max(slowest, (seconds, index))
        finished = sum(counts.values())
        if finished % step == 0 or finished == len(pairs):
            print(f"  {finished}/{len(pairs)}: "
                  + ", ".join(f"{k} {v}" for k, v in counts.most_common())
                  + f" ({time.monotonic() - start:.0f} s)", flush=True)

    if args.jobs > 1:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(args.jobs, initializer=_init, initargs=(args.timeout,),
                      maxtasksperchild=500) as pool:
            for index, outcome, seconds in pool.imap_unordered(_classify, jobs, chunksize=4):
                done(index, outcome, seconds)
    else:
        _init(args.timeout)
        for job in jobs:
            done(*_classify(job))

    results = [(pair, o) for pair, o in zip(pairs, outcomes, strict=True) if o is not None]
    table(f"{len(results)} pairs by outcome", ("pairs", "outcome"),
          [(name, counts[name]) for name in OUTCOMES if counts[name]])
    reasons = Counter(o.reason for _, o in results if o.outcome == "rejected")
    table("rejections by reason", ("pairs", "reason"), reasons.most_common())
    groups: dict[str, list[tuple[Pair, Outcome]]] = defaultdict(list)
    for pair, o in results:
        if o.failed:
            groups[o.key].append((pair, o))
    table("failures by kind", ("pairs", "failure"),
          sorted(((k, len(v)) for k, v in groups.items()), key=lambda r: -r[1]))
    seconds, index = slowest
    print(f"slowest pair: #{index}, {seconds:.2f} s; total {time.monotonic() - start:.0f} s")

    out = Path(args.out)
    if out.exists() and (out / "summary.txt").exists():
        shutil.rmtree(out)  # a previous run's failures
    if groups:
        failed = [(k, pair, o) for k, (pair, o) in enumerate(results) if o.failed]
        for k, pair, o in failed:
            write_failure(out / f"{k:03d}", pair[0], pair[1], pair[2], o)
        ordered = sorted(groups.items(), key=lambda g: -len(g[1]))
        summary = []
        for g, (key, found) in enumerate(ordered):
            (lair, mapping, description), o = min(
                found, key=lambda f: len(f[0][0]) + len(f[0][1]))
            write_failure(out / "smallest" / f"{g:02d}", lair, mapping, description, o)
            summary.append(f"{len(found):5} x {key}\n        smallest: smallest/{g:02d}")
        if args.shrink:
            for g, (key, _) in enumerate(ordered):
                print(f"shrinking {key} ...", flush=True)
                for s in hypothesis_batch(args.n, args.seed, shrink=True, only=key):
                    d = out / "shrunk" / f"{g:02d}"  # written at once: shrinking is slow
                    d.mkdir(parents=True, exist_ok=True)
                    (d / "prog.lair").write_text(s.part("prog.lair"))
                    (d / "prog.map").write_text(s.part("prog.map"))
                    (d / "outcome.txt").write_text(s.text + "\n")
                    summary.append(f"shrunk/{g:02d}: {s.key}")
        (out / "summary.txt").write_text(
            f"{len(results)} pairs, seed {args.seed}: "
            + ", ".join(f"{k} {v}" for k, v in counts.most_common()) + "\n"
            + "\n".join(summary) + "\n")
        print(f"wrote {len(failed)} failing pairs to {out} (summary.txt lists the groups)")
    return 1 if any(counts[k] for k in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
