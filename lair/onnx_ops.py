"""The ONNX operators ``dtg import`` supports, each as LAIR statements
(``lair/onnx_import.py``). Every translation writes one LAIR node named after the ONNX
node; a node may hold several statements (a padded copy of the input, the reduction,
the bias), labelled ``<node>_pad``, ``<node>_acc`` and ``<node>`` (made unique like
every name)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

import numpy as np

from dtg.errors import InputError
from dtg.lair.onnx_import import Builder, Value, iterators, literal, statement

Op = Callable[[Builder, Any, str, str, dict[str, tuple[int, ...]]], None]


def attributes(node: Any) -> dict[str, Any]:
    import onnx

    result = {}
    for attr in node.attribute:
        value = onnx.helper.get_attribute_value(attr)
        result[attr.name] = value.decode() if isinstance(value, bytes) else value
    return result


def _only_output(node: Any, what: str) -> str:
    if len([o for o in node.output if o]) != 1:
        raise InputError(f"{what}: only its first output is supported (it has "
                         f"{len(node.output)})")
    return str(node.output[0])


def _broadcast(shape: Sequence[int], out: Sequence[int], loop: Sequence[str]) -> list[str]:
    """The index of an operand of ``shape`` broadcast (numpy's rules) to ``out``."""
    off = len(out) - len(shape)
    return ["0" if n == 1 and out[off + k] != 1 else loop[off + k] for k, n in enumerate(shape)]


def _same_dtype(values: Sequence[Value], what: str) -> str:
    kinds = {v.dtype for v in values}
    if len(kinds) != 1:
        raise InputError(f"{what}: its operands mix {' and '.join(sorted(kinds))}")
    return kinds.pop()


# ------------------------------------------------------------------ elementwise


def relu(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
         ) -> None:
    x = b.value(node.input[0], what)
    y = b.new_value(_only_output(node, what), x.shape, x.dtype)
    loop = iterators(len(x.shape))
    b.node(name, [x], [y], [statement(None, loop, x.shape, y.at(loop), "=",
                                      f"max({x.at(loop)}, 0.0)")])


def leaky_relu(b: Builder, node: Any, name: str, what: str,
               shapes: dict[str, tuple[int, ...]]) -> None:
    """``max(x, alpha x)``, which is LeakyRelu for ``0 <= alpha <= 1``."""
    alpha = float(attributes(node).get("alpha", 0.01))
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"{what}: alpha {alpha} is outside [0, 1], where LeakyRelu is not "
                         "max(x, alpha * x)")
    x = b.value(node.input[0], what)
    y = b.new_value(_only_output(node, what), x.shape, x.dtype)
    loop = iterators(len(x.shape))
    b.node(name, [x], [y], [statement(None, loop, x.shape, y.at(loop), "=",
                                      f"max({x.at(loop)}, {literal(alpha)} * {x.at(loop)})")])


def pad(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
        ) -> None:
    """Zero padding (``constant`` mode, value 0): a copy at an offset; the elements no
    instance defines keep LAIR's initial 0."""
    x = b.value(node.input[0], what)
    mode = attributes(node).get("mode", "constant")
    pads = b.constants.get(node.input[1]) if len(node.input) > 1 else None
    value = b.constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if mode != "constant" or pads is None or (value is not None and float(value) != 0.0) or \
            (len(node.input) > 3 and node.input[3]):
        raise InputError(f"{what}: only zero padding (mode constant, value 0, constant pads, "
                         "every axis) is supported")
    before = [int(p) for p in np.asarray(pads)[:len(x.shape)]]
    if any(p < 0 for p in np.asarray(pads)):
        raise InputError(f"{what}: negative pads (cropping) are not supported")
    out = _only_output(node, what)
    y = b.new_value(out, shapes[out], x.dtype)
    loop = iterators(len(x.shape))
    target = y.at([f"{v} + {p}" if p else v for v, p in zip(loop, before, strict=True)])
    b.node(name, [x], [y], [statement(None, loop, x.shape, target, "=", x.at(loop))])


def binary(symbol: str) -> Op:
    def op(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
           ) -> None:
        a, c = (b.value(i, what) for i in node.input[:2])
        out = _only_output(node, what)
        shape = shapes[out]
        y = b.new_value(out, shape, _same_dtype([a, c], what))
        loop = iterators(len(shape))
        value = f"{a.at(_broadcast(a.shape, shape, loop))} {symbol} " \
                f"{c.at(_broadcast(c.shape, shape, loop))}"
        b.node(name, [a, c], [y], [statement(None, loop, shape, y.at(loop), "=", value)])
    return op


def identity(b: Builder, node: Any, name: str, what: str,
             shapes: dict[str, tuple[int, ...]]) -> None:
    """Identity (and Dropout at inference): the output is the input's tensor."""
    b.values[_only_output(node, what)] = b.value(node.input[0], what)


def batch_norm(b: Builder, node: Any, name: str, what: str,
               shapes: dict[str, tuple[int, ...]]) -> None:
    """Batch normalization not folded into a layer: ``x * a[c] + d[c]`` with ``a`` and
    ``d`` computed at import from its constant statistics."""
    x = b.value(node.input[0], what)
    params = [b.constants.get(i) for i in node.input[1:5]]
    if any(p is None for p in params):
        raise InputError(f"{what}: its scale, bias, mean and variance must be constants")
    scale, bias, mean, var = (np.asarray(p, dtype=np.float64) for p in params)
    eps = float(attributes(node).get("epsilon", 1e-5))
    a = scale / np.sqrt(var + eps)
    av = b.constant_input(f"{name}_scale", a, x.dtype)
    dv = b.constant_input(f"{name}_shift", bias - mean * a, x.dtype)
    y = b.new_value(_only_output(node, what), x.shape, x.dtype)
    loop = iterators(len(x.shape))
    b.node(name, [x, av, dv], [y], [statement(
        None, loop, x.shape, y.at(loop), "=",
        f"{x.at(loop)} * {av.at([loop[1]])} + {dv.at([loop[1]])}")])


# ------------------------------------------------------------------ products


def _distinct(b: Builder, name: str, a: Value, c: Value) -> tuple[Value, Value, list[str]]:
    """Two operands of a product; where they are one tensor, the first is read from a
    copy (a LAIR statement accesses a tensor through one index expression)."""
    if a.name != c.name:
        return a, c, []
    copy = Value(b.fresh(f"{name}_operand"), a.shape, a.dtype)
    loop = iterators(len(a.shape))
    return copy, c, [statement(b.fresh(f"{name}_copy"), loop, a.shape, copy.at(loop), "=",
                               a.at(loop))]


def matmul(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
           ) -> None:
    a, c = (b.value(i, what) for i in node.input[:2])
    a, c, copies = _distinct(b, name, a, c)
    if len(a.shape) < 2 or len(c.shape) < 2:
        raise InputError(f"{what}: a MatMul operand of rank 1 is not supported (reshape it "
                         "to a matrix)")
    out = _only_output(node, what)
    shape = shapes[out]
    y = b.new_value(out, shape, _same_dtype([a, c], what))
    loop = iterators(len(shape))
    k = "k0"
    batch = loop[:-2]
    ai = [*_broadcast(a.shape[:-2], shape[:-2], batch), loop[-2], k]
    ci = [*_broadcast(c.shape[:-2], shape[:-2], batch), k, loop[-1]]
    b.node(name, [a, c], [y, *([a] if copies else [])], [*copies, statement(
        name, [*loop, k], [*shape, a.shape[-1]], y.at(loop), "+=", f"{a.at(ai)} * {c.at(ci)}")])


def gemm(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
         ) -> None:
    at = attributes(node)
    a, w = (b.value(i, what) for i in node.input[:2])
    if len(a.shape) != 2 or len(w.shape) != 2:
        raise InputError(f"{what}: Gemm takes matrices")
    a, w, copies = _distinct(b, name, a, w)
    out = _only_output(node, what)
    m, n = shapes[out]
    ta, tb = bool(at.get("transA", 0)), bool(at.get("transB", 0))
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    kk = a.shape[0] if ta else a.shape[1]
    i, j, k = "i0", "i1", "k0"
    ai = [k, i] if ta else [i, k]
    wi = [j, k] if tb else [k, j]
    product = f"{a.at(ai)} * {w.at(wi)}"
    if alpha != 1.0:
        product = f"{literal(alpha)} * {product}"
    dtype = _same_dtype([a, w], what)
    y = b.new_value(out, (m, n), dtype)
    has_c = len(node.input) > 2 and node.input[2]
    if not has_c or beta == 0.0:
        b.node(name, [a, w], [y, *([a] if copies else [])], [*copies, statement(
            name, [i, j, k], [m, n, kk], y.at([i, j]), "+=", product)])
        return
    c = b.value(node.input[2], what)
    if c.name in (a.name, w.name):
        raise InputError(f"{what}: its C is one of its factors, which this import does not "
                         "support")
    term = c.at(_broadcast(c.shape, (m, n), [i, j]))
    if beta != 1.0:
        term = f"{literal(beta)} * {term}"
    acc = Value(b.fresh(f"{name}_sum"), (m, n), dtype)
    b.node(name, [a, w, c], [acc, y, *([a] if copies else [])], [
        *copies,
        statement(b.fresh(f"{name}_acc"), [i, j, k], [m, n, kk], acc.at([i, j]), "+=",
                  product),
        statement(name, [i, j], [m, n], y.at([i, j]), "=", f"{acc.at([i, j])} + {term}")])


# ------------------------------------------------------------------ windows


def _window_attributes(node: Any, what: str, spatial: Sequence[int], kernel: Sequence[int]
                       ) -> tuple[list[int], list[int], list[int], list[int]]:
    """Strides, dilations, and the pads before and after each spatial dimension."""
    at = attributes(node)
    r = len(spatial)
    strides = list(at.get("strides", [1] * r))
    dilations = list(at.get("dilations", [1] * r))
    pads = list(at.get("pads", [0] * (2 * r)))
    auto = at.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * r)
        for d in range(r):
            out = -(-spatial[d] // strides[d])
            total = max(0, (out - 1) * strides[d] + dilations[d] * (kernel[d] - 1) + 1
                        - spatial[d])
            small, large = total // 2, total - total // 2
            pads[d], pads[r + d] = (small, large) if auto == "SAME_UPPER" else (large, small)
    elif auto not in ("NOTSET", "VALID"):
        raise InputError(f"{what}: auto_pad {auto!r} is not supported")
    if len(strides) != r or len(dilations) != r or len(pads) != 2 * r:
        raise InputError(f"{what}: its strides, dilations or pads do not match its "
                         f"{r} spatial dimensions")
    return strides, dilations, pads[:r], pads[r:]


def _padded(b: Builder, x: Value, name: str, before: Sequence[int], extent: Sequence[int],
            op: str) -> tuple[Value, list[str]]:
    """``x`` with its spatial dimensions (after the first two) grown to ``extent`` by
    ``before`` elements in front: the padded copy's statement (the pad holds the
    reduction's start value: 0 for ``=``, -inf for ``max=``), or ``x`` itself."""
    spatial = x.shape[2:]
    if all(p == 0 for p in before) and tuple(extent) == tuple(spatial):
        return x, []
    xp = Value(b.fresh(f"{name}_padded"), (*x.shape[:2], *extent), x.dtype)
    loop = iterators(len(x.shape))
    target = xp.at([*loop[:2], *(f"{v} + {p}" if p else v
                                 for v, p in zip(loop[2:], before, strict=True))])
    return xp, [statement(b.fresh(f"{name}_pad"), loop, x.shape, target, op, x.at(loop))]


def _window_index(out: Sequence[str], kern: Sequence[str], strides: Sequence[int],
                  dilations: Sequence[int]) -> list[str]:
    def times(c: int, v: str) -> str:
        return v if c == 1 else f"{c} * {v}"

    return [f"{times(s, o)} + {times(d, k)}"
            for o, k, s, d in zip(out, kern, strides, dilations, strict=True)]


def _check_windows(what: str, out: Sequence[int], spatial: Sequence[int],
                   strides: Sequence[int], before: Sequence[int]) -> None:
    """Every window starts inside the input or its leading pad: with ``ceil_mode``, a
    last window that starts in the trailing pad has no agreed meaning (ONNX's shape
    inference keeps it, its reference implementation drops it)."""
    for d, (o, n, s, p) in enumerate(zip(out, spatial, strides, before, strict=True)):
        if (o - 1) * s - p >= n:
            raise InputError(f"{what}: its last window along spatial dimension {d} starts "
                             "in the padding (ceil_mode), where ONNX's shape inference and "
                             "its reference disagree on the output's size; not supported")


def _reach(out: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
           dilations: Sequence[int]) -> list[int]:
    """The padded extent the windows read: the last window's last element, plus one."""
    return [(o - 1) * s + d * (k - 1) + 1 for o, k, s, d in zip(out, kernel, strides, dilations,
                                                                 strict=True)]


def conv(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
         ) -> None:
    x, w = (b.value(i, what) for i in node.input[:2])
    dtype = _same_dtype([x, w], what)
    out = _only_output(node, what)
    shape = shapes[out]
    r = len(x.shape) - 2
    if r < 1 or len(w.shape) != r + 2:
        raise InputError(f"{what}: expected an input [N, C, ...] and weights [M, C/group, "
                         "...] of the same rank")
    groups = int(attributes(node).get("group", 1))
    n_, c_ = x.shape[:2]
    m_, cg = w.shape[:2]
    kernel = list(w.shape[2:])
    if groups < 1 or c_ % groups or m_ % groups or cg != c_ // groups:
        raise InputError(f"{what}: {c_} input channels and {m_} filters do not split into "
                         f"{groups} groups of the weights' {cg} channels")
    strides, dilations, before, _after = _window_attributes(node, what, x.shape[2:], kernel)
    reach = _reach(shape[2:], kernel, strides, dilations)
    extent = [max(before[d] + x.shape[2 + d], reach[d]) for d in range(r)]
    xp, stmts = _padded(b, x, name, before, extent, "=")
    o = [f"o{d}" for d in range(r)]
    k = [f"k{d}" for d in range(r)]
    mg = m_ // groups
    if groups == 1:
        loop, extents, m, ch = ["n0", "m0", *o, "c0", *k], [n_, m_, *shape[2:], cg, *kernel], \
            "m0", "c0"
    else:
        loop = ["n0", "g0", "m0", *o, "c0", *k]
        extents = [n_, groups, mg, *shape[2:], cg, *kernel]
        m, ch = f"{mg} * g0 + m0", f"{cg} * g0 + c0"
    y = b.new_value(out, shape, dtype)
    has_bias = len(node.input) > 2 and node.input[2]
    acc = Value(b.fresh(f"{name}_sum"), shape, dtype) if has_bias else y
    value = f"{w.at([m, 'c0', *k])} * {xp.at(['n0', ch, *_window_index(o, k, strides, dilations)])}"
    stmts.append(statement(b.fresh(f"{name}_acc") if has_bias else name, loop, extents,
                           acc.at(["n0", m, *o]), "+=", value))
    reads = [x, w]
    if has_bias:
        bias = b.value(node.input[2], what)
        reads.append(bias)
        full = iterators(len(shape))
        stmts.append(statement(name, full, shape, y.at(full), "=",
                               f"{acc.at(full)} + {bias.at([full[1]])}"))
    b.node(name, reads, [v for v in (xp, acc, y) if v not in reads], stmts)


def _pool_shape(node: Any, what: str, x: Value) -> list[int]:
    at = attributes(node)
    if "kernel_shape" not in at:
        raise InputError(f"{what}: kernel_shape is required")
    kernel = list(at["kernel_shape"])
    if len(kernel) != len(x.shape) - 2:
        raise InputError(f"{what}: kernel_shape {kernel} does not match the input's "
                         f"{len(x.shape) - 2} spatial dimensions")
    return kernel


def max_pool(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
             ) -> None:
    x = b.value(node.input[0], what)
    if len([o for o in node.output if o]) > 1:
        raise InputError(f"{what}: the Indices output of MaxPool is not supported")
    out = str(node.output[0])
    shape = shapes[out]
    kernel = _pool_shape(node, what, x)
    strides, dilations, before, _ = _window_attributes(node, what, x.shape[2:], kernel)
    _check_windows(what, shape[2:], x.shape[2:], strides, before)
    reach = _reach(shape[2:], kernel, strides, dilations)
    extent = [max(before[d] + x.shape[2 + d], reach[d]) for d in range(len(kernel))]
    xp, stmts = _padded(b, x, name, before, extent, "max=")
    r = len(kernel)
    o, k = [f"o{d}" for d in range(r)], [f"k{d}" for d in range(r)]
    y = b.new_value(out, shape, x.dtype)
    stmts.append(statement(name, ["n0", "c0", *o, *k],
                           [*shape[:2], *shape[2:], *kernel], y.at(["n0", "c0", *o]), "max=",
                           xp.at(["n0", "c0", *_window_index(o, k, strides, dilations)])))
    b.node(name, [x], [v for v in (xp, y) if v is not x], stmts)


def average_pool(b: Builder, node: Any, name: str, what: str,
                 shapes: dict[str, tuple[int, ...]]) -> None:
    x = b.value(node.input[0], what)
    out = _only_output(node, what)
    shape = shapes[out]
    kernel = _pool_shape(node, what, x)
    strides, dilations, before, after = _window_attributes(node, what, x.shape[2:], kernel)
    _check_windows(what, shape[2:], x.shape[2:], strides, before)
    include = bool(attributes(node).get("count_include_pad", 0))
    r = len(kernel)
    reach = _reach(shape[2:], kernel, strides, dilations)
    extent = [max(before[d] + x.shape[2 + d], reach[d]) for d in range(r)]
    xp, stmts = _padded(b, x, name, before, extent, "=")
    # each window's divisor: its elements inside the input (and the pads, if counted)
    counts = np.ones(shape[2:], dtype=np.int64)
    for d in range(r):
        lo, hi = (-before[d], x.shape[2 + d] + after[d]) if include else (0, x.shape[2 + d])
        first = np.arange(shape[2 + d]) * strides[d] - before[d]
        taps = first[:, None] + dilations[d] * np.arange(kernel[d])[None, :]
        per = ((taps >= lo) & (taps < hi)).sum(axis=1)
        counts = counts * per.reshape([-1 if e == d else 1 for e in range(r)])
    o, k = [f"o{d}" for d in range(r)], [f"k{d}" for d in range(r)]
    acc = Value(b.fresh(f"{name}_sum"), shape, x.dtype)
    stmts.append(statement(b.fresh(f"{name}_acc"), ["n0", "c0", *o, *k], [*shape, *kernel],
                           acc.at(["n0", "c0", *o]), "+=",
                           xp.at(["n0", "c0", *_window_index(o, k, strides, dilations)])))
    y = b.new_value(out, shape, x.dtype)
    full = iterators(len(shape))
    reads: list[Value] = [x]
    if np.all(counts == counts.flat[0]):
        factor = literal(1.0 / float(counts.flat[0]))
    else:
        inverse = b.constant_input(f"{name}_divisors", 1.0 / counts, x.dtype)
        reads.append(inverse)
        factor = inverse.at(full[2:])
    stmts.append(statement(name, full, shape, y.at(full), "=", f"{acc.at(full)} * {factor}"))
    b.node(name, reads, [v for v in (xp, acc, y) if v is not x], stmts)


def global_pool(kind: str) -> Op:
    def op(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
           ) -> None:
        x = b.value(node.input[0], what)
        out = _only_output(node, what)
        shape = shapes[out]
        r = len(x.shape) - 2
        s = [f"h{d}" for d in range(r)]
        y = b.new_value(out, shape, x.dtype)
        at_y = y.at(["n0", "c0", *(["0"] * r)])
        if kind == "max":
            b.node(name, [x], [y], [statement(None, ["n0", "c0", *s], x.shape, at_y, "max=",
                                              x.at(["n0", "c0", *s]))])
            return
        acc = Value(b.fresh(f"{name}_sum"), x.shape[:2], x.dtype)
        b.node(name, [x], [acc, y], [
            statement(b.fresh(f"{name}_acc"), ["n0", "c0", *s], x.shape, acc.at(["n0", "c0"]), "+=",
                      x.at(["n0", "c0", *s])),
            statement(name, ["n0", "c0"], x.shape[:2], at_y, "=",
                      f"{acc.at(['n0', 'c0'])} * {literal(1.0 / prod(x.shape[2:]))}")])
    return op


# ------------------------------------------------------------------ index remaps


def _flat(names: Sequence[str], shape: Sequence[int]) -> str:
    """The row-major position of ``names`` in ``shape`` (affine)."""
    terms = []
    for k, v in enumerate(names):
        stride = prod(shape[k + 1:])
        terms.append(v if stride == 1 else f"{stride} * {v}")
    return " + ".join(terms) if terms else "0"


def _remap(b: Builder, name: str, what: str, x: Value, out: str, shape: Sequence[int]) -> None:
    """``y`` of ``shape`` holding ``x``'s elements in row-major order, where each run of
    dimensions whose sizes multiply to the same on both sides has one dimension on one
    side (merged or split dimensions; others are not affine)."""
    ins = [d for d in range(len(x.shape)) if x.shape[d] != 1]
    outs = [d for d in range(len(shape)) if shape[d] != 1]
    x_index, y_index = ["0"] * len(x.shape), ["0"] * len(shape)
    loop: list[str] = []
    extents: list[int] = []
    i = j = 0
    while i < len(ins) or j < len(outs):
        gi, gj = [ins[i]], [outs[j]]
        i, j = i + 1, j + 1
        pi, pj = x.shape[gi[0]], shape[gj[0]]
        while pi != pj:
            if pi < pj:
                gi.append(ins[i])
                pi *= x.shape[ins[i]]
                i += 1
            else:
                gj.append(outs[j])
                pj *= shape[outs[j]]
                j += 1
        if len(gi) > 1 and len(gj) > 1:
            raise InputError(f"{what}: reshaping {list(x.shape)} to {list(shape)} mixes "
                             f"dimensions {gi} of the input with {gj} of the output, which "
                             "has no affine index; only merging or splitting dimensions is "
                             "supported")
        fine, coarse = (gi, gj) if len(gi) > 1 else (gj, gi)
        fine_shape = x.shape if fine is gi else shape
        names = [f"i{len(loop) + k}" for k in range(len(fine))]
        loop += names
        extents += [fine_shape[d] for d in fine]
        flat = _flat(names, [fine_shape[d] for d in fine])
        fine_index, coarse_index = (x_index, y_index) if fine is gi else (y_index, x_index)
        for d, v in zip(fine, names, strict=True):
            fine_index[d] = v
        coarse_index[coarse[0]] = flat
    y = b.new_value(out, shape, x.dtype)
    b.node(name, [x], [y], [statement(None, loop, extents, y.at(y_index), "=", x.at(x_index))])


def flatten(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
            ) -> None:
    x = b.value(node.input[0], what)
    out = _only_output(node, what)
    _remap(b, name, what, x, out, shapes[out])


def reshape(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
            ) -> None:
    x = b.value(node.input[0], what)
    if len(node.input) < 2 or node.input[1] not in b.constants:
        raise InputError(f"{what}: its shape must be a constant (an initializer or a "
                         "Constant node)")
    out = _only_output(node, what)
    _remap(b, name, what, x, out, shapes[out])


def squeeze(b: Builder, node: Any, name: str, what: str, shapes: dict[str, tuple[int, ...]]
            ) -> None:
    """Squeeze and Unsqueeze: dimensions of size 1 removed or added."""
    x = b.value(node.input[0], what)
    if len(node.input) > 1 and node.input[1] and node.input[1] not in b.constants:
        raise InputError(f"{what}: its axes must be a constant")
    out = _only_output(node, what)
    _remap(b, name, what, x, out, shapes[out])


def transpose(b: Builder, node: Any, name: str, what: str,
              shapes: dict[str, tuple[int, ...]]) -> None:
    x = b.value(node.input[0], what)
    out = _only_output(node, what)
    r = len(x.shape)
    perm = list(attributes(node).get("perm", list(reversed(range(r)))))
    loop = iterators(r)
    index = ["0"] * r
    for k, p in enumerate(perm):
        index[p] = loop[k]
    y = b.new_value(out, shapes[out], x.dtype)
    b.node(name, [x], [y], [statement(None, loop, shapes[out], y.at(loop), "=", x.at(index))])


OPS: dict[str, Op] = {
    "Add": binary("+"), "Sub": binary("-"), "Mul": binary("*"),
    "Relu": relu, "LeakyRelu": leaky_relu, "Pad": pad, "Squeeze": squeeze,
    "Unsqueeze": squeeze, "MatMul": matmul, "Gemm": gemm, "Conv": conv,
    "MaxPool": max_pool, "AveragePool": average_pool,
    "GlobalAveragePool": global_pool("average"), "GlobalMaxPool": global_pool("max"),
    "Flatten": flatten, "Reshape": reshape, "Transpose": transpose,
    "BatchNormalization": batch_norm, "Identity": identity, "Dropout": identity,
}


# ------------------------------------------------------------------ folding


def fold_batch_norms(nodes: list[Any], constants: dict[str, np.ndarray],
                     outputs: frozenset[str] = frozenset()) -> list[Any]:
    """Batch normalizations folded into the Conv or Gemm before them, where that layer's
    weights (and bias) are constants and only the normalization reads its output: the
    weights scaled per output channel, the bias shifted. New constants are added to
    ``constants``; the other nodes are returned unchanged. A layer whose output is also a
    graph output (``outputs``) keeps it."""
    import onnx

    readers: dict[str, int] = {}
    for node in nodes:
        for i in node.input:
            readers[i] = readers.get(i, 0) + 1
    producer = {o: node for node in nodes for o in node.output}
    folded: set[int] = set()
    replaced: dict[int, Any] = {}
    for node in nodes:
        if node.op_type != "BatchNormalization" or len([o for o in node.output if o]) != 1:
            continue
        layer = producer.get(node.input[0])
        stats = [constants.get(i) for i in node.input[1:5]]
        if layer is None or layer.op_type not in ("Conv", "Gemm") or \
                readers.get(node.input[0], 0) != 1 or node.input[0] in outputs or \
                any(s is None for s in stats) or \
                layer.input[1] not in constants or id(layer) in replaced or \
                (len(layer.input) > 2 and layer.input[2] and layer.input[2] not in constants):
            continue
        scale, shift, mean, var = (np.asarray(s, dtype=np.float64) for s in stats)
        eps = float(attributes(node).get("epsilon", 1e-5))
        a = scale / np.sqrt(var + eps)
        w = np.asarray(constants[layer.input[1]], dtype=np.float64)
        kind = constants[layer.input[1]].dtype
        at = attributes(layer)
        old_bias = np.asarray(constants[layer.input[2]], dtype=np.float64) if \
            len(layer.input) > 2 and layer.input[2] else np.zeros(a.shape)
        if layer.op_type == "Conv":
            w = w * a.reshape([-1] + [1] * (w.ndim - 1))
            bias = (old_bias - mean) * a + shift
        else:
            w = w * (a[:, None] if at.get("transB", 0) else a[None, :])
            bias = (float(at.get("beta", 1.0)) * old_bias - mean) * a + shift
        w_name, b_name = (_unused(f"{node.output[0]}__{what}", constants)
                          for what in ("weights", "bias"))
        constants[w_name], constants[b_name] = w.astype(kind), bias.astype(kind)
        new = onnx.NodeProto()
        new.CopyFrom(layer)
        del new.input[:]
        new.input.extend([layer.input[0], w_name, b_name])
        del new.output[:]
        new.output.extend([node.output[0]])
        if layer.op_type == "Gemm":
            for attr in new.attribute:
                if attr.name == "beta":
                    attr.f = 1.0
        replaced[id(layer)] = new
        folded.add(id(node))
    return [replaced.get(id(n), n) for n in nodes if id(n) not in folded]


def _unused(name: str, constants: dict[str, np.ndarray]) -> str:
    """``name``, or ``name_2``, ... where a constant has it (shared weights fold twice)."""
    result, k = name, 2
    while result in constants:
        result, k = f"{name}_{k}", k + 1
    return result
