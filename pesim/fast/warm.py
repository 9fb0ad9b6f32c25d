"""Compiling the compiled engine in the background: a first run after install starts a
process that compiles it (into the cache) while this one reads the module, makes the
inputs and sets the run up, and waits for it only when the engine is needed. On a
machine with two cores that hides most of the compile.

``python -m dtg.pesim.fast.warm`` compiles by running a 2 x 2 GEMV on the engine.
"""

from __future__ import annotations

import atexit
import subprocess
import sys

_started: subprocess.Popen[bytes] | None = None

SMALL = """\
module warm
mesh PE[1, 1]
input x dense color 0 { x[j = 0:1] -> [PE[0, -1] -> index[j]] }
output y dense color 1 { y[i = 0:1] -> [PE[1, i//2] -> index[i mod 2]] }
program p origin PE[0, 0] pes { PE[x, y] : x = 0 and y = 0 }
{
  array float16 w[2][2] load W;
  array float16 acc[2];
  int n = 0;
  route 0: N -> RAMP;
  route 1: RAMP -> E;
  simd mac [2]: acc[i0] += w[2*i0] * scalar;
  simd out [2]: out(1) = acc[i0];
  task on_x data color 0 {
    run mac {acc: 0, w: n} (value);
    n += 1;
  }
  task x_done control color 0 {
    run out {acc: 0};
  }
}
"""


def start() -> None:
    """Start compiling in another process (once; nothing when already compiled)."""
    global _started
    from dtg.pesim.fast.jit import is_cached

    if _started is not None or is_cached():
        return
    try:
        _started = subprocess.Popen([sys.executable, "-m", "dtg.pesim.fast.warm"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return  # (no second process: the engine compiles here when it first runs)
    atexit.register(_stop)


def _stop() -> None:
    """At exit, a compile nobody waited for (the run ended before it needed the engine)
    is stopped: no process outlives the command."""
    if _started is not None and _started.poll() is None:
        _started.kill()
        _started.wait()


def wait() -> None:
    """Wait for a compile started by :func:`start` (this process then loads the cache;
    had it failed, the first call compiles here)."""
    global _started
    if _started is not None:
        _started.wait()
        _started = None


def compile_engine() -> None:
    import numpy as np

    from dtg.pe.parser import parse_module_text
    from dtg.pesim.fast.engine import simulate
    from dtg.pesim.sim import TensorInfo

    module, _ = parse_module_text(SMALL, "<warm>")
    inputs = {"x": np.ones(2, dtype=np.float16), "W": np.ones((2, 2), dtype=np.float16)}
    simulate(module, inputs, {"y": TensorInfo((2,), "float16")})


if __name__ == "__main__":
    compile_engine()
