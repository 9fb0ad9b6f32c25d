"""The LAIR syntax tree: frozen dataclasses that carry their source positions.

Positions do not take part in equality, so a tree printed and parsed again compares
equal to the original. Changes are made with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dtg.errors import SourceLoc

NOWHERE = SourceLoc("<generated>", 0, 0)


@dataclass(frozen=True)
class IntLit:
    value: int
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class FloatLit:
    value: float
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Name:
    """A bare identifier: an iterator, a size parameter or a rank-0 tensor."""

    name: str
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Access:
    """A subscripted tensor, ``x[w + rw]``."""

    tensor: str
    indices: tuple[Expr, ...]
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * / // %
    lhs: Expr
    rhs: Expr
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Neg:
    operand: Expr
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Call:
    func: str
    args: tuple[Expr, ...]
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


Expr = IntLit | FloatLit | Name | Access | BinOp | Neg | Call


@dataclass(frozen=True)
class Ident:
    """A declared name (iterator, size parameter) with the place it was declared."""

    name: str
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class TensorDecl:
    dtype: str
    name: str
    shape: tuple[Expr, ...]
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class TypeParam:
    name: str
    default: str | None
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Statement:
    """``all (iterators) in (extents) target op value``; op is ``=``, ``+=`` or ``max=``."""

    label: str | None
    iterators: tuple[Ident, ...]
    extents: tuple[Expr, ...]
    target: Access
    op: str
    value: Expr
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Node:
    name: str
    type_params: tuple[TypeParam, ...]
    size_params: tuple[Ident, ...]
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    body: tuple[Statement, ...]
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Let:
    """A file-level binding of a size (integer expression) or type parameter."""

    name: str
    value: Expr
    loc: SourceLoc = field(default=NOWHERE, compare=False, repr=False)


@dataclass(frozen=True)
class Module:
    """One LAIR file: its bindings and nodes in source order."""

    lets: tuple[Let, ...]
    nodes: tuple[Node, ...]
    file: str = field(default="<string>", compare=False)
