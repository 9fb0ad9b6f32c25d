"""Hypothesis strategies for random valid LAIR programs with random valid mappings.

:func:`pairs` draws ``(lair_text, map_text, description)``. A program is 1 to 3
statements: a first one (matrix-vector product, 1-D or 2-D convolution with random
filter size, stride and dilation, pooling with ``max=`` or ``+=``, an elementwise sum,
difference, product or ReLU, an outer product), then follow-ups that read the tensor the
previous statement made (bias, ReLU, another matrix-vector product, pooling), so internal
tensors appear. Iterators that mean the same thing carry the same name in every
statement (the rows ``i`` of ``y = W x`` and of ``z = y + b``), which lets one tiling per
iterator name give coherent placements.

A mapping is well-formed per ``docs/mapping.md``: the rectangle (at most 6 x 6) holds
every placement; placements tile iterators (``i//t``, with tile sizes that need not
divide the extent) on either axis, or put a statement on one column or row (the bias
or ReLU on the last column); free border lines are added at random (room for adapters);
each input is resident or streamed, each output resident or streamed, sparse or dense,
through any side (inputs sometimes half through the opposite side), from external PEs
next to that side: aligned with the placement of
the statement that reads (or writes) the tensor, entering at one PE with a
multi-dimensional or flattened index (adapter style), or tiled at random with
``index[e mod t]``. Every element gets exactly one (PE, index) pair, and no two elements
share one. Whether the compiler supports the flow is another matter: rejecting a mapping
with a located error is a legal outcome (``tests/random/differential.py``).

Wider kinds (``first_statement_more``, ``follow_up_more``, ``three_products``):
matrix-matrix products (operands transposed at times, iterators in any order), 2mm
chains whose second product reads the first by rows or by columns, 3mm, multi-channel
2-D convolutions ``y[k][a][b] += x[c][..][..] * F[k][c][p][q]``, elementwise statements
with constants, unary minus, differences, ``max`` of two tensors, spines of several
operations (``max(A[i] + B[i], 0)``), offset (``A[i + 1]``)
and transposed (``A[j][i]``) reads, rank-0 scalars (``alpha * A[i][j]``), and offset
reads of the previous tensor; one access per tensor per statement, always. Wider
mappings: tilings of up to 6 tiles, two iterators on one axis (``i//t + T*(k//u)``, as
in Example 5.7), coordinates counted backwards (``3 - i//t``), idle lines before the
tiled ones or between them (``2*(i//t)``), streams through sides with a free border
line more often, and *grid* layouts (``grid_layouts``) where every statement covers
the whole compute grid, often with the tiling of an earlier statement: the layouts
under which internal tensors are exchanged along rows or columns, and reductions split
over a line are combined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

SIDES = ("north", "south", "west", "east")
MAX_PES = 6


@dataclass(frozen=True)
class Access:
    tensor: str
    index: tuple[str, ...]  # LAIR index expressions, one per dimension
    plain: tuple[str | None, ...]  # the iterator when the index is just that iterator

    def text(self) -> str:
        return self.tensor + "".join(f"[{e}]" for e in self.index)


def acc(tensor: str, *index: str) -> Access:
    return Access(tensor, index, tuple(e if e.isidentifier() else None for e in index))


@dataclass(frozen=True)
class Stmt:
    name: str
    iters: tuple[tuple[str, int], ...]
    target: Access
    op: str  # "=", "+=" or "max="
    expr: str
    reads: tuple[Access, ...]

    def text(self) -> str:
        names = ", ".join(v for v, _ in self.iters)
        extents = ", ".join(str(n) for _, n in self.iters)
        return (f"  {self.name}: all ({names}) in ({extents}) "
                f"{self.target.text()} {self.op} {self.expr}")

    def extent(self, v: str) -> int:
        return dict(self.iters)[v]


@dataclass
class Program:
    dtype: str
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stmts: list[Stmt] = field(default_factory=list)
    label: list[str] = field(default_factory=list)

    def add(self, stmt: Stmt, label: str) -> None:
        self.stmts.append(stmt)
        self.label.append(label)

    @property
    def defined(self) -> list[str]:
        return [s.target.tensor for s in self.stmts]

    @property
    def inputs(self) -> list[str]:
        defined = set(self.defined)
        seen: list[str] = []
        for s in self.stmts:
            for a in s.reads:
                if a.tensor not in defined and a.tensor not in seen:
                    seen.append(a.tensor)
        return seen

    @property
    def outputs(self) -> list[str]:
        read = {a.tensor for s in self.stmts for a in s.reads}
        return [t for t in self.defined if t not in read]

    def decl(self, name: str) -> str:
        return f"{self.dtype} {name}" + "".join(f"[{n}]" for n in self.shapes[name])

    def text(self) -> str:
        ins = ", ".join(self.decl(t) for t in self.inputs)
        outs = ", ".join(self.decl(t) for t in self.defined)
        body = "\n".join(s.text() for s in self.stmts)
        return f"lair prog():\n  {ins}\n    -> {outs}\n{{\n{body}\n}}\n"

    def fresh(self, base: str) -> str:
        k = 0
        while f"{base}{k or ''}" in self.shapes:
            k += 1
        return f"{base}{k or ''}"

    def stmt_name(self) -> str:
        return f"S{len(self.stmts)}"


# ------------------------------------------------------------------- programs


def _out_size(n: int, r: int, s: int, d: int) -> int:
    return (n - d * (r - 1) - 1) // s + 1


@st.composite
def _window(draw: st.DrawFn, max_n: int) -> tuple[int, int, int, int, int]:
    """(input size n, window r, stride s, dilation d, output size)."""
    r = draw(st.integers(1, 4))
    d = draw(st.integers(1, 2))
    s = draw(st.integers(1, 3))
    n = draw(st.integers(d * (r - 1) + 1, max_n))
    return n, r, s, d, _out_size(n, r, s, d)


def _strided(s: int, v: str, d: int, a: str) -> str:
    left = v if s == 1 else f"{s} * {v}"
    right = a if d == 1 else f"{d} * {a}"
    return f"{left} + {right}"


@st.composite
def first_statement(draw: st.DrawFn, p: Program) -> str:
    """Add the first statement; return the tensor it defines."""
    kind = draw(st.sampled_from(["matvec", "conv1d", "conv2d", "pool1d", "pool2d",
                                 "elementwise", "elementwise2d", "relu", "outer",
                                 "matmul", "matmul", "mcconv2d", "affine", "affine2d",
                                 "scaled", "gridsum"]))
    name = p.stmt_name()
    if kind in ("matmul", "mcconv2d", "affine", "affine2d", "scaled"):
        return draw(first_statement_more(p, kind))
    if kind == "gridsum":  # sums over two dimensions: partial results over a 2-D grid
        k, m, n = draw(st.integers(1, 3)), draw(st.integers(2, 12)), draw(st.integers(2, 12))
        p.shapes.update(A=(m, n), B=(m, n), s=(k,))
        a, b = acc("A", "i", "j"), acc("B", "i", "j")
        p.add(Stmt(name, (("k", k), ("i", m), ("j", n)), acc("s", "k"), "+=",
                   f"{a.text()} * {b.text()}", (a, b)), "gridsum")
        return "s"
    if kind == "matvec":
        m, n = draw(st.integers(1, 12)), draw(st.integers(1, 12))
        transposed = draw(st.booleans())
        p.shapes.update(W=(n, m) if transposed else (m, n), x=(n,), y=(m,))
        w = acc("W", "j", "i") if transposed else acc("W", "i", "j")
        p.add(Stmt(name, (("i", m), ("j", n)), acc("y", "i"), "+=",
                   f"{w.text()} * x[j]", (w, acc("x", "j"))),
              "matvec" + ("^T" if transposed else ""))
        return "y"
    if kind == "conv1d":
        k = draw(st.integers(1, 3))
        n, r, s, d, o = draw(_window(14))
        p.shapes.update(x=(n,), F=(k, r), y=(k, o))
        xa = acc("x", _strided(s, "w", d, "r"))
        p.add(Stmt(name, (("k", k), ("w", o), ("r", r)), acc("y", "k", "w"), "+=",
                   f"{xa.text()} * F[k][r]", (xa, acc("F", "k", "r"))),
              f"conv1d r{r} s{s} d{d}")
        return "y"
    if kind == "conv2d":
        k = draw(st.integers(1, 2))
        n, r, s, d, o = draw(_window(7))
        p.shapes.update(x=(n, n), F=(k, r, r), y=(k, o, o))
        xa = acc("x", _strided(s, "a", d, "p"), _strided(s, "b", d, "q"))
        p.add(Stmt(name, (("k", k), ("a", o), ("b", o), ("p", r), ("q", r)),
                   acc("y", "k", "a", "b"), "+=", f"{xa.text()} * F[k][p][q]",
                   (xa, acc("F", "k", "p", "q"))),
              f"conv2d r{r} s{s} d{d}")
        return "y"
    if kind == "pool1d":
        c = draw(st.integers(1, 3))
        n, r, s, d, o = draw(_window(14))
        op = draw(st.sampled_from(["max=", "+="]))
        p.shapes.update(x=(c, n), y=(c, o))
        xa = acc("x", "c", _strided(s, "w", d, "r"))
        p.add(Stmt(name, (("c", c), ("w", o), ("r", r)), acc("y", "c", "w"), op, xa.text(),
                   (xa,)), f"pool1d {op} r{r} s{s} d{d}")
        return "y"
    if kind == "pool2d":
        n, r, s, d, o = draw(_window(8))
        op = draw(st.sampled_from(["max=", "+="]))
        p.shapes.update(x=(n, n), y=(o, o))
        xa = acc("x", _strided(s, "a", d, "p"), _strided(s, "b", d, "q"))
        p.add(Stmt(name, (("a", o), ("b", o), ("p", r), ("q", r)), acc("y", "a", "b"), op,
                   xa.text(), (xa,)), f"pool2d {op} r{r} s{s} d{d}")
        return "y"
    if kind in ("elementwise", "relu"):
        n = draw(st.integers(1, 16))
        p.shapes.update(A=(n,), C=(n,))
        if kind == "relu":
            p.add(Stmt(name, (("i", n),), acc("C", "i"), "=", "max(A[i], 0)",
                       (acc("A", "i"),)), "relu")
        else:
            op = draw(st.sampled_from(["+", "-", "*", "max"]))
            p.shapes["B"] = (n,)
            expr = "max(A[i], B[i])" if op == "max" else f"A[i] {op} B[i]"
            p.add(Stmt(name, (("i", n),), acc("C", "i"), "=", expr,
                       (acc("A", "i"), acc("B", "i"))), f"elementwise {op}")
        return "C"
    if kind == "elementwise2d":
        m, n = draw(st.integers(1, 8)), draw(st.integers(1, 8))
        op = draw(st.sampled_from(["+", "*", "relu"]))
        p.shapes.update(A=(m, n), C=(m, n))
        if op == "relu":
            p.add(Stmt(name, (("i", m), ("j", n)), acc("C", "i", "j"), "=",
                       "max(A[i][j], 0)", (acc("A", "i", "j"),)), "relu2d")
        else:
            p.shapes["B"] = (m, n)
            p.add(Stmt(name, (("i", m), ("j", n)), acc("C", "i", "j"), "=",
                       f"A[i][j] {op} B[i][j]", (acc("A", "i", "j"), acc("B", "i", "j"))),
                  f"elementwise2d {op}")
        return "C"
    # outer product
    m, n = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    p.shapes.update(A=(m,), B=(n,), C=(m, n))
    p.add(Stmt(name, (("i", m), ("j", n)), acc("C", "i", "j"), "=", "A[i] * B[j]",
               (acc("A", "i"), acc("B", "j"))), "outer")
    return "C"


@st.composite
def first_statement_more(draw: st.DrawFn, p: Program, kind: str) -> str:
    """The kinds added for wider exploration: matrix-matrix products (transposed operands
    sometimes), multi-channel 2-D convolutions, elementwise statements with constants,
    unary minus, offsets and transposes, and rank-0 scalars."""
    name = p.stmt_name()
    if kind == "matmul":
        m, n, r = (draw(st.integers(1, 8)) for _ in range(3))
        ta, tb = draw(st.booleans()) and draw(st.booleans()), draw(st.integers(0, 3)) == 0
        p.shapes.update(A=(r, m) if ta else (m, r), B=(n, r) if tb else (r, n), T=(m, n))
        a = acc("A", "k", "i") if ta else acc("A", "i", "k")
        b = acc("B", "j", "k") if tb else acc("B", "k", "j")
        order = draw(st.sampled_from([("i", "j", "k"), ("i", "j", "k"), ("i", "k", "j"),
                                      ("k", "i", "j"), ("j", "i", "k")]))
        ext = {"i": m, "j": n, "k": r}
        p.add(Stmt(name, tuple((v, ext[v]) for v in order), acc("T", "i", "j"), "+=",
                   f"{a.text()} * {b.text()}", (a, b)),
              "matmul" + ("^TA" if ta else "") + ("^TB" if tb else ""))
        return "T"
    if kind == "mcconv2d":
        k, c = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        n, r, s, d, o = draw(_window(7))
        p.shapes.update(x=(c, n, n), F=(k, c, r, r), y=(k, o, o))
        xa = acc("x", "c", _strided(s, "a", d, "p"), _strided(s, "b", d, "q"))
        order = draw(st.sampled_from([("k", "c", "a", "b", "p", "q"),
                                      ("k", "a", "b", "c", "p", "q"),
                                      ("c", "k", "a", "b", "p", "q")]))
        ext = {"k": k, "c": c, "a": o, "b": o, "p": r, "q": r}
        p.add(Stmt(name, tuple((v, ext[v]) for v in order), acc("y", "k", "a", "b"), "+=",
                   f"{xa.text()} * F[k][c][p][q]", (xa, acc("F", "k", "c", "p", "q"))),
              f"mcconv2d c{c} k{k} r{r} s{s} d{d}")
        return "y"
    if kind == "affine":
        n = draw(st.integers(1, 16))
        off = draw(st.integers(0, 2))
        p.shapes.update(A=(n + off,), C=(n,))
        a = acc("A", f"i + {off}" if off else "i")
        form = draw(st.sampled_from(["2 * {a} - 1", "-{a}", "{a} - {b}", "-{a} + {b}",
                                     "max({a}, {b})", "3 * {a} + {b}", "{b} - 2 * {a}",
                                     "{a} * {b} - 1", "1 - {a}",
                                     # spines of operations (several SIMD steps)
                                     "max({a} + {b}, 0)", "max({a} - {b}, 0) + {a}",
                                     "{b} - max({a}, 1)", "-max({a}, {b})",
                                     "max(2 * {a}, {b}) * 3"]))
        reads: tuple[Access, ...] = (a,)
        b = acc("B", "i")
        if "{b}" in form:
            p.shapes["B"] = (n,)
            reads = (a, b)
        expr = form.format(a=a.text(), b=b.text())
        p.add(Stmt(name, (("i", n),), acc("C", "i"), "=", expr, reads),
              f"affine {form.replace('{', '').replace('}', '')} off{off}")
        return "C"
    if kind == "affine2d":
        m, n = draw(st.integers(1, 7)), draw(st.integers(1, 7))
        transposed = draw(st.booleans())
        off = draw(st.integers(0, 1))
        a = acc("A", "j", "i") if transposed else acc("A", "i", f"j + {off}" if off else "j")
        p.shapes["A"] = (n, m) if transposed else (m, n + off)
        p.shapes.update(B=(m, n), C=(m, n))
        b = acc("B", "i", "j")
        form = draw(st.sampled_from(["{a} + {b}", "{a} - {b}", "max({a}, {b})",
                                     "2 * {a} - {b}", "{a} * {b}", "-{a}"]))
        reads = (a, b) if "{b}" in form else (a,)
        if "{b}" not in form:
            del p.shapes["B"]
        p.add(Stmt(name, (("i", m), ("j", n)), acc("C", "i", "j"), "=",
                   form.format(a=a.text(), b=b.text()), reads),
              f"affine2d {form.replace('{', '').replace('}', '')}"
              + (" A^T" if transposed else f" off{off}"))
        return "C"
    # scaled: C[i][j] = alpha * A[i][j] (+ beta * B[i][j])
    m, n = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    p.shapes.update(alpha=(), A=(m, n), C=(m, n))
    two = draw(st.booleans())
    expr = "alpha * A[i][j]"
    reads = (acc("alpha"), acc("A", "i", "j"))
    if two:
        p.shapes.update(beta=(), B=(m, n))
        expr += " + beta * B[i][j]"
        reads += (acc("beta"), acc("B", "i", "j"))
    p.add(Stmt(name, (("i", m), ("j", n)), acc("C", "i", "j"), "=", expr, reads),
          "scaled" + (" two" if two else ""))
    return "C"


@st.composite
def follow_up(draw: st.DrawFn, p: Program, last: str) -> str:
    """A statement reading ``last`` (the previous statement's target); return its target."""
    prev = p.stmts[-1]
    shape = p.shapes[last]
    iters = [v or f"v{d}" for d, v in enumerate(prev.target.plain)]
    kinds = ["bias", "relu", "scale"]
    if len(shape) == 1:
        kinds.append("matvec")
    if len(shape) >= 1 and shape[-1] >= 2:
        kinds.append("pool")
    if len(shape) == 2:
        kinds += ["matvec2", "matmul", "matmul"]
    kinds += ["neg", "affine", "max2", "sub", "alpha"]
    if len(shape) >= 1 and shape[-1] >= 2:
        kinds.append("shift")
    kind = draw(st.sampled_from(kinds))
    name = p.stmt_name()
    src = acc(last, *iters)
    if kind in ("neg", "affine", "max2", "sub", "alpha", "shift", "matmul"):
        return draw(follow_up_more(p, last, kind, iters))
    if kind in ("bias", "relu", "scale"):
        out = p.fresh({"bias": "Z", "relu": "R", "scale": "S"}[kind])
        p.shapes[out] = shape
        dom = tuple(zip(iters, shape, strict=True))
        if kind == "relu":
            p.add(Stmt(name, dom, acc(out, *iters), "=", f"max({src.text()}, 0)", (src,)),
                  "relu")
        else:
            other = p.fresh("Bias")
            p.shapes[other] = shape
            op = "+" if kind == "bias" else "*"
            b = acc(other, *iters)
            p.add(Stmt(name, dom, acc(out, *iters), "=", f"{src.text()} {op} {b.text()}",
                       (src, b)), kind)
        return out
    if kind == "matvec":
        # z[k] += V[k][i] * last[i]
        v = iters[0]
        k = "k" if v != "k" else "m"
        out, mat = p.fresh("Z"), p.fresh("V")
        m = draw(st.integers(1, 8))
        p.shapes.update({out: (m,), mat: (m, shape[0])})
        ma = acc(mat, k, v)
        p.add(Stmt(name, ((k, m), (v, shape[0])), acc(out, k), "+=",
                   f"{ma.text()} * {src.text()}", (ma, src)), "matvec")
        p.dtype = "float32"
        return out
    if kind == "matvec2":
        # z[i] += last[i][j] * v[j]
        out, vec = p.fresh("Z"), p.fresh("U")
        p.shapes.update({out: (shape[0],), vec: (shape[1],)})
        va = acc(vec, iters[1])
        p.add(Stmt(name, ((iters[0], shape[0]), (iters[1], shape[1])), acc(out, iters[0]),
                   "+=", f"{src.text()} * {va.text()}", (src, va)), "matvec")
        p.dtype = "float32"
        return out
    # pool along the last dimension: out[..][o] op last[..][s*o + d*t]
    n = shape[-1]
    r = draw(st.integers(1, min(3, n)))
    d = draw(st.integers(1, 2)) if n > 2 * (r - 1) else 1
    s = draw(st.integers(1, 2))
    o = _out_size(n, r, s, d)
    op = draw(st.sampled_from(["max=", "+="]))
    out = p.fresh("P")
    outer, ov, tv = iters[:-1], "o", "t"
    p.shapes[out] = (*shape[:-1], o)
    src = acc(last, *outer, _strided(s, ov, d, tv))
    p.add(Stmt(name, (*zip(outer, shape[:-1], strict=True), (ov, o), (tv, r)),
               acc(out, *outer, ov), op, src.text(), (src,)), f"pool {op} r{r} s{s} d{d}")
    return out


@st.composite
def follow_up_more(draw: st.DrawFn, p: Program, last: str, kind: str, iters: list[str]
                   ) -> str:
    """Added follow-ups: a second matrix product (2mm chains, by rows or by columns),
    unary minus, constants, max of two tensors, differences, a scalar factor, and an
    offset read of the previous tensor."""
    shape = p.shapes[last]
    name = p.stmt_name()
    src = acc(last, *iters)
    dom = tuple(zip(iters, shape, strict=True))
    if kind == "matmul":
        new = next(v for v in ("l", "m", "n", "u") if v not in iters)
        i, j = iters
        out, mat = p.fresh("E"), p.fresh("M")
        q = draw(st.integers(1, 8))
        if draw(st.booleans()):  # E[i][l] += last[i][j] * M[j][l]: last shared along rows
            p.shapes.update({out: (shape[0], q), mat: (shape[1], q)})
            ma = acc(mat, j, new)
            order = draw(st.sampled_from([(i, new, j), (i, j, new)]))
            ext = {i: shape[0], j: shape[1], new: q}
            p.add(Stmt(name, tuple((v, ext[v]) for v in order), acc(out, i, new), "+=",
                       f"{src.text()} * {ma.text()}", (src, ma)), "matmul-row")
        else:  # E[l][j] += M[l][i] * last[i][j]: last shared along columns
            p.shapes.update({out: (q, shape[1]), mat: (q, shape[0])})
            ma = acc(mat, new, i)
            order = draw(st.sampled_from([(new, j, i), (j, new, i)]))
            ext = {i: shape[0], j: shape[1], new: q}
            p.add(Stmt(name, tuple((v, ext[v]) for v in order), acc(out, new, j), "+=",
                       f"{ma.text()} * {src.text()}", (ma, src)), "matmul-col")
        return out
    if kind == "shift":
        # out[.., o] = last[.., o + s]: an offset read, one element shorter per step
        sh = draw(st.integers(1, min(2, shape[-1] - 1)))
        out = p.fresh("H")
        p.shapes[out] = (*shape[:-1], shape[-1] - sh)
        ov = iters[-1]
        rd = acc(last, *iters[:-1], f"{ov} + {sh}")
        p.add(Stmt(name, (*dom[:-1], (ov, shape[-1] - sh)), acc(out, *iters), "=",
                   draw(st.sampled_from(["{r}", "2 * {r}", "-{r}", "{r} - 1"]))
                   .format(r=rd.text()), (rd,)), f"shift {sh}")
        return out
    out = p.fresh({"neg": "N", "affine": "K", "max2": "X", "sub": "D", "alpha": "G"}[kind])
    p.shapes[out] = shape
    if kind == "neg":
        p.add(Stmt(name, dom, acc(out, *iters), "=", f"-{src.text()}", (src,)), "neg")
    elif kind == "affine":
        form = draw(st.sampled_from(["2 * {r} - 1", "1 - {r}", "{r} + 3", "-2 * {r}"]))
        p.add(Stmt(name, dom, acc(out, *iters), "=", form.format(r=src.text()), (src,)),
              f"affine {form}")
    elif kind == "alpha":
        sc = "alpha" if "alpha" not in p.shapes or p.shapes["alpha"] == () else p.fresh("s")
        p.shapes[sc] = ()
        p.add(Stmt(name, dom, acc(out, *iters), "=", f"{sc} * {src.text()}",
                   (acc(sc), src)), "alpha")
    else:
        other = p.fresh("O")
        p.shapes[other] = shape
        b = acc(other, *iters)
        if kind == "max2":
            expr = f"max({src.text()}, {b.text()})"
        else:
            expr = draw(st.sampled_from([f"{src.text()} - {b.text()}",
                                         f"{b.text()} - {src.text()}",
                                         f"-{src.text()} + {b.text()}"]))
        p.add(Stmt(name, dom, acc(out, *iters), "=", expr, (src, b)), kind)
    return out


@st.composite
def programs(draw: st.DrawFn) -> Program:
    p = Program(draw(st.sampled_from(["float16", "float32"])))
    if draw(st.integers(0, 9)) == 0:
        last = draw(three_products(p))
        more = draw(st.integers(0, 1))
    else:
        last = draw(first_statement(p))
        more = draw(st.integers(0, 2))
        if p.label[0].startswith("matmul") and draw(st.booleans()):  # a 2mm chain
            iters = [v or f"v{d}" for d, v in enumerate(p.stmts[-1].target.plain)]
            last = draw(follow_up_more(p, last, "matmul", iters))
            more = draw(st.integers(0, 1))
    for _ in range(more):
        last = draw(follow_up(p, last))
    return p


@st.composite
def three_products(draw: st.DrawFn, p: Program) -> str:
    """3mm: T = A B, U = C D, E = T U (T shared along rows, U along columns)."""
    ni, nj, nk, nl, nm = (draw(st.integers(1, 6)) for _ in range(5))
    p.shapes.update(A=(ni, nk), B=(nk, nj), C=(nj, nm), D=(nm, nl), T=(ni, nj),
                    U=(nj, nl), E=(ni, nl))
    p.add(Stmt("S0", (("i", ni), ("j", nj), ("k", nk)), acc("T", "i", "j"), "+=",
               "A[i][k] * B[k][j]", (acc("A", "i", "k"), acc("B", "k", "j"))), "3mm")
    p.add(Stmt("S1", (("j", nj), ("l", nl), ("m", nm)), acc("U", "j", "l"), "+=",
               "C[j][m] * D[m][l]", (acc("C", "j", "m"), acc("D", "m", "l"))), "3mm-U")
    p.add(Stmt("S2", (("i", ni), ("l", nl), ("j", nj)), acc("E", "i", "l"), "+=",
               "T[i][j] * U[j][l]", (acc("T", "i", "j"), acc("U", "j", "l"))), "3mm-E")
    return "E"


# ------------------------------------------------------------------- mappings


@dataclass(frozen=True)
class Tiling:
    axis: str  # "X" or "Y"
    tile: int


@dataclass
class Layout:
    cols: int  # compute columns and rows, before the free border lines
    rows: int
    pad: dict[str, int]  # free lines per side
    place: dict[str, dict[str, tuple[str | None, int]]]  # stmt -> axis -> (iterator, t | c)
    shift: dict[str, int] = field(default_factory=lambda: {"X": 0, "Y": 0})  # idle lines
    # stmt -> axis -> (second iterator, its tile, multiplier): ``v//t + mult*(v2//t2)``
    combo: dict[str, dict[str, tuple[str, int, int]]] = field(default_factory=dict)
    # stmt -> axis -> tiles, for coordinates counted backwards: ``tiles - 1 - v//t``
    rev: dict[str, dict[str, int]] = field(default_factory=dict)
    # stmt -> axis -> step between used lines: ``2*(v//t)`` leaves every other line idle
    stride: dict[str, dict[str, int]] = field(default_factory=dict)
    grid: bool = False  # drawn by grid_layouts
    # stmt -> axis -> lines the tiles are dealt over: ``(v//t) mod P``, block-cyclic
    wrap: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def width(self) -> int:
        return self.cols + self.pad["west"] + self.pad["east"]

    @property
    def height(self) -> int:
        return self.rows + self.pad["north"] + self.pad["south"]

    def offset(self, axis: str) -> int:
        return self.pad["west"] if axis == "X" else self.pad["north"]

    def tiled_offset(self, axis: str) -> int:
        """Where tiled coordinates start: after the border lines and the idle lines."""
        return self.offset(axis) + self.shift[axis]

    def combined(self, stmt: str, axis: str) -> bool:
        return axis in self.combo.get(stmt, {})

    def coord(self, stmt: str, axis: str) -> str:
        v, n = self.place[stmt][axis]
        if v is None:
            return str(self.offset(axis) + n)
        off = self.tiled_offset(axis)
        tiled = v if n == 1 else f"{v}//{n}"
        if self.combined(stmt, axis):
            v2, t2, mult = self.combo[stmt][axis]
            tiled += f" + {mult}*({v2 if t2 == 1 else f'{v2}//{t2}'})"
        if axis in self.wrap.get(stmt, {}):
            tiled = f"({tiled}) mod {self.wrap[stmt][axis]}"
        step = self.stride.get(stmt, {}).get(axis, 1)
        if step > 1:
            tiled = f"{step}*({tiled})"
        if axis in self.rev.get(stmt, {}):
            return f"{off + self.rev[stmt][axis] - 1} - ({tiled})"
        return f"{off} + {tiled}" if off else tiled


def _tiles(n: int, t: int) -> int:
    return -(-n // t)


@st.composite
def tile_size(draw: st.DrawFn, n: int, room: int) -> int:
    """A tile size for extent ``n`` giving at most ``room`` tiles; often not a divisor."""
    lo = _tiles(n, room)
    return draw(st.integers(max(lo, 1), max(n, 1)))


@st.composite
def layouts(draw: st.DrawFn, p: Program) -> Layout:
    names: dict[str, int] = {}
    for s in p.stmts:
        for v, n in s.iters:
            names.setdefault(v, n)
    room = {axis: draw(st.sampled_from([3, 4, 4, 6])) for axis in ("X", "Y")}
    tilings: dict[str, Tiling] = {}
    for v, n in names.items():
        axis = draw(st.sampled_from(["X", "Y", None, None]))
        if axis is not None:
            tilings[v] = Tiling(axis, draw(tile_size(n, room[axis])))
    place: dict[str, dict[str, tuple[str | None, int]]] = {}
    combo: dict[str, dict[str, tuple[str, int, int]]] = {}
    rev: dict[str, dict[str, int]] = {}
    stride: dict[str, dict[str, int]] = {}
    wrap: dict[str, dict[str, int]] = {}
    span = {"X": 1, "Y": 1}
    pending: list[tuple[str, str]] = []
    for s in p.stmts:
        place[s.name] = {}
        combo[s.name] = {}
        own = dict(s.iters)
        independent = draw(st.integers(0, 9)) == 0
        for axis in ("X", "Y"):
            used = {u for u, _ in place[s.name].values() if u is not None}
            used |= {u for u, _, _ in combo[s.name].values()}
            if independent:
                options = [u for u in own if u not in used]
                pick = draw(st.sampled_from([None, *options]))
                if pick is not None:
                    t = draw(tile_size(own[pick], 4))
                    place[s.name][axis] = (pick, t)
                    span[axis] = max(span[axis], _tiles(own[pick], t))
                    continue
            else:
                cands = [v for v in own if v in tilings and tilings[v].axis == axis
                         and v not in used and _tiles(own[v], tilings[v].tile) <= MAX_PES]
                if cands:
                    v = draw(st.sampled_from(cands))
                    t = tilings[v].tile
                    place[s.name][axis] = (v, t)
                    first = _tiles(own[v], t)
                    rest = [u for u in own if u != v and u not in used]
                    if rest and first <= 3 and draw(st.integers(0, 3)) == 0:
                        # two iterators on one axis (Example 5.7: k//2 + 2*(w//4))
                        v2 = draw(st.sampled_from(rest))
                        t2 = draw(tile_size(own[v2], 6 // first))
                        combo[s.name][axis] = (v2, t2, first)
                        first *= _tiles(own[v2], t2)
                    if (axis not in combo[s.name] and first > 1 and 2 * first - 1 <= MAX_PES
                            and draw(st.integers(0, 5)) == 0):
                        stride.setdefault(s.name, {})[axis] = 2
                        first = 2 * first - 1
                    elif axis not in combo[s.name] and first >= 3 and \
                            draw(st.integers(0, 5)) == 0:  # block-cyclic: (v//t) mod P
                        first = draw(st.integers(2, first - 1))
                        wrap.setdefault(s.name, {})[axis] = first
                    span[axis] = max(span[axis], first)
                    if first > 1 and draw(st.integers(0, 5)) == 0:
                        rev.setdefault(s.name, {})[axis] = first
                    continue
            place[s.name][axis] = (None, 0)
            pending.append((s.name, axis))
    extra = {axis: draw(st.integers(0, max(0, min(2, MAX_PES - span[axis]))))
             for axis in ("X", "Y")}
    shift = {axis: draw(st.integers(0, extra[axis])) for axis in ("X", "Y")}
    cols, rows = span["X"] + extra["X"], span["Y"] + extra["Y"]
    for stmt, axis in pending:  # constant coordinates: first, last or any line
        size = cols if axis == "X" else rows
        c = draw(st.sampled_from([0, size - 1, draw(st.integers(0, size - 1))]))
        place[stmt][axis] = (None, c)
    pad = {}
    for side in SIDES:
        pad[side] = draw(st.sampled_from([0, 0, 1]))
    while cols + pad["west"] + pad["east"] > MAX_PES and pad["west"] + pad["east"]:
        pad["west" if pad["west"] else "east"] -= 1
    while rows + pad["north"] + pad["south"] > MAX_PES and pad["north"] + pad["south"]:
        pad["north" if pad["north"] else "south"] -= 1
    return Layout(cols, rows, pad, place, shift, combo, rev, stride, wrap=wrap)


@st.composite
def grid_layouts(draw: st.DrawFn, p: Program) -> Layout | None:
    """Every statement tiled over the whole compute grid, no idle lines: the layouts
    under which internal tensors can be exchanged along rows or columns (3mm on 2 x 2)
    and partial sums split over a line (``k`` tiled) are combined. Each axis has a span;
    every statement tiles one of its iterators to exactly that many tiles, often the
    iterator (and tile) an earlier statement used. None when a statement cannot."""
    span = {"X": draw(st.integers(1, 4)), "Y": draw(st.integers(1, 4))}
    chosen: dict[str, list[tuple[str, int]]] = {"X": [], "Y": []}
    place: dict[str, dict[str, tuple[str | None, int]]] = {}
    parallel = draw(st.integers(0, 2)) > 0  # tile only iterators that index the target
    rev: dict[str, dict[str, int]] = {}
    for s in p.stmts:
        place[s.name] = {}
        own = dict(s.iters)
        if parallel and all(v in own for v in s.target.plain if v):
            own = {v: own[v] for v in s.target.plain if v} | (
                {} if len(s.target.plain) >= 2 else own)
        for axis in ("X", "Y"):
            used = {u for u, _ in place[s.name].values() if u is not None}
            S = span[axis]
            reuse = [(v, t) for v, t in chosen[axis]
                     if v in own and v not in used and _tiles(own[v], t) == S]
            options = [(v, t) for v in own if v not in used
                       for t in range(1, own[v] + 1) if _tiles(own[v], t) == S]
            if reuse and draw(st.integers(0, 2)) > 0:
                v, t = draw(st.sampled_from(reuse))
            elif options:
                v, t = draw(st.sampled_from(options))
            else:
                return None
            place[s.name][axis] = (v, t)
            chosen[axis].append((v, t))
            if S > 1 and draw(st.integers(0, 5)) == 0:
                rev.setdefault(s.name, {})[axis] = S
    pad = {side: draw(st.sampled_from([0, 0, 1])) for side in SIDES}
    while span["X"] + pad["west"] + pad["east"] > MAX_PES:
        pad["west" if pad["west"] else "east"] -= 1
    while span["Y"] + pad["north"] + pad["south"] > MAX_PES:
        pad["north" if pad["north"] else "south"] -= 1
    return Layout(span["X"], span["Y"], pad, place, rev=rev, grid=True)


@dataclass(frozen=True)
class Component:
    expr: str  # in the element variables e0, e1, ...
    size: int  # the component ranges over 0 .. size - 1


def _flatten(parts: list[Component]) -> Component:
    expr, size = "", 1
    for c in reversed(parts):
        term = c.expr if size == 1 else f"{size}*({c.expr})"
        expr = term if not expr else f"{term} + {expr}"
        size *= c.size
    return Component(expr or "0", size)


@st.composite
def stream(draw: st.DrawFn, p: Program, lay: Layout, tensor: str, direction: str
           ) -> tuple[str, str]:
    """A streamed tensor's spec and a short description."""
    shape = p.shapes[tensor]
    kind = draw(st.sampled_from(["sparse", "dense"]))
    padded = [side for side in SIDES if lay.pad[side]]
    if padded and draw(st.booleans()):  # a side with a free border line: room for adapters
        side = draw(st.sampled_from(padded))
    else:
        side = draw(st.sampled_from(SIDES))
    axis = "X" if side in ("north", "south") else "Y"  # the axis along the side
    length = lay.width if axis == "X" else lay.height
    outside = {"north": -1, "west": -1, "south": lay.height, "east": lay.width}[side]
    users = [(s, a) for s in p.stmts
             for a in ((s.target,) if direction == "output" else s.reads) if a.tensor == tensor]
    stmt, access = draw(st.sampled_from(users))
    dims = [Component(f"e{d}", n) for d, n in enumerate(shape)]
    style = draw(st.sampled_from(["aligned", "aligned", "single", "tiled"]))
    where: str
    v, t = lay.place[stmt.name][axis]
    off = lay.tiled_offset(axis) if v is not None else lay.offset(axis)
    if style == "aligned" and lay.combined(stmt.name, axis):
        style = "tiled" if shape else "single"
    if style == "aligned" and v is not None and v in access.plain:
        d = access.plain.index(v)
        mod = draw(st.booleans())
        where = f"e{d}" if t == 1 else f"e{d}//{t}"
        wrap = lay.wrap.get(stmt.name, {}).get(axis)
        if wrap is not None:
            where = f"({where}) mod {wrap}"
            style += " wrap"
        step = lay.stride.get(stmt.name, {}).get(axis, 1)
        if step > 1:
            where = f"{step}*({where})"
            style += " stride"
        if axis in lay.rev.get(stmt.name, {}):
            where = f"{off + lay.rev[stmt.name][axis] - 1} - {where}"
            style += " rev"
        else:
            where = f"{off} + {where}" if off else where
        if mod and wrap is not None:  # (a PE's blocks one after the other)
            rounds = _tiles(shape[d], t * wrap)
            dims[d] = Component(f"e{d}//{wrap}", rounds) if t == 1 else Component(
                f"{t}*(e{d}//{t * wrap}) + e{d} mod {t}", t * rounds)
        elif mod and t > 1:
            dims[d] = Component(f"e{d} mod {t}", t)
    elif style == "aligned" and v is None:
        where = str(off + t)
    elif style == "tiled" and shape:
        d = draw(st.integers(0, len(shape) - 1))
        n = shape[d]
        t = draw(tile_size(n, length))
        base = draw(st.integers(0, length - _tiles(n, t)))
        where = f"e{d}" if t == 1 else f"e{d}//{t}"
        where = f"{base} + {where}" if base else where
        if draw(st.booleans()) and t > 1:
            dims[d] = Component(f"e{d} mod {t}", t)
        style = f"tiled e{d}//{t}"
    else:
        style = "single"
        where = str(draw(st.integers(0, length - 1)))
    if draw(st.booleans()) and len(dims) > 1:
        dims = [_flatten(dims)]
        style += " flat"
    pe = f"PE[{where}, {outside}]" if axis == "X" else f"PE[{outside}, {where}]"
    elems = ", ".join(f"e{d}" for d in range(len(shape)))
    bounds = " and ".join(f"0 <= e{d} <= {n - 1}" for d, n in enumerate(shape))
    index = ", ".join(c.expr for c in dims) or "0"
    spec = (f"{direction} {tensor} {kind} {{ {tensor}[{elems}] -> [{pe} -> index[{index}]]"
            + (f" : {bounds}" if bounds else "") + " }")
    if direction == "input" and shape and shape[0] >= 2 and draw(st.integers(0, 5)) == 0:
        # The second half of the elements from the opposite side, at the same positions.
        other = {"north": "south", "south": "north", "west": "east", "east": "west"}[side]
        beyond = {"north": -1, "west": -1, "south": lay.height, "east": lay.width}[other]
        pe2 = f"PE[{where}, {beyond}]" if axis == "X" else f"PE[{beyond}, {where}]"
        half = shape[0] // 2
        spec = (f"{direction} {tensor} {kind} {{ {tensor}[{elems}] -> [{pe} -> index[{index}]]"
                f" : {bounds} and e0 < {half}; {tensor}[{elems}] -> [{pe2} -> "
                f"index[{index}]] : {bounds} and e0 >= {half} }}")
        side = f"{side}+{other}"
    return spec, f"{tensor}:{kind}/{side}/{style}"


@st.composite
def mappings(draw: st.DrawFn, p: Program) -> tuple[str, str]:
    lay = None
    if draw(st.integers(0, 2)) < (2 if len(p.stmts) > 1 else 1):  # more for chains
        lay = draw(grid_layouts(p))
    if lay is None:
        lay = draw(layouts(p))
    lines = [f"rectangle {{ PE[{lay.width}, {lay.height}] }}", "placement {"]
    for s in p.stmts:
        iters = ", ".join(v for v, _ in s.iters)
        lines.append(f"  {s.name}[{iters}] -> PE[{lay.coord(s.name, 'X')}, "
                     f"{lay.coord(s.name, 'Y')}];")
    lines[-1] = lines[-1].rstrip(";")
    lines.append("}")
    described = [f"{lay.width}x{lay.height}" + (" grid" if lay.grid else "")]
    resident = draw(st.sampled_from([1, 1, 2]))  # in 3: how often a tensor is resident
    for direction, tensors in (("input", p.inputs), ("output", p.outputs)):
        for tensor in tensors:
            if draw(st.integers(0, 2)) < resident:
                lines.append(f"{direction} {tensor} resident")
                described.append(f"{tensor}:resident")
            else:
                spec, what = draw(stream(p, lay, tensor, direction))
                lines.append(spec)
                described.append(what)
    return "\n".join(lines) + "\n", " ".join(described)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[str, str, str]:
    """A random valid program, a random well-formed mapping, and a one-line description."""
    p = draw(programs())
    mapping, described = draw(mappings(p))
    return p.text(), mapping, f"{' + '.join(p.label)} ({p.dtype}); {described}"
