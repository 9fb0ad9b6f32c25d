"""What the command-line drivers share: argument errors as DtgErrors, and one exit path.

Every user error ends as ``file:line:col: error: ...`` on stderr with status 1; a bug of
ours says so in one line with status 2; Ctrl-C ends with status 130; none prints a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn

from dtg.lair.diagnostics import DtgError, Interrupted


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


def run_guarded(body: Callable[[], None]) -> int:
    """Run a driver's work; report errors as described above and return the exit status."""
    try:
        body()
    except _Shown:
        return 0
    except KeyboardInterrupt:
        print(Interrupted("stopped by Ctrl-C").format(),
              file=sys.stderr)
        return Interrupted.status
    except DtgError as err:
        print(err.format(), file=sys.stderr)
        return err.status
    except Exception as exc:  # a bug of ours, not of the input: say so, without a traceback
        print(f"internal error: {type(exc).__name__}: {exc}\n  note: this is a bug in dtg; "
              "please report it with the input that caused it", file=sys.stderr)
        return 2
    return 0
