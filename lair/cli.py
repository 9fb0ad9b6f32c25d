"""What the command-line drivers share: argument errors as DtgErrors, and one exit path.

Every user error ends as ``file:line:col: error: ...`` on stderr with status 1; a bug of
ours says so in one line with status 2; Ctrl-C ends with status 130; none prints a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from lair.diagnostics import DtgError, Interrupted


class UsageError(DtgError):
    """Bad command-line arguments."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are :class:`UsageError` (status 1), not ``SystemExit(2)``."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def run_guarded(body: Callable[[], None]) -> int:
    """Run a driver's work; report errors as described above and return the exit status."""
    try:
        body()
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
