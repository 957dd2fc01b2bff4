"""A small learned head on pose features: "this tracked person has fallen and is down".

The hand rules of `edge_hf.core.posefall` read "down" from three fixed thresholds (torso angle,
box aspect, hips' drop) and "fall" from how fast the person got there. The head reads the same
geometry of one tracked person at one pose tick, plus how it changed over the last second, and
gives a probability that the person is down after a fall (`FEATURES` says what it sees). It is a
two-layer perceptron small enough to run in NumPy inside the pose rules (`PoseFallRules(head=)`),
in one of two modes (saved in its file):

- `veto`: the hand rules decide as before, and a person they read as down counts only if the
  head's probability is at least its threshold (a low one: it vetoes what looks like daily life);
- `decide`: the head replaces the rules' thresholds and sudden-descent rule; tracking and
  `confirm_s` stay.

Trained on tracked people of labelled clips (`fit`): after a fall's descent until the clip ends is
"fallen", everything else (before the fall, daily activities, a person lying still who did not
fall) is not. Saved as JSON (`save` / `load`) with its feature names, so a file trained on other
features is refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_hf.core.errors import UserError

FEATURES = (
    "torso_deg",  # torso from vertical / 90 (0 when not seen)
    "torso_seen",  # 1 when shoulders and hips were both seen
    "aspect",  # box width / height, at most 3
    "hip_drop",  # hips below their height when last upright, in upright heights (0 unknown)
    "hip_known",  # 1 when the hips and an upright reference are both known
    "height_ratio",  # box height / height when last upright (1 unknown), at most 2
    "since_upright",  # seconds since last upright / 10, at most 1 (1: never seen upright)
    "drop_1s",  # hips' fall over the last second, in upright heights (0 unknown)
    "aspect_1s",  # change of the box aspect over the last second
    "keypoints_seen",  # share of the 17 keypoints above the score threshold
)
HIDDEN = 16
FORMAT = "edge_hf.posehead/1"
MODES = ("veto", "decide")


@dataclass
class PoseHead:
    """Weights of the head: FEATURES -> HIDDEN (ReLU) -> 1 (sigmoid), and its threshold."""

    w1: np.ndarray  # (HIDDEN, len(FEATURES))
    b1: np.ndarray  # (HIDDEN,)
    w2: np.ndarray  # (HIDDEN,)
    b2: float
    threshold: float = 0.5
    trained_on: str = ""
    mode: str = "decide"  # MODES

    def prob(self, x: np.ndarray) -> np.ndarray:
        """P(fallen) of feature rows `x` (N, len(FEATURES)) or one row."""
        h = np.maximum(x @ self.w1.T + self.b1, 0.0)
        z = h @ self.w2 + self.b2
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))

    def save(self, path: Path) -> None:
        path.write_text(
            json.dumps(
                {
                    "format": FORMAT,
                    "features": list(FEATURES),
                    "w1": self.w1.tolist(),
                    "b1": self.b1.tolist(),
                    "w2": self.w2.tolist(),
                    "b2": self.b2,
                    "threshold": self.threshold,
                    "mode": self.mode,
                    "trained_on": self.trained_on,
                },
                indent=1,
            )
        )

    @classmethod
    def load(cls, path: Path, key: str = "person.head") -> PoseHead:
        """The head saved at `path`; a missing, unreadable or other-feature file is a UserError
        naming `key`."""
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"{key}: {path} does not exist") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"{key}: {path} is not a pose head file ({exc})") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise UserError(f"{key}: {path} is not a pose head file (format {FORMAT} expected)")
        if d.get("features") != list(FEATURES):
            raise UserError(
                f"{key}: {path} was trained on features {d.get('features')}; this version reads "
                f"{list(FEATURES)}: train it again (experiments/pose_head.py)"
            )
        mode = d.get("mode", "decide")
        if mode not in MODES:
            raise UserError(f"{key}: {path} has mode {mode!r}; expected one of {', '.join(MODES)}")
        try:
            head = cls(
                np.asarray(d["w1"], np.float64),
                np.asarray(d["b1"], np.float64),
                np.asarray(d["w2"], np.float64),
                float(d["b2"]),
                float(d["threshold"]),
                str(d.get("trained_on", "")),
                mode,
            )
            head.prob(np.zeros(len(FEATURES)))  # the shapes fit together
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{key}: {path} is not a pose head file ({exc!r})") from None
        return head


def fit(
    x: np.ndarray, y: np.ndarray, seed: int = 0, epochs: int = 400, weight_decay: float = 1e-3
) -> PoseHead:
    """A head fitted to feature rows `x` and labels `y` (1 fallen, 0 not): full-batch Adam on
    binary cross-entropy, the two classes weighted equally (fallen rows are few)."""
    import torch

    if len(x) == 0 or y.min() == y.max():
        raise ValueError("fit needs rows of both classes")
    g = torch.Generator().manual_seed(seed)
    xt, yt = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
    n_in = x.shape[1]
    w1 = torch.nn.Parameter(torch.randn(HIDDEN, n_in, generator=g) * math.sqrt(2.0 / n_in))
    b1 = torch.nn.Parameter(torch.zeros(HIDDEN))
    w2 = torch.nn.Parameter(torch.randn(HIDDEN, generator=g) * math.sqrt(1.0 / HIDDEN))
    b2 = torch.nn.Parameter(torch.zeros(()))
    pos = float(yt.mean())
    weights = torch.where(yt > 0.5, 0.5 / pos, 0.5 / (1.0 - pos))
    opt = torch.optim.Adam([w1, b1, w2, b2], lr=0.01, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad()
        z = torch.relu(xt @ w1.T + b1) @ w2 + b2
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z, yt, weight=weights)
        loss.backward()
        opt.step()
    return PoseHead(
        w1.detach().double().numpy(),
        b1.detach().double().numpy(),
        w2.detach().double().numpy(),
        float(b2.detach()),
    )
