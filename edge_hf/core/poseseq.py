"""The pose-sequence model: a tracked person's last seconds of poses -> P(falling), P(down), P(up).

A small network (`edge_hf.training.poseseq` trains it on generated 3D motion seen through random
cameras plus real MoveNet tracks) reads one track's window (`edge_hf.core.posewindow`) and says:

- `falling`: the person fell within the window (a descent under gravity, from upright) and is on
  the floor now;
- `down`: the person is on the floor now (fallen or on purpose);
- `up`: the person is upright now.

It sees poses only, never pixels: no room, light or clothing; it was trained on every camera
angle, including a camera the person falls towards, where a lying body looks short and upright
and the pose rules' geometry never reads "down".

The ONNX file carries its contract in its metadata (`SeqContract`): pose rate, window length,
normalisation, keypoint order and the pose model whose poses it reads; the daemon refuses a
config that contradicts it (`edge-hf check`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.contract import read_metadata
from edge_hf.core.errors import UserError
from edge_hf.core.pose import KEYPOINTS
from edge_hf.core.posewindow import FEATURES_PER_TICK, NORMALISATION, WindowSpec
from edge_hf.core.runtime import CPU, Providers, open_session

FORMAT = "edge_hf.poseseq/1"
OUTPUTS = ("falling", "down", "up")


@dataclass(frozen=True)
class SeqContract:
    """What a pose-sequence model reads: windows of `ticks` pose ticks at `rate_hz` of
    `pose_model`'s keypoints (`keypoints` order; `pose_model_sha256` the file's), normalised by
    `normalisation`; `threshold` on P(falling) is the fall it was measured at; `design` and
    `trained_on` are for people."""

    rate_hz: float
    ticks: int
    pose_model: str
    pose_model_sha256: str = ""  # of the pose model file its real tracks came from
    threshold: float = 0.5
    normalisation: str = NORMALISATION
    keypoints: str = ",".join(KEYPOINTS)
    outputs: str = ",".join(OUTPUTS)
    design: str = ""
    trained_on: str = ""

    @property
    def spec(self) -> WindowSpec:
        return WindowSpec(self.rate_hz, self.ticks)

    def metadata(self) -> dict[str, str]:
        """The contract as ONNX metadata (strings)."""
        return {"format": FORMAT, **{f"poseseq.{k}": str(v) for k, v in asdict(self).items()}}

    @classmethod
    def of(cls, meta: dict[str, str], where: str) -> SeqContract:
        """The contract in a model's metadata; a UserError naming `where` if it has none."""
        if meta.get("format") != FORMAT:
            raise UserError(
                f"{where} is not a pose-sequence model (its metadata format is "
                f"{meta.get('format')!r}, not {FORMAT!r}); make one with "
                "experiments/pose_seq.py or leave person.sequence unset"
            )
        values: dict[str, Any] = {}
        for f in fields(cls):
            text = meta.get(f"poseseq.{f.name}")
            if text is None:
                continue
            try:
                values[f.name] = {"float": float, "int": int}.get(str(f.type), str)(text)
            except ValueError:
                raise UserError(
                    f"{where}: metadata poseseq.{f.name} = {text!r} is not a number"
                ) from None
        missing = [n for n in ("rate_hz", "ticks", "pose_model") if n not in values]
        if missing:
            raise UserError(f"{where}: its metadata lacks poseseq.{', poseseq.'.join(missing)}")
        contract = cls(**values)
        if contract.normalisation != NORMALISATION or contract.keypoints != ",".join(KEYPOINTS):
            raise UserError(
                f"{where} reads windows normalised as {contract.normalisation!r} with keypoints "
                f"{contract.keypoints!r}; this version makes {NORMALISATION!r} windows of "
                "COCO-17 keypoints: train it again with experiments/pose_seq.py"
            )
        if contract.outputs != ",".join(OUTPUTS):
            raise UserError(f"{where} gives {contract.outputs!r}, not {','.join(OUTPUTS)!r}")
        return contract


class PoseSequenceModel:
    """One ONNX Runtime session of a pose-sequence model and its contract."""

    def __init__(
        self, path: Path, providers: Providers = (CPU,), key: str = "person.sequence"
    ) -> None:
        self.path = path
        self.session = open_session(path, providers, threads=1, key=key)
        self.contract = SeqContract.of(read_metadata(path), f"{key}: {path}")
        self._input = self.session.get_inputs()[0].name

    @property
    def spec(self) -> WindowSpec:
        return self.contract.spec

    def probs(self, windows: np.ndarray) -> np.ndarray:
        """(B, 3) P(falling), P(down), P(up) of (B, ticks, FEATURES_PER_TICK) windows."""
        w = np.ascontiguousarray(windows, np.float32)
        if w.ndim != 3 or w.shape[1:] != (self.contract.ticks, FEATURES_PER_TICK):
            raise ValueError(f"windows of shape {w.shape}, not (B, {self.contract.ticks}, "
                             f"{FEATURES_PER_TICK})")  # fmt: skip
        if not len(w):
            return np.zeros((0, len(OUTPUTS)), np.float32)
        return np.asarray(self.session.run(None, {self._input: w})[0], np.float32)
