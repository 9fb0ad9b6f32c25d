"""ONNX models as LAIR programs: one LAIR node per ONNX node, its initializers as inputs.

An ONNX graph with static shapes is a tensor program of the kind LAIR describes: every
supported operator is a few statements over a rectangle of iterators with affine
indices (``lair/onnx_ops.py``). The weights and biases (initializers) become program
inputs whose values the import returns (``dtg import`` writes them as an ``.npz``
beside the program), so the program runs as the model does: ``pesim``, the reference
interpreter and a mapping see an ordinary LAIR program.

Names: each LAIR node is named after its ONNX node (or ``<op>_<k>`` where the node has
no name), each tensor after its ONNX value, made into identifiers (other characters
become ``_``) and unique. Batch normalization after a convolution or Gemm with
constant weights is folded into that layer's weights and bias. Anything else the
import cannot express is an :class:`~dtg.errors.InputError` naming the ONNX node, its
operator and what is supported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dtg.errors import InputError

RESERVED = frozenset({"lair", "let", "all", "in", "PE", "PE_X", "PE_Y", "index", "max"})
DTYPES = {1: "float32", 10: "float16"}  # ONNX TensorProto element types


@dataclass(frozen=True)
class Imported:
    """A model as a LAIR program: its text, the values of its initializers (by LAIR
    name), which program inputs the model's own inputs are, and its outputs."""

    name: str
    lair: str
    initializers: dict[str, np.ndarray]
    model_inputs: tuple[str, ...]
    model_outputs: tuple[str, ...]
    names: dict[str, str]  # ONNX value name -> LAIR tensor name

    def inputs(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every input of the program: the initializers and the model's inputs
        ``feeds`` (by their ONNX names, as ``onnx.reference`` takes them)."""
        by_lair = {self.names.get(k, k): np.asarray(v) for k, v in feeds.items()}
        unknown = sorted(set(by_lair) - set(self.model_inputs))
        if unknown:
            raise InputError(f"unknown model input{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(unknown)}; the model's inputs are "
                             f"{', '.join(self.model_inputs)}")
        return {**self.initializers, **by_lair}


@dataclass
class Value:
    """A tensor of the model: its LAIR name, shape and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def decl(self) -> str:
        return f"{self.dtype} {self.name}" + "".join(f"[{n}]" for n in self.shape)

    def at(self, index: Sequence[str]) -> str:
        """The element at ``index`` (the name alone for a scalar)."""
        return self.name + "".join(f"[{e}]" for e in index)


@dataclass
class Builder:
    """The program being written: values by ONNX name, constants, nodes' text."""

    model_name: str
    values: dict[str, Value] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)  # by ONNX name
    initializers: dict[str, np.ndarray] = field(default_factory=dict)  # by LAIR name
    taken: set[str] = field(default_factory=set)
    nodes: list[str] = field(default_factory=list)
    read: set[str] = field(default_factory=set)  # LAIR tensors some node reads

    def fresh(self, wanted: str) -> str:
        """A LAIR identifier like ``wanted``, unused so far."""
        name = re.sub(r"[^A-Za-z0-9_]", "_", wanted).strip("_") or "t"
        if name[0].isdigit() or name in RESERVED or re.fullmatch(r"[a-z]\d+", name):
            name = f"t_{name}"
        base, k = name, 2
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def value(self, onnx_name: str, where: str) -> Value:
        if onnx_name not in self.values:
            raise InputError(f"{where}: its input '{onnx_name}' has no known static shape "
                             "(an input of the graph, an initializer or a node's output is "
                             "expected)")
        return self.values[onnx_name]

    def new_value(self, onnx_name: str, shape: Sequence[int], dtype: str) -> Value:
        v = Value(self.fresh(onnx_name), tuple(int(n) for n in shape), dtype)
        self.values[onnx_name] = v
        return v

    def constant_input(self, wanted: str, data: np.ndarray, dtype: str) -> Value:
        """A derived constant (folded weights, a pool's divisors) as a program input."""
        v = Value(self.fresh(wanted), tuple(data.shape), dtype)
        self.initializers[v.name] = data.astype(np.float16 if dtype == "float16"
                                                else np.float32)
        return v

    def node(self, name: str, reads: Iterable[Value], writes: Iterable[Value],
             statements: Sequence[str]) -> None:
        """A LAIR node: statements over the tensors it reads and writes."""
        read = list(dict.fromkeys(v.name for v in reads))
        written = list(dict.fromkeys(v.name for v in writes))
        for v in writes:
            if not v.shape:
                raise InputError(f"{name}: its result '{v.name}' is a scalar (rank 0), which "
                                 "LAIR cannot define; keep a dimension of size 1")
        self.read.update(read)
        by_name = {v.name: v for v in (*reads, *writes)}
        ins = ", ".join(by_name[n].decl() for n in read if n not in written)
        outs = ", ".join(by_name[n].decl() for n in written)
        if len(statements) == 1:  # (one statement is named after its node)
            statements = [re.sub(r"^\w+: (?=all )", "", statements[0])]
        body = "\n".join(f"  {s}" for s in statements)
        self.nodes.append(f"lair {name}(): {ins} -> {outs}\n{{\n{body}\n}}")


def iterators(n: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{k}" for k in range(n)]


def statement(label: str | None, loop: Sequence[str], extents: Sequence[int], target: str,
              op: str, value: str) -> str:
    """``label: all (...) in (...) target op value`` (a rank-0 domain gets one point)."""
    if not loop:
        loop, extents = ["u0"], [1]
    head = f"{label}: " if label else ""
    return (f"{head}all ({', '.join(loop)}) in ({', '.join(str(e) for e in extents)}) "
            f"{target} {op} {value}")


def literal(x: float) -> str:
    """A LAIR float literal (negative ones in parentheses)."""
    x = float(x)
    if not np.isfinite(x):
        raise InputError(f"the constant {x} has no LAIR literal")
    text = repr(abs(x))
    if "e" in text:
        text = f"{abs(x):.17e}"
    return f"(-{text})" if x < 0 else text


def import_onnx(model: Any, *, name: str | None = None) -> Imported:
    """The LAIR program of an ONNX model (a ``ModelProto`` or the path of a ``.onnx``
    file); raises :class:`~dtg.errors.InputError` for what it cannot express."""
    import onnx

    from dtg.lair.onnx_ops import OPS, fold_batch_norms

    where = "the model"
    if isinstance(model, str | Path):
        where = str(model)
        try:
            model = onnx.load(str(model))
        except FileNotFoundError:
            raise InputError(f"{where}: no such file") from None
        except Exception as exc:  # (a file that is not an ONNX model)
            raise InputError(f"{where}: not an ONNX model ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:
        raise InputError(f"{where}: ONNX shape inference failed ({str(exc)[:300]})") from None
    graph = inferred.graph
    b = Builder(name or _identifier(graph.name or "model"))
    for init in graph.initializer:
        b.constants[init.name] = onnx.numpy_helper.to_array(init)
    nodes = fold_batch_norms(list(graph.node), b.constants,
                             frozenset(o.name for o in graph.output))
    for node in nodes:  # constants made by Constant nodes (shapes of Reshape)
        if node.op_type == "Constant":
            b.constants[node.output[0]] = _constant_node(node, where)
    known = {vi.name: vi for vi in (*graph.input, *graph.value_info, *graph.output)}
    model_inputs = []
    for vi in graph.input:
        if vi.name in b.constants:
            continue
        v = b.new_value(vi.name, _static_shape(vi, f"{where}: input '{vi.name}'"),
                        _dtype(vi.type.tensor_type.elem_type, f"{where}: input '{vi.name}'"))
        model_inputs.append(v.name)
    used = {i for node in nodes for i in node.input}
    for onnx_name, data in b.constants.items():
        if onnx_name in used and data.dtype.kind == "f":
            v = b.new_value(onnx_name, data.shape, "float16" if data.dtype == np.float16
                            else "float32")
            b.initializers[v.name] = data
    outputs = {o.name for o in graph.output}
    read_later: set[str] = set()
    for node in nodes:
        read_later.update(node.input)
    for k, node in enumerate(nodes):
        if node.op_type == "Constant":
            continue
        label = _identifier(node.name) if node.name else f"{node.op_type.lower()}_{k}"
        node_name = b.fresh(label)
        what = f"{where}: node '{node.name or node_name}' ({node.op_type})"
        op = OPS.get(node.op_type)
        if op is None:
            raise InputError(f"{what}: the operator {node.op_type} is not supported; "
                             f"supported: {', '.join(sorted(OPS))}")
        for out in node.output:
            if out and out not in known and out not in outputs:
                raise InputError(f"{what}: the shape of its output '{out}' is not static "
                                 "(ONNX shape inference found none); export the model with "
                                 "fixed input sizes")
        op(b, node, node_name, what, {o: _static_shape(known[o], f"{what}: output '{o}'")
                                      for o in node.output if o})
    model_outputs = []
    for o in graph.output:
        v = b.value(o.name, f"{where}: output '{o.name}'")
        if o.name in read_later or o.name in b.constants or v.name in model_inputs:
            copy = Value(b.fresh(o.name + "_out"), v.shape, v.dtype)  # (no ONNX value)
            loop = iterators(len(v.shape))
            b.node(b.fresh(f"{copy.name}_copy"), [v], [copy],
                   [statement(None, loop, v.shape, copy.at(loop), "=", v.at(loop))])
            v = copy
        model_outputs.append(v.name)
    names = {onnx_name: v.name for onnx_name, v in b.values.items()}
    header = (f"# Imported from ONNX ({where}) by dtg import: one node per ONNX node;\n"
              f"# the initializers are inputs ({b.model_name}.npz).\n")
    used_inits = {k: v for k, v in b.initializers.items() if k in b.read}  # (not folded)
    return Imported(b.model_name, header + "\n\n".join(b.nodes) + "\n", used_inits,
                    tuple(model_inputs), tuple(model_outputs), names)


def _identifier(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "model"
    return f"m_{name}" if name[0].isdigit() else name


def _dtype(elem_type: int, what: str) -> str:
    if elem_type not in DTYPES:
        import onnx

        kind = onnx.TensorProto.DataType.Name(elem_type) if elem_type else "unknown"
        raise InputError(f"{what}: its element type {kind} is not supported; LAIR tensors "
                         "are float16 or float32")
    return DTYPES[elem_type]


def _static_shape(vi: Any, what: str) -> tuple[int, ...]:
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        raise InputError(f"{what}: its shape is unknown; export the model with static shapes")
    dims = []
    for k, d in enumerate(t.shape.dim):
        if d.HasField("dim_param") or not d.HasField("dim_value"):
            sym = d.dim_param or "?"
            raise InputError(f"{what}: dimension {k} is '{sym}', not a number; dynamic shapes "
                             "are not supported (export with fixed sizes, e.g. batch 1)")
        dims.append(int(d.dim_value))
    return tuple(dims)


def _constant_node(node: Any, where: str) -> np.ndarray:
    import onnx

    for attr in node.attribute:
        if attr.name == "value":
            return onnx.numpy_helper.to_array(attr.t)
        if attr.name in ("value_float", "value_int"):
            return np.asarray(onnx.helper.get_attribute_value(attr))
        if attr.name in ("value_floats", "value_ints"):
            return np.asarray(onnx.helper.get_attribute_value(attr))
    raise InputError(f"{where}: Constant node '{node.name}' has no value this import reads")
