"""Source locations and the exception hierarchy shared by every stage of dtg.

Every error a user can cause is a :class:`DtgError`; the command-line drivers print
``error.format()`` and exit with status 1, so no user mistake ends in a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SourceLoc:
    """A position in an input file (1-based line and column)."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class DtgError(Exception):
    """Root of all errors reported to users: a message and, when known, a position."""

    kind = "error"
    status = 1  # the exit status of a driver that stops with this error

    def __init__(self, message: str, loc: SourceLoc | None = None, *, notes: tuple[str, ...] = ()):
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.notes = notes

    def format(self) -> str:
        where = f"{self.loc}: " if self.loc is not None else ""
        lines = [f"{where}{self.kind}: {self.message}"]
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class Interrupted(DtgError):
    """The user stopped the run (Ctrl-C); what was measured so far has been reported."""

    kind = "interrupted"
    status = 130  # as shells report a command ended by SIGINT


class InputError(DtgError):
    """A file that cannot be read at all (missing, unreadable, not UTF-8 text)."""


class LimitError(DtgError):
    """An input beyond dtg's resource budget (:mod:`lair.limits`, ``docs/limits.md``)."""


class LairSyntaxError(DtgError):
    """LAIR text that does not follow the grammar."""

    kind = "syntax error"


class LairSemanticError(DtgError):
    """A well-formed LAIR program that breaks a rule of the language."""


class SpecializationError(DtgError):
    """A size or type parameter that is missing, unknown or malformed."""


class MappingError(DtgError):
    """A mapping spec that is malformed or inconsistent with the program."""


class UnsupportedMappingError(MappingError):
    """A valid mapping whose data flow the compiler cannot realize (yet).

    ``subject`` names the tensor or statement concerned, so the driver can point at its
    entry in the mapping file."""

    def __init__(self, message: str, loc: SourceLoc | None = None, *,
                 notes: tuple[str, ...] = (), subject: str | None = None):
        super().__init__(message, loc, notes=notes)
        self.subject = subject


class CodegenError(DtgError):
    """A failure while building tasks, memory or code for a valid input."""


class SimulationError(DtgError):
    """A PE program that cannot be simulated, or a run that went wrong."""


class CompilerBug(Exception):
    """A check of the compiler's own work failed: a bug of dtg, not of the input. Not a
    :class:`DtgError`, so the drivers report it as an internal error (status 2)."""
