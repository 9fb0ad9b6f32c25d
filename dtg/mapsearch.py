"""``dtg search``: mappings dtg chooses, ranked by the bound, verified by simulation.

The search enumerates the space of ``mapping/space.py`` (alignments of the statements
with a tensor's dimensions, and how each tensor enters and leaves). Each candidate's
tilings (``mapping/direction.py``) are validated like written mappings. The candidates
are ranked by the bound on cycles, even tiles first, and compiled in that order; what
does not compile (memory, colors, a pattern the back end does not realize) is pruned.
In rounds of a few, the best that compile are simulated and checked against the
reference interpreter, on Dask as sweeps are when asked, for as long as the budget
allows (a round starts only when one as long as the last still fits), or until ``top``
have been simulated. Only a verified mapping is ever reported as the best.

The budget bounds the whole search, whatever a candidate costs: enumeration and
validation stop at half of it, compilation and simulation at the budget itself
(simulations run in child processes, or on Dask, and are abandoned at the deadline).
The clock is read before each candidate, each tiling and each compilation. A phase
that runs out of time stops where it is and says so (``out_of_time``); so does a
search cancelled by Ctrl-C (``interrupted``), with what it found until then.

``top`` caps how many candidates are simulated: the best ``top`` of the ranking that
compile (``SearchResult.summary`` counts each step). ``limit`` stops the enumeration
after that many candidate mappings, so that a search's work does not depend on the
machine's speed (for tests and benchmarks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dtg.codegen.bound import mapping_bound
from dtg.codegen.pipeline import compile_mapping
from dtg.errors import DtgError
from dtg.lair.frontend import Program, from_source
from dtg.lair.lower import PolyModel
from dtg.lair.parser import parse_file
from dtg.lair.specialize import Binding
from dtg.mapping.direction import candidates
from dtg.mapping.space import candidates as space
from dtg.mapping.spec import parse_mapping, parse_mapping_file
from dtg.mapping.validate import Mapping, validate_mapping
from dtg.pe.fabric import FabricConfig, preset


@dataclass
class Found:
    """A candidate mapping with everything learnt about it."""

    label: str
    text: str  # the concrete .map text (tiles and offsets written in)
    bound: int
    even: bool
    pes: int
    compiled: bool | None = None
    cycles: int | None = None
    verified: bool | None = None
    error: str | None = None


@dataclass
class SearchResult:
    """What a search did and found; the counts follow each step of the funnel."""

    program: str
    rectangle: tuple[int, int]
    considered: int = 0  # candidate mappings (alignments x how tensors enter and leave)
    unfit: int = 0  # of them, those without a tiling that validates
    tilings: int = 0  # tilings that validated (over every candidate): what was ranked
    tried: int = 0  # tilings compiled in rank order, round by round
    compiled: int = 0  # of them, those that compiled
    simulated: int = 0  # of those, simulated to the end (at most `top`, when given)
    seconds: float = 0.0
    out_of_time: list[str] = field(default_factory=list)  # phases the budget cut short
    interrupted: bool = False  # cancelled (Ctrl-C): the counts say how far it got
    ranked: list[Found] = field(default_factory=list)  # the simulated, fastest first

    @property
    def pruned(self) -> int:
        """Candidates without a tiling that validates, and tilings that did not compile."""
        return self.unfit + self.tried - self.compiled

    @property
    def best(self) -> Found | None:
        """The fastest verified mapping (None when nothing verified)."""
        return next((f for f in self.ranked if f.verified), None)

    @property
    def rank_correlation(self) -> float | None:
        """Spearman's rank correlation between the bound and simulated cycles over the
        simulated candidates (how well the ranking predicted; None below 3)."""
        pairs = [(f.bound, f.cycles) for f in self.ranked if f.cycles is not None]
        if len(pairs) < 3:
            return None
        return _spearman([float(p[0]) for p in pairs], [float(p[1] or 0) for p in pairs])

    def summary(self) -> str:
        """The funnel in words, each count a part of the one before."""
        verified = sum(1 for f in self.ranked if f.verified)
        cut = (f"; out of time in {', '.join(self.out_of_time)}" if self.out_of_time else "")
        stopped = "; stopped by Ctrl-C" if self.interrupted else ""
        correlation = self.rank_correlation
        return (f"considered {self.considered} candidate mappings ({self.unfit} without a "
                f"tiling that fits), ranked their {self.tilings} tilings; compiled "
                f"{self.compiled} of the first {self.tried} in rank order, simulated "
                f"{self.simulated} ({verified} verified) in {self.seconds} s{cut}{stopped}; "
                f"rank correlation of bound and simulated cycles: "
                f"{correlation if correlation is not None else 'n/a'}")


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda k: values[k])
    ranks = [0.0] * len(values)
    k = 0
    while k < len(order):
        j = k
        while j + 1 < len(order) and values[order[j + 1]] == values[order[k]]:
            j += 1
        for m in range(k, j + 1):
            ranks[order[m]] = (k + j) / 2
        k = j + 1
    return ranks


def _spearman(a: list[float], b: list[float]) -> float | None:
    ra, rb = _ranks(a), _ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return None if not va or not vb else round(cov / (va * vb), 3)


def search(program: str | Path, width: int, height: int, *,
           params: dict[str, Binding] | None = None, budget: float = 60.0,
           top: int | None = None,
           fabric: str = "paper", scheduler: str | None = None,
           workers: int | None = 0, progress: Callable[[str, int, int], None] | None = None,
           like: str | Path | None = None, limit: int | None = None,
           cancelled: Callable[[], bool] | None = None) -> SearchResult:
    """Search mappings of ``program`` onto ``width`` x ``height`` PEs within ``budget``
    seconds; compile in rank order and simulate, in rounds, as many as the budget allows
    or ``top`` of them (``workers``/``scheduler``: on Dask, as ``dtg.sweep.run_sweep``).
    ``progress(phase, done, total)`` is told how it goes.
    ``like``: a mapping whose choice of resident and streamed tensors the candidates
    keep (to compare with it on the same terms). ``limit``: consider at most that many
    candidate mappings. ``cancelled()`` true stops the search with what it has (the
    caller's Ctrl-C)."""
    start = time.monotonic()
    config = preset(fabric)
    params = dict(params or {})
    source = parse_file(program)
    loaded = from_source(source, params)
    model = loaded.model
    result = SearchResult(str(program), (width, height))
    say = progress or (lambda phase, done, total: None)

    def halted(phase: str, share: float) -> bool:
        if cancelled is not None and cancelled():
            result.interrupted = True
            return True
        if time.monotonic() - start < share * budget:
            return False
        if phase not in result.out_of_time:
            result.out_of_time.append(phase)
        return True

    kinds = None
    if like is not None:
        written = parse_mapping_file(like)
        kinds = {t.tensor: t.kind == "resident" for t in written.tensors}
    found = _enumerate(model, width, height, kinds, config, result, limit,
                       lambda: halted("enumeration", 0.5), say)
    found.sort(key=lambda f: (not f.even, f.bound, f.pes))
    simulated: list[Found] = []
    order = iter(found)
    seen: set[str] = set()
    last_round = 0.0
    while not result.interrupted:
        # a round starts only when one as long as the last still fits the budget
        began = time.monotonic()
        if top is not None and result.compiled >= top:
            break
        if began - start + last_round > budget:
            left = any(f.text not in seen for f in found)
            if left and "compilation" not in result.out_of_time:
                result.out_of_time.append("compilation")
            break
        batch = _compile_round(order, seen, loaded, model, config, result, say,
                               ROUND if top is None else min(ROUND, top - result.compiled),
                               lambda: halted("compilation", 1.0))
        if not batch:
            break
        say("simulate", 0, len(batch))
        _simulate(program, batch, params, fabric, scheduler, workers, result,
                  start + budget, cancelled, say)
        simulated += batch
        last_round = time.monotonic() - began
        if "simulation" in result.out_of_time:
            break
    batch = simulated
    result.ranked = sorted((f for f in batch if f.cycles is not None),
                           key=lambda f: (not f.verified, f.cycles, f.bound))
    result.seconds = round(time.monotonic() - start, 2)
    return result


ROUND = 5  # candidates compiled, then simulated, in one round


def _compile_round(order: Iterator[Found], seen: set[str], loaded: Program, model: PolyModel,
                   config: FabricConfig, result: SearchResult,
                   say: Callable[[str, int, int], None], size: int,
                   halted: Callable[[], bool]) -> list[Found]:
    """The next ``size`` candidates in rank order that compile (fewer when the ranking
    or the time runs out)."""
    batch: list[Found] = []
    for f in order:
        if f.text in seen:
            continue
        if result.interrupted or halted():
            break
        seen.add(f.text)
        result.tried += 1
        say("compile", result.tried, 0)
        try:
            compile_mapping(loaded, _validate(f.text, model), fabric=config)
        except DtgError as err:
            f.compiled, f.error = False, err.message
            continue
        f.compiled = True
        result.compiled += 1
        batch.append(f)
        if len(batch) >= size:
            break
    return batch


def _enumerate(model: PolyModel, width: int, height: int, kinds: dict[str, bool] | None,
               config: FabricConfig, result: SearchResult, limit: int | None,
               halted: Callable[[], bool], say: Callable[[str, int, int], None]
               ) -> list[Found]:
    """Every candidate's tilings that validate, as written mappings, until ``limit``
    candidates or ``halted()``."""
    found: list[Found] = []
    for cand in space(model, width, height, kinds):
        if (limit is not None and result.considered >= limit) or halted():
            break
        result.considered += 1
        say("enumerate", result.considered, limit or 0)
        try:
            spec = parse_mapping(cand.text, "<candidate>")
            choices = candidates(spec, model, lambda m: mapping_bound(model, m, config).cycles,
                                 halted)
        except DtgError:
            result.unfit += 1
            continue
        if not choices and not halted():
            result.unfit += 1
        for choice in choices:
            found.append(Found(f"{cand.label}; {choice.tiling.describe()}",
                               cand.written(model, choice.tiling, choice.origin),
                               choice.bound, choice.even, choice.pes))
    result.tilings = len(found)
    return found


def _validate(text: str, model: PolyModel) -> Mapping:
    return validate_mapping(parse_mapping(text, "<candidate>"), model)


def _simulate(program: str | Path, ready: list[Found], params: dict[str, Binding],
              fabric: str, scheduler: str | None, workers: int | None,
              result: SearchResult, deadline: float, cancelled: Callable[[], bool] | None,
              say: Callable[[str, int, int], None]) -> None:
    """Simulate and verify the compiled candidates as sweep points (each carries its
    mapping's text, so that workers elsewhere need no file of it), until ``deadline``."""
    from dtg.sweep import Point, Row, Stopped, run_sweep

    todo = [Point(k, str(Path(program).resolve()), f.text, dict(params), fabric=fabric)
            for k, f in enumerate(ready)]
    count = [0]

    def seen(row: Row) -> None:
        count[0] += 1
        say("simulate", count[0], len(todo))

    try:
        rows = run_sweep(todo, scheduler=scheduler, workers=workers, deadline=deadline,
                         cancelled=cancelled, on_row=seen)
    except Stopped as stop:
        rows = stop.rows
        if stop.why == "deadline":
            result.out_of_time.append("simulation")
        else:
            result.interrupted = True
    for row in rows:
        f = ready[row["index"]]
        f.cycles, f.verified, f.error = row["cycles"], row["verified"], row["error"]
        result.simulated += row["cycles"] is not None
