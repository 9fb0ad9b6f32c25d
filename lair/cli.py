"""What the command-line drivers share: argument errors as DtgErrors, and one exit path.

Every user error ends as ``file:line:col: error: ...`` on stderr with status 1; a bug of
ours says so in one line with status 2; Ctrl-C ends with status 130; none prints a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

from dtg.errors import DtgError, Interrupted


class UsageError(DtgError):
    """Bad command-line arguments."""


class _Shown(Exception):
    """``--version`` printed what was asked: stop with status 0 (not SystemExit, so that
    ``main(argv)`` returns in tests)."""


def dtg_version() -> str:
    try:
        return version("dtg")
    except PackageNotFoundError:  # pragma: no cover (a tree that is not installed)
        return "0+unknown"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version of dtg and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"{parser.prog} (dtg) {dtg_version()}")
        raise _Shown


REPORT_SCHEMA_VERSION = 2
"""Of the JSON reports of ``dtg-codegen`` and ``pesim``: 2 added this header (1 had none)."""


def report_header(tool: str, **fields: Any) -> dict[str, Any]:
    """What every report starts with: its schema, the tool and dtg's version, and how
    the run was asked for (parameters, seed, fabric preset, mapping path, ...)."""
    return {"schema_version": REPORT_SCHEMA_VERSION, "tool": tool,
            "dtg_version": dtg_version(), **fields}


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are :class:`UsageError` (status 1), not ``SystemExit(2)``,
    with ``--version``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--version", action=_VersionAction)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def _tolerant_streams() -> None:
    """Let standard output and error print any text: a file name that is not valid in
    the locale's encoding (a non-UTF-8 byte, a C locale) shows as an escape instead of
    ending the run in a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def _stdout_closed() -> None:
    """The reader of standard output went away (``dtg-codegen -o - | head``): send what
    is still buffered nowhere, so that the interpreter's final flush fails no more."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def run_guarded(body: Callable[[], None]) -> int:
    """Run a driver's work; report errors as described above and return the exit status."""
    _tolerant_streams()
    try:
        body()
        sys.stdout.flush()  # (a closed pipe shows here, not at the interpreter's exit)
    except _Shown:
        return 0
    except BrokenPipeError:
        _stdout_closed()
        print("error: standard output was closed before everything was written to it "
              "(a pipe whose reader ended)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(Interrupted("stopped by Ctrl-C").format(), file=sys.stderr)
        return Interrupted.status
    except DtgError as err:
        print(err.format(), file=sys.stderr)
        return err.status
    except OSError as exc:
        if exc.filename is not None:  # the system refused a path the user gave (too long, ...)
            print(f"error: cannot use {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        return _internal(exc)
    except Exception as exc:
        return _internal(exc)
    return 0


def _internal(exc: Exception) -> int:
    """A bug of ours, not of the input: say so, without a traceback."""
    print(f"internal error: {type(exc).__name__}: {exc}\n  note: this is a bug in dtg; "
          "please report it with the input that caused it", file=sys.stderr)
    return 2
