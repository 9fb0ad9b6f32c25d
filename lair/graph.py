"""The checked LAIR program: a graph of statements over fully specialized tensors.

This is what the rest of the compiler consumes. Indices are affine forms over the
statement's iterators, every tensor has a concrete type, shape and role, and the
statements are in an order that respects their data dependences.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dtg.errors import LairSemanticError, SourceLoc
from dtg.lair.ast import NOWHERE

DTYPES: dict[str, type[np.floating[Any]]] = {"float16": np.float16, "float32": np.float32}
OPS = ("=", "+=", "max=")
Role = Literal["input", "output", "internal"]


@dataclass(frozen=True)
class AffineExpr:
    """``sum(coeff * iterator) + constant``; terms sorted by name, no zero coefficients."""

    terms: tuple[tuple[str, int], ...]
    constant: int = 0

    @staticmethod
    def make(coeffs: Mapping[str, int], constant: int = 0) -> AffineExpr:
        return AffineExpr(tuple(sorted((k, v) for k, v in coeffs.items() if v != 0)), constant)

    def coeff(self, name: str) -> int:
        return dict(self.terms).get(name, 0)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Value at a point; ``env`` may map iterators to numpy arrays (vectorized)."""
        total: Any = self.constant
        for name, coeff in self.terms:
            total = total + coeff * env[name]
        return total

    def __str__(self) -> str:
        parts: list[str] = []
        for name, coeff in self.terms:
            sign = "-" if coeff < 0 else "+"
            mag = abs(coeff)
            parts.append(f"{sign} {name if mag == 1 else f'{mag}*{name}'}")
        if self.constant or not parts:
            parts.append(f"{'-' if self.constant < 0 else '+'} {abs(self.constant)}")
        text = " ".join(parts)
        return text[2:] if text.startswith("+ ") else "-" + text[2:]


@dataclass(frozen=True)
class TensorAccess:
    tensor: str
    index: tuple[AffineExpr, ...]
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)
    source: str = field(default="", compare=False, repr=False)  # as written, for messages

    def __str__(self) -> str:
        return self.source or self.tensor + "".join(f"[{i}]" for i in self.index)


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class Read:
    """A read of a tensor through the statement's single access to it (paper §4.1.1)."""

    tensor: str


@dataclass(frozen=True)
class Unary:
    op: Literal["neg"]
    operand: Value


@dataclass(frozen=True)
class Binary:
    op: Literal["+", "-", "*", "max"]
    lhs: Value
    rhs: Value


Value = Const | Read | Unary | Binary


def value_reads(value: Value) -> Iterator[str]:
    """Tensors read by a value expression, in order of appearance (with repeats)."""
    match value:
        case Read(tensor):
            yield tensor
        case Unary(_, operand):
            yield from value_reads(operand)
        case Binary(_, lhs, rhs):
            yield from value_reads(lhs)
            yield from value_reads(rhs)


def vanishes_with(value: Value, tensor: str) -> bool:
    """Whether ``value`` is 0 whenever the element read from ``tensor`` is 0, whatever the
    other (finite) operands: then an instance may be skipped for an element a sparse
    stream does not send."""
    match value:
        case Read(name):
            return name == tensor
        case Const(v):
            return v == 0
        case Unary(_, operand):
            return vanishes_with(operand, tensor)
        case Binary("*", lhs, rhs):
            return vanishes_with(lhs, tensor) or vanishes_with(rhs, tensor)
        case Binary(_, lhs, rhs):
            return vanishes_with(lhs, tensor) and vanishes_with(rhs, tensor)
    raise TypeError(value)


def format_value(value: Value, stmt: Stmt) -> str:
    match value:
        case Const(v):
            return repr(int(v)) if float(v).is_integer() else repr(v)
        case Read(tensor):
            return str(stmt.access(tensor))
        case Unary(_, operand):
            return f"-({format_value(operand, stmt)})"
        case Binary("max", lhs, rhs):
            return f"max({format_value(lhs, stmt)}, {format_value(rhs, stmt)})"
        case Binary(op, lhs, rhs):
            return f"({format_value(lhs, stmt)} {op} {format_value(rhs, stmt)})"
    raise TypeError(value)


@dataclass(frozen=True)
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    role: Role
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)

    @property
    def numpy_dtype(self) -> type[np.floating[Any]]:
        return DTYPES[self.dtype]

    @property
    def bytes_per_element(self) -> int:
        return int(np.dtype(self.numpy_dtype).itemsize)


@dataclass(frozen=True)
class Stmt:
    """One ``all`` statement: instances are the integer box ``0 <= it < extent``."""

    name: str
    node: str
    iterators: tuple[str, ...]
    extents: tuple[int, ...]
    op: Literal["=", "+=", "max="]
    target: TensorAccess
    reads: tuple[TensorAccess, ...]
    value: Value
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)

    def access(self, tensor: str) -> TensorAccess:
        if tensor == self.target.tensor:
            return self.target
        for read in self.reads:
            if read.tensor == tensor:
                return read
        raise KeyError(f"statement {self.name} does not access {tensor}")

    @property
    def is_reduction(self) -> bool:
        return self.op != "="

    def __str__(self) -> str:
        its = ", ".join(self.iterators)
        ext = ", ".join(map(str, self.extents))
        return (f"{self.name}: all ({its}) in ({ext}) "
                f"{self.target} {self.op} {format_value(self.value, self)}")


@dataclass(frozen=True)
class Graph:
    """A specialized, checked LAIR program; statements in dependence order."""

    tensors: tuple[Tensor, ...]
    statements: tuple[Stmt, ...]
    file: str = field(default="<string>", compare=False)

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def statement(self, name: str) -> Stmt:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.role == "input")

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.role == "output")

    def definer(self, tensor: str) -> Stmt | None:
        for s in self.statements:
            if s.target.tensor == tensor:
                return s
        return None

    def verify(self) -> None:
        """Check the invariants the front end guarantees (for graphs built in code)."""
        names = [t.name for t in self.tensors]
        if len(set(names)) != len(names):
            raise LairSemanticError("tensor names are not unique")
        snames = [s.name for s in self.statements]
        if len(set(snames)) != len(snames):
            raise LairSemanticError("statement names are not unique")
        defined: set[str] = set()
        for stmt in self.statements:
            if len(stmt.iterators) != len(stmt.extents) or min(stmt.extents, default=1) < 1:
                raise LairSemanticError(f"statement {stmt.name} has a malformed domain", stmt.loc)
            for acc in (stmt.target, *stmt.reads):
                tensor = self.tensor(acc.tensor)
                if len(acc.index) != len(tensor.shape):
                    raise LairSemanticError(f"rank mismatch in {stmt.name} for {acc}", acc.loc)
                for aff in acc.index:
                    if any(n not in stmt.iterators for n, _ in aff.terms):
                        raise LairSemanticError(f"unknown iterator in {acc}", acc.loc)
            for read in stmt.reads:
                if self.tensor(read.tensor).role != "input" and read.tensor not in defined:
                    raise LairSemanticError(
                        f"{stmt.name} reads {read.tensor} before it is defined", stmt.loc)
            if stmt.target.tensor in defined:
                raise LairSemanticError(f"{stmt.target.tensor} is defined twice", stmt.loc)
            defined.add(stmt.target.tensor)
            if self.tensor(stmt.target.tensor).role == "input":
                raise LairSemanticError(f"{stmt.name} defines input {stmt.target.tensor}")
        for tensor in self.tensors:
            if tensor.role != "input" and tensor.name not in defined:
                raise LairSemanticError(f"{tensor.name} is never defined", tensor.loc)

    def __str__(self) -> str:
        lines = [f"tensor {t.role} {t.dtype} {t.name}{list(t.shape)}" for t in self.tensors]
        lines += [str(s) for s in self.statements]
        return "\n".join(lines)
