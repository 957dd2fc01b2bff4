"""The fall detector (edge_hf/daemon/events.py's FallDetector) on its injectable clocks."""

from __future__ import annotations

import numpy as np
import pytest

from edge_hf.daemon.events import FallDetector
from tests.conftest import fall_detector


def _fall(d: FallDetector, t0: float, frame: np.ndarray | None = None) -> list[str]:
    """Three high windows from `t0` (0.1 s apart): the event types they cause."""
    return [e.type for i in range(3) for e in d.update(0.9, t0 + 0.1 * i, frame)]


@pytest.mark.parametrize("step_s", [3600.0, -3600.0])
def test_a_wall_clock_step_neither_deafens_a_camera_nor_reverses_an_event(step_s: float) -> None:
    offset = [1_767_225_600.0]  # wall = monotonic + offset; NTP moves the offset
    d = fall_detector(wall=lambda t: t + offset[0])
    events = [e for i in range(3) for e in d.update(0.9, 100 + 0.1 * i)]
    assert [e.type for e in events] == ["start"]
    offset[0] += step_s  # the clock steps while the fall is latched
    end = d.acknowledge(110.0)  # an ack, on the monotonic clock like every timer
    assert [e.type for e in end] == ["end"]
    start, stop = events[0].as_dict(), end[0].as_dict()
    assert stop["ended_at"] >= start["started_at"], "an end is never before its start"
    assert end[0].time - events[0].started_at == pytest.approx(110.0 - 100.1)  # started at k=2
    # The next fall, after the 10 s cooldown by the monotonic clock, raises its event.
    for i in range(20):
        d.update(0.1, 111 + 0.1 * i)
    assert _fall(d, 121.0) == ["start"]
