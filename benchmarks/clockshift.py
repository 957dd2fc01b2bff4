"""Run `edge-hf` with its wall clock stepped: `python benchmarks/clockshift.py OFFSET_FILE ARGS`.

The seconds in OFFSET_FILE (re-read at most once a second) are added to `time.time()` and
`time.time_ns()`, the wall clock every timestamp of the daemon comes from; the monotonic clock
its timers run on is left alone, as an NTP step leaves it. (`make soak-faults` steps it; libfaketime
was tried first, but its clock_nanosleep breaks Python's `time.sleep` when the monotonic clock is
not faked too.)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

_real_time, _real_time_ns = time.time, time.time_ns
_file = Path(sys.argv[1])
_cached = (float("-inf"), 0.0)  # (when read, offset)


def _offset() -> float:
    global _cached
    now = time.monotonic()
    if now - _cached[0] >= 1.0:
        try:
            _cached = (now, float(_file.read_text().strip() or 0))
        except (OSError, ValueError):
            _cached = (now, _cached[1])
    return _cached[1]


time.time = lambda: _real_time() + _offset()
time.time_ns = lambda: _real_time_ns() + int(_offset() * 1e9)

if __name__ == "__main__":
    from edge_hf.cli import main

    sys.exit(main(sys.argv[2:]))
