"""A per-camera ring of preallocated frame slots: one writer that never waits, readers that copy.

The capture thread writes each sampled frame into the next slot and publishes a sequence number;
it never takes a lock and never waits for the consumer. A reader copies the last T slots and then
checks that the writer did not lap them meanwhile (a seqlock); if it did, it retries. Frames the
writer overwrote before any reader saw them are counted as dropped.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Window:
    """The last T samples of a camera, oldest first, copied out of the ring."""

    frames: list[np.ndarray]  # T arrays (H, W, 3) uint8 RGB
    times: list[float]  # sample time of each frame: its tick (monotonic or media seconds)
    seq: int  # sequence number of the newest sample
    arrivals: list[float]  # when each frame arrived (same clock; = times for files)
    # The centre frame at the camera's resolution (BGR), when the ring keeps evidence (snapshots
    # on) and still had it; the frames above are the model's input.
    evidence: np.ndarray | None = None


class FrameRing:
    """`capacity` preallocated (H, W, 3) uint8 slots with their sample times."""

    def __init__(
        self,
        capacity: int,
        shape: tuple[int, int, int],
        notify: threading.Event | None = None,
        evidence_slots: int = 0,
    ) -> None:
        if capacity < 2:
            raise ValueError("a ring needs at least 2 slots")
        self.capacity = capacity
        self._slots = np.zeros((capacity, *shape), dtype=np.uint8)
        self._times = np.zeros(capacity, dtype=np.float64)
        self._arrivals = np.zeros(capacity, dtype=np.float64)
        self._seq = 0  # number of frames written; the newest is at (seq - 1) % capacity
        self._read_seq = 0  # newest sequence number any reader has taken
        self.dropped = 0  # frames overwritten before a reader saw them
        self._notify = notify  # set after every write: wakes the consumer, never waits for it
        # The camera-resolution frames of the newest `evidence_slots` samples (T + 2 is enough
        # for a window's centre), as (seq, frame); none kept when 0 (snapshots off).
        self._evidence: list[tuple[int, np.ndarray] | None] = [None] * evidence_slots

    @property
    def seq(self) -> int:
        return self._seq

    @property
    def last_time(self) -> float | None:
        """The newest sample's time (None before the first write)."""
        return None if self._seq == 0 else float(self._times[(self._seq - 1) % self.capacity])

    @property
    def keeps_evidence(self) -> bool:
        return bool(self._evidence)

    def write(
        self,
        frame: np.ndarray,
        t: float,
        arrival: float | None = None,
        evidence: np.ndarray | None = None,
    ) -> None:
        """Store a frame sampled for tick `t` that arrived at `arrival` (default `t`), copied into
        the next slot, with its camera-resolution original (`evidence`, kept by reference) when
        the ring keeps evidence. Never blocks on readers."""
        i = self._seq % self.capacity
        np.copyto(self._slots[i], frame)
        if self._evidence and evidence is not None:
            self._evidence[self._seq % len(self._evidence)] = (self._seq, evidence)
        self._times[i] = t
        self._arrivals[i] = t if arrival is None else arrival
        unread = self._seq - self._read_seq
        if unread >= self.capacity:
            self.dropped += 1
        self._seq += 1  # publish after the copy: readers never see a half-written newest slot
        if self._notify is not None:
            self._notify.set()

    def window(self, t: int) -> Window | None:
        """Copy of the newest `t` samples, oldest first; before `t` samples exist the oldest is
        repeated (the same clamp rule as `frame_indices` at a clip's start). None if empty."""
        if t > self.capacity - 1:
            raise ValueError(f"window of {t} needs a ring of more than {t} slots")
        for _ in range(100):
            seq = self._seq
            if seq == 0:
                return None
            seqs = [max(s, 0) for s in range(seq - t, seq)]
            idx = [s % self.capacity for s in seqs]
            frames = [self._slots[i].copy() for i in idx]
            times = [float(self._times[i]) for i in idx]
            arrivals = [float(self._arrivals[i]) for i in idx]
            evidence = self._evidence_of(seqs[len(seqs) // 2])
            # The copies are valid unless the writer came round to the oldest of them meanwhile.
            if self._seq - seqs[0] < self.capacity:
                self._read_seq = max(self._read_seq, seq)
                return Window(frames, times, seq - 1, arrivals, evidence)
        raise RuntimeError("ring writer keeps lapping the reader; make the ring larger")

    def frames_between(self, t0: float, t1: float) -> list[tuple[float, np.ndarray]]:
        """Copies of the samples from time `t0` to `t1` still held, oldest first, for a reader
        beside the pipeline (an event clip): the pipeline's read position and drop count are
        not touched."""
        for _ in range(100):
            seq = self._seq
            held = range(max(0, seq - self.capacity + 1), seq)
            seqs = [s for s in held if t0 - 1e-6 <= self._times[s % self.capacity] <= t1 + 1e-6]
            got = [(float(self._times[s % self.capacity]), self._slots[s % self.capacity].copy())
                   for s in seqs]  # fmt: skip
            if not seqs or self._seq - seqs[0] < self.capacity:  # (not lapped meanwhile)
                return got
        raise RuntimeError("ring writer keeps lapping the reader; make the ring larger")

    def _evidence_of(self, seq: int) -> np.ndarray | None:
        """The camera-resolution frame of sample `seq`, if still kept."""
        if not self._evidence:
            return None
        kept = self._evidence[seq % len(self._evidence)]
        return kept[1] if kept is not None and kept[0] == seq else None
