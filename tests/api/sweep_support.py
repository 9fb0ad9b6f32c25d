"""A point runner whose worker dies on one point (for tests/api/test_sweep.py): imported
by the Dask workers, so it lives in a module of its own."""

from __future__ import annotations

import os

from dtg.sweep import Point, Row, run_point


def dies_on_the_second(point: Point) -> Row:
    if point.index == 1:
        os._exit(3)
    return run_point(point)


def never_ends(point: Point) -> Row:
    """A point that runs until it is killed (a simulation longer than any budget)."""
    import time

    while True:
        time.sleep(1)
