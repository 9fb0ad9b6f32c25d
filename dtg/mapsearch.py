"""``dtg search``: mappings dtg chooses, ranked by the bound, verified by simulation.

The search enumerates the space of ``mapping/space.py`` (alignments of the statements
with a tensor's dimensions, and how each tensor enters and leaves). Each candidate's
tilings (``mapping/direction.py``) are validated like written mappings. The candidates
are ranked by the bound on cycles, even tiles first, and compiled in that order; what
does not compile (memory, colors, a pattern the back end does not realize) is pruned.
The best ``top`` are simulated and checked against the reference interpreter, on Dask
as sweeps are when asked. Only a verified mapping is ever reported as the best.

The time budget: enumeration and validation stop at half of it. Then rounds of ``top``
candidates, in rank order, are compiled and simulated while less than 80% of it is
spent and another round as long as the last still fits in 95% of it, so a small space is
searched further down its ranking. A phase that runs out of
time stops where it is and says so (``out_of_time``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dtg.codegen.bound import mapping_bound
from dtg.codegen.pipeline import compile_mapping
from dtg.lair.diagnostics import DtgError
from dtg.lair.frontend import from_source
from dtg.lair.lower import PolyModel
from dtg.lair.parser import parse_file
from dtg.lair.specialize import Binding
from dtg.mapping.direction import candidates
from dtg.mapping.space import candidates as space
from dtg.mapping.spec import format_spec, parse_mapping, parse_mapping_file
from dtg.mapping.validate import Mapping, validate_mapping
from dtg.pesim.fabric import preset


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
    program: str
    rectangle: tuple[int, int]
    considered: int = 0  # candidate mappings generated (before tiling)
    tilings: int = 0  # tilings that validated
    pruned: int = 0  # candidates or tilings that did not validate or compile
    compiled: int = 0
    simulated: int = 0
    seconds: float = 0.0
    out_of_time: list[str] = field(default_factory=list)  # phases the budget cut short
    ranked: list[Found] = field(default_factory=list)  # the simulated, fastest first

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
           params: dict[str, Binding] | None = None, budget: float = 60.0, top: int = 5,
           fabric: str = "paper", scheduler: str | None = None,
           workers: int | None = 0, progress: Callable[[str, int, int], None] | None = None,
           like: str | Path | None = None) -> SearchResult:
    """Search mappings of ``program`` onto ``width`` x ``height`` PEs within ``budget``
    seconds; simulate the best that compile, ``top`` at a time (``workers``/``scheduler``: on Dask,
    as ``dtg.sweep.run_sweep``). ``progress(phase, done, total)`` is told how it goes.
    ``like``: a mapping whose choice of resident and streamed tensors the candidates
    keep (to compare with it on the same terms)."""
    start = time.monotonic()
    config = preset(fabric)
    params = dict(params or {})
    source = parse_file(program)
    loaded = from_source(source, params)
    model = loaded.model
    result = SearchResult(str(program), (width, height))
    found: list[Found] = []
    say = progress or (lambda phase, done, total: None)

    def left(share: float) -> bool:
        return time.monotonic() - start < share * budget

    kinds = None
    if like is not None:
        written = parse_mapping_file(like)
        kinds = {t.tensor: t.kind == "resident" for t in written.tensors}
    for cand in space(model, width, height, kinds):
        if not left(0.5):
            result.out_of_time.append("enumeration")
            break
        result.considered += 1
        say("enumerate", result.considered, 0)
        try:
            spec = parse_mapping(cand.text, "<candidate>")
            choices = candidates(spec, model, lambda m: mapping_bound(model, m, config).cycles)
        except DtgError:
            result.pruned += 1
            continue
        for choice in choices:
            assert choice.spec is not None
            found.append(Found(f"{cand.label}; {choice.tiling.describe()}",
                               format_spec(choice.spec), choice.bound, choice.even,
                               choice.pes))
    result.tilings = len(found)
    found.sort(key=lambda f: (not f.even, f.bound, f.pes))
    seen: set[str] = set()
    queue = iter(found)
    tried: list[Found] = []
    # rounds of `top`: compile the next best, simulate them; go on while time is left for
    # another round as long as the last one
    last_round = 0.0
    while len(tried) == 0 or (left(0.8) and time.monotonic() - start + last_round
                              < 0.95 * budget):
        began = time.monotonic()
        batch: list[Found] = []
        for f in queue:
            if f.text in seen:
                continue
            seen.add(f.text)
            if not left(0.9):
                if "compilation" not in result.out_of_time:
                    result.out_of_time.append("compilation")
                break
            say("compile", result.compiled, 0)
            try:
                compile_mapping(loaded, _validate(f.text, model), fabric=config)
            except DtgError as err:
                f.compiled, f.error = False, err.message
                result.pruned += 1
                continue
            f.compiled = True
            result.compiled += 1
            batch.append(f)
            if len(batch) >= top:
                break
        if not batch:
            break
        say("simulate", result.simulated, 0)
        _simulate(program, batch, params, fabric, scheduler, workers, result)
        tried += batch
        last_round = time.monotonic() - began
    ready = tried
    result.ranked = sorted((f for f in ready if f.cycles is not None),
                           key=lambda f: (not f.verified, f.cycles, f.bound))
    result.seconds = round(time.monotonic() - start, 2)
    return result


def _validate(text: str, model: PolyModel) -> Mapping:
    return validate_mapping(parse_mapping(text, "<candidate>"), model)


def _simulate(program: str | Path, ready: list[Found], params: dict[str, Binding],
              fabric: str, scheduler: str | None, workers: int | None,
              result: SearchResult) -> None:
    """Simulate and verify the compiled candidates as sweep points (each carries its
    mapping's text, so that workers elsewhere need no file of it)."""
    from dtg.sweep import Point, run_sweep

    todo = [Point(k, str(Path(program).resolve()), f.text, dict(params), fabric=fabric)
            for k, f in enumerate(ready)]
    for row in run_sweep(todo, scheduler=scheduler, workers=workers):
        f = ready[row["index"]]
        f.cycles, f.verified, f.error = row["cycles"], row["verified"], row["error"]
        result.simulated += row["cycles"] is not None
