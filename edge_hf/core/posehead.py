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
features is refused, and with its contract (`HeadContract`: the pose model, pose rate, input side
and rule settings it was fitted with), which the daemon holds its config to. `load` refuses
values that would silently veto or decide every fall: weights that are not finite numbers, a
threshold outside [0, 1].
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.errors import UserError
from edge_hf.core.files import read_small_file

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
MAX_FILE_BYTES = 1_000_000  # a head is a few kB of JSON
MAX_WEIGHT = 1e6  # a fitted head's are about 1 to 10; far larger ones overflow to NaN


@dataclass(frozen=True)
class HeadContract:
    """What a head was fitted with: its features come from this pose model at this rate and
    input side, tracked and read by the pose rules with these settings (`PoseRuleSettings`)."""

    pose_model: str  # the pose model file's name
    pose_model_sha256: str
    rate_hz: float
    side: int
    rules: dict[str, float]
    # the second look's settings (`edge_hf.core.secondlook.LookSettings`) the poses came
    # through; None: the pose model alone (every head fitted before the second look)
    look: dict[str, float] | None = None

    @classmethod
    def of(
        cls, pose_model: Path, rate_hz: float, side: int, rules: Any, look: Any = None
    ) -> HeadContract:
        """The contract of a head fitted on `pose_model`'s poses (`rules`: a PoseRuleSettings;
        `look`: the LookSettings of a second look, or None)."""
        return cls(
            pose_model.name, file_sha256(pose_model), rate_hz, side, asdict(rules),
            None if look is None else asdict(look),
        )  # fmt: skip


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    contract: HeadContract | None = None  # None: a file saved before heads carried one

    def prob(self, x: np.ndarray) -> np.ndarray:
        """P(fallen) of feature rows `x` (N, len(FEATURES)) or one row."""
        h = np.maximum(x @ self.w1.T + self.b1, 0.0)
        z = h @ self.w2 + self.b2
        return 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))

    def contract_look(self) -> dict[str, float] | None:
        """The second look's settings its poses came through (None: none, or no contract)."""
        return self.contract.look if self.contract is not None else None

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
                    **({"contract": asdict(self.contract)} if self.contract else {}),
                },
                indent=1,
            )
        )

    @classmethod
    def load(cls, path: Path, key: str = "person.head") -> PoseHead:
        """The head saved at `path`; a missing, unreadable, other-feature or hostile file (values
        that are not finite numbers, a threshold outside [0, 1]) is a UserError naming `key`."""
        where = f"{key}: {path}"
        try:
            d = json.loads(read_small_file(path, MAX_FILE_BYTES, where, "a pose head file"))
        except FileNotFoundError:
            raise UserError(f"{key}: {path} does not exist") from None
        except RecursionError:
            raise UserError(f"{where} is not a pose head file (nested too deep)") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"{where} is not a pose head file ({exc})") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise UserError(f"{where} is not a pose head file (format {FORMAT} expected)")
        if d.get("features") != list(FEATURES):
            raise UserError(
                f"{where} was trained on features {d.get('features')}; this version reads "
                f"{list(FEATURES)}: train it again (experiments/pose_head.py)"
            )
        mode = d.get("mode", "decide")
        if mode not in MODES:
            raise UserError(f"{where} has mode {mode!r}; expected one of {', '.join(MODES)}")
        missing = [k for k in ("w1", "b1", "w2", "b2", "threshold") if k not in d]
        if missing:
            raise UserError(f"{where} is not a pose head file (no {', '.join(missing)})")
        w1 = _numbers(d["w1"], where, "w1", 2)
        n_hidden = w1.shape[0]
        if w1.shape[1:] != (len(FEATURES),) or n_hidden == 0:
            raise UserError(f"{where}: w1 has shape {w1.shape}; (hidden, {len(FEATURES)}) expected")
        b1, w2 = _numbers(d["b1"], where, "b1", 1), _numbers(d["w2"], where, "w2", 1)
        if b1.shape != (n_hidden,) or w2.shape != (n_hidden,):
            raise UserError(
                f"{where}: b1 and w2 have shapes {b1.shape} and {w2.shape}; ({n_hidden},) expected"
            )
        threshold = float(_numbers(d["threshold"], where, "threshold", 0))
        if not 0.0 <= threshold <= 1.0:
            raise UserError(
                f"{where}: threshold = {threshold:g}: a probability in [0, 1] is expected (the "
                "head's P(fallen) is held against it): fix the file or fit it again"
            )
        return cls(
            w1, b1, w2, float(_numbers(d["b2"], where, "b2", 0)), threshold,
            str(d.get("trained_on", "")), mode, _contract(d.get("contract"), where),
        )  # fmt: skip


def _numbers(value: Any, where: str, name: str, ndim: int) -> np.ndarray:
    """`value` of a head file as float64 with `ndim` dimensions: finite JSON numbers only (a NaN
    weight makes every P(fallen) NaN, and every fall is then vetoed; `true` is not a number)."""
    try:
        arr = np.asarray(value, dtype=object)
    except ValueError:  # lists nested past numpy's 64 dimensions
        arr = np.asarray(None, dtype=object)
    bad = [v for v in arr.flat if not (_finite_number(v) and abs(v) <= MAX_WEIGHT)]
    if arr.ndim != ndim or bad:
        what = "a number" if ndim == 0 else f"a {ndim}-dimensional array of numbers"
        shown = json.dumps(bad[0] if bad else value)[:40]
        raise UserError(
            f"{where}: {name} holds {shown}; {what} (finite, at most {MAX_WEIGHT:g} in size) is "
            "expected: the file is damaged, fit it again (experiments/pose_head.py)"
        )
    return arr.astype(np.float64)


def _finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _contract(value: Any, where: str) -> HeadContract | None:
    """The file's `contract` (None: a file saved before heads carried one)."""
    if value is None:
        return None
    try:
        c = HeadContract(**value)
    except TypeError:  # not a mapping, a key missing or unknown
        c = None
    if not (
        c is not None
        and isinstance(c.pose_model, str) and isinstance(c.pose_model_sha256, str)
        and isinstance(c.side, int) and not isinstance(c.side, bool) and _finite_number(c.rate_hz)
        and isinstance(c.rules, dict) and all(_finite_number(v) for v in c.rules.values())
        and (c.look is None or (isinstance(c.look, dict)
             and all(_finite_number(v) for v in c.look.values())))
    ):  # fmt: skip
        raise UserError(
            f"{where}: contract = {json.dumps(value)[:80]}: expected pose_model, "
            "pose_model_sha256, rate_hz, side and rules (numbers), look (numbers or null): fit "
            "it again"
        )
    return c


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
