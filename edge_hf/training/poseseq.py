"""Training the pose-sequence model (`edge_hf.core.poseseq`): windows, labels, two designs, export.

Windows come from one place for every source: the pose rules track the people of each pose tick
(`PoseFallRules(windows=...)`) and hand out each tracked person's window (`core.posewindow`), as in
the daemon. Sources:

- generated: 3D motion (`training.skeleton`) seen through a random camera with MoveNet's errors
  (`training.posegen`); the person the motion moves is the track whose box overlaps the motion's
  projected skeleton, other tracks (a ghost detection) are left out;
- real: MoveNet's cached people over labelled clips (`real_windows`, labels from the clip's fall
  segment).

Labels of a window ending at tick t (`labels`), each with a mask (0: unknown, not learned):
`falling` — a fall's descent ended within the window and the person is down at t; `down` — on the
floor at t (fallen, or low on purpose); `up` — upright at t. Ticks inside a descent are unknown
for all three.

Designs (`DESIGNS`), both reading the same (ticks, FEATURES_PER_TICK) window:
- `conv1d`: a temporal convolution over the keypoint vectors (dilated, causal-free, max-pooled
  over time plus the last tick's features);
- `heatmaps`: a hyperframe of poses — each tick's skeleton rendered as a limb map (Gaussian dots
  along the 12 limbs and on the 17 joints, on a HEATMAP_SIDE grid in the person's own size), the
  T maps stacked on the channel axis oldest first, through a small 2D CNN. The rendering is part
  of the network, so the ONNX file reads the window itself and the daemon feeds both designs the
  same array.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from edge_hf.core.pose import Box, Person, iou
from edge_hf.core.posefall import PoseFallRules
from edge_hf.core.poseseq import OUTPUTS, SeqContract
from edge_hf.core.posewindow import FEATURES_PER_TICK, N_KEYPOINTS, WindowSpec

log = logging.getLogger(__name__)

DESIGNS = ("conv1d", "heatmaps")
INPUT_NAME, OUTPUT_NAME = "windows", "probs"
OPSET = 17
HEATMAP_SIDE = 16
# COCO-17 limbs drawn in the heatmap design: arms, legs, shoulders, hips, torso sides, neck
LIMBS = ((5, 7), (7, 9), (6, 8), (8, 10), (11, 13), (13, 15), (12, 14), (14, 16), (5, 6),
         (11, 12), (5, 11), (6, 12), (0, 5), (0, 6))  # fmt: skip
LIMB_STEPS = (0.25, 0.5, 0.75)  # points drawn along each limb besides its two joints
# where a window's coordinates fall: x about -1..1, y from -1.5 (above the head) to 0.5
GRID_X, GRID_Y = (-1.25, 1.25), (-1.75, 0.75)


# --- labels ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Labels:
    """One window's targets and masks, in OUTPUTS order."""

    y: tuple[float, float, float]
    mask: tuple[float, float, float]


UNKNOWN = Labels((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))


def generated_labels(
    phase: int, t: float, descent: tuple[float, float] | None, window_s: float
) -> Labels:
    """Labels of a generated motion's window ending at `t` in `phase` (`training.skeleton`:
    UP 0, FALLING 1, DOWN 2, LOW 3); `descent` the fall's (start, end) seconds (None: daily
    life)."""
    up, falling_phase, down, low = 0, 1, 2, 3
    if phase == falling_phase:
        return UNKNOWN
    fell = descent is not None and t - window_s < descent[1] <= t + 1e-6 and phase == down
    return Labels((float(fell), float(phase in (down, low)), float(phase == up)), (1.0, 1.0, 1.0))


def real_labels(
    t: float, label: str, start_s: float | None, down_s: float | None, window_s: float,
    lead_s: float = 0.3,
) -> Labels:  # fmt: skip
    """Labels of a real clip's window ending at `t`: `label` fall / adl / lying_still; a fall's
    descent from `start_s` to `down_s` (the person down from then on, as the head's labels).
    What the manifest does not say is unknown: whether someone in a daily-activity clip is on
    the floor or upright, whether the person of a fall clip stands or sits before the fall."""
    if label == "fall" and start_s is not None and down_s is not None:
        if start_s - lead_s <= t < down_s:
            return UNKNOWN
        if t >= down_s:
            return Labels((float(t - window_s < start_s), 1.0, 0.0), (1.0, 1.0, 1.0))
        return Labels((0.0, 0.0, 0.0), (1.0, 1.0, 0.0))
    if label == "lying_still":
        return Labels((0.0, 1.0, 0.0), (1.0, 1.0, 1.0))
    if label == "pedestrians":  # vtest.avi: people walking
        return Labels((0.0, 0.0, 1.0), (1.0, 1.0, 1.0))
    return Labels((0.0, 0.0, 0.0), (1.0, 0.0, 0.0))


# --- windows ---------------------------------------------------------------------------------


@dataclass
class WindowSet:
    """Windows (N, ticks, FEATURES_PER_TICK) with targets and masks (N, 3) and, per window, the
    motion/clip it came from (`group`, for held-out splits and event-level scoring)."""

    x: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    group: np.ndarray

    @classmethod
    def empty(cls, ticks: int) -> WindowSet:
        return cls(np.zeros((0, ticks, FEATURES_PER_TICK), np.float32),
                   np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32),
                   np.zeros(0, np.int64))  # fmt: skip

    def __len__(self) -> int:
        return len(self.x)

    @classmethod
    def concat(cls, parts: Sequence[WindowSet]) -> WindowSet:
        parts = [p for p in parts if len(p)]
        return cls(*(np.concatenate([getattr(p, k) for p in parts])
                     for k in ("x", "y", "mask", "group")))  # fmt: skip


def tracked_windows(
    ticks: Iterable[tuple[float, list[Person]]], spec: WindowSpec
) -> list[tuple[float, int, Box, np.ndarray]]:
    """(t, track id, box, window) of every tracked person at every pose tick, tracked by the pose
    rules as the daemon tracks them."""
    out: list[tuple[float, int, Box, np.ndarray]] = []
    rules = PoseFallRules(windows=out, window=spec)
    for t, people in ticks:
        rules.update(t, people)
    return out


def motion_windows(
    people: Sequence[list[Person]],
    true_boxes: Sequence[Box | None],
    phases: np.ndarray,
    descent: tuple[float, float] | None,
    spec: WindowSpec,
    group: int,
    min_iou: float = 0.3,
) -> WindowSet:
    """The labelled windows of one generated motion observed per tick (`people`): the track whose
    box overlaps the skeleton's projected box (`true_boxes`) is the person; others are dropped."""
    ticks = [(i / spec.rate_hz, found) for i, found in enumerate(people)]

    def label_of(t: float, box: Box) -> Labels:
        i = round(t * spec.rate_hz)
        truth = true_boxes[i]
        if truth is None or iou(box, truth) < min_iou:
            return UNKNOWN
        return generated_labels(int(phases[i]), t, descent, spec.seconds)

    return _labelled(tracked_windows(ticks, spec), label_of, spec, group)


def real_windows(
    poses: Sequence[tuple[float, object, list[Person]]],
    label: str,
    start_s: float | None,
    down_s: float | None,
    spec: WindowSpec,
    group: int,
    until_s: float | None = None,
) -> WindowSet:
    """The labelled windows of one real clip view's cached poses ((t, size, people) per tick)."""
    ticks = [(t, found) for t, _, found in poses if until_s is None or t < until_s]
    return _labelled(
        tracked_windows(ticks, spec),
        lambda t, _: real_labels(t, label, start_s, down_s, spec.seconds),
        spec,
        group,
    )


def _labelled(
    records: list[tuple[float, int, Box, np.ndarray]],
    label_of: Callable[[float, Box], Labels],
    spec: WindowSpec,
    group: int,
) -> WindowSet:
    """The windows of `records` with their labels (`label_of(t, box)`), unknown ones left out."""
    xs, ys, ms = [], [], []
    for t, _, box, w in records:
        lab = label_of(t, box)
        if not any(lab.mask):
            continue
        xs.append(w)
        ys.append(lab.y)
        ms.append(lab.mask)
    if not xs:
        return WindowSet.empty(spec.ticks)
    return WindowSet(np.stack(xs), np.asarray(ys, np.float32), np.asarray(ms, np.float32),
                     np.full(len(xs), group, np.int64))  # fmt: skip


# --- the two designs -------------------------------------------------------------------------


class TemporalConv(nn.Module):
    """Design `conv1d`: dilated 1-D convolutions over the ticks of keypoint vectors."""

    def __init__(self, ticks: int, width: int = 64) -> None:
        super().__init__()
        self.ticks = ticks
        layers: list[nn.Module] = []
        c = FEATURES_PER_TICK
        for dilation in (1, 2, 4):
            layers += [nn.Conv1d(c, width, 3, padding=dilation, dilation=dilation), nn.ReLU()]
            c = width
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(2 * width, len(OUTPUTS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x.transpose(1, 2))  # (B, width, ticks)
        return self.out(torch.cat([h.amax(dim=2), h[:, :, -1]], dim=1))


def _limb_points() -> tuple[torch.Tensor, torch.Tensor]:
    """(P, 17) weights that make the drawn points from the keypoints, and (P, 17) 0/1 of which
    keypoints a point needs seen."""
    rows, needs = [], []
    for k in range(N_KEYPOINTS):
        r = torch.zeros(N_KEYPOINTS)
        r[k] = 1.0
        rows.append(r)
        needs.append(r.clone())
    for a, b in LIMBS:
        for s in LIMB_STEPS:
            r = torch.zeros(N_KEYPOINTS)
            r[a], r[b] = 1 - s, s
            n = torch.zeros(N_KEYPOINTS)
            n[a] = n[b] = 1.0
            rows.append(r)
            needs.append(n)
    return torch.stack(rows), torch.stack(needs)


class PoseHyperframe(nn.Module):
    """Design `heatmaps`: each tick's skeleton drawn as a limb map, the ticks' maps stacked on
    the channel axis (oldest first) and classified by a small 2D CNN."""

    mix: torch.Tensor  # (buffers)
    needs: torch.Tensor
    gx: torch.Tensor
    gy: torch.Tensor

    def __init__(self, ticks: int, width: int = 16, side: int = HEATMAP_SIDE) -> None:
        super().__init__()
        self.ticks, self.side = ticks, side
        mix, needs = _limb_points()
        self.register_buffer("mix", mix)
        self.register_buffer("needs", needs)
        self.register_buffer("gx", torch.linspace(GRID_X[0], GRID_X[1], side))
        self.register_buffer("gy", torch.linspace(GRID_Y[0], GRID_Y[1], side))
        self.sigma = (GRID_X[1] - GRID_X[0]) / side
        self.cnn = nn.Sequential(
            nn.Conv2d(ticks, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.out = nn.Linear(2 * width + ticks, len(OUTPUTS))

    def render(self, x: torch.Tensor) -> torch.Tensor:
        """(B, ticks, side, side) limb maps of (B, ticks, FEATURES_PER_TICK) windows."""
        kp = x[:, :, : N_KEYPOINTS * 3].reshape(x.shape[0], x.shape[1], N_KEYPOINTS, 3)
        seen = kp[..., 2]  # (B, T, 17)
        px = torch.matmul(kp[..., 0], self.mix.t())  # (B, T, P)
        py = torch.matmul(kp[..., 1], self.mix.t())
        # a point is drawn when every keypoint it needs is seen
        missing = torch.matmul(1.0 - seen, self.needs.t())  # (B, T, P) count of unseen needed
        weight = (missing < 0.5).to(x.dtype)
        two_s2 = 2 * self.sigma**2
        ex = torch.exp(-((px.unsqueeze(-1) - self.gx) ** 2) / two_s2)  # (B, T, P, W)
        ey = torch.exp(-((py.unsqueeze(-1) - self.gy) ** 2) / two_s2) * weight.unsqueeze(-1)
        return torch.einsum("btph,btpw->bthw", ey, ex).clamp(max=1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = x[:, :, -1]  # (B, T): whether the person was found at each tick
        return self.out(torch.cat([self.cnn(self.render(x)), found], dim=1))


def make_model(design: str, ticks: int) -> nn.Module:
    if design == "conv1d":
        return TemporalConv(ticks)
    if design == "heatmaps":
        return PoseHyperframe(ticks)
    raise ValueError(f"design {design!r}: one of {DESIGNS}")


class WithProbabilities(nn.Module):
    """The exported graph: logits -> probabilities (the daemon reads probabilities)."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(x))


# --- training --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FitSettings:
    epochs: int = 12
    batch: int = 256
    lr: float = 2e-3
    weight_decay: float = 1e-4
    seed: int = 0


def fit(data: WindowSet, design: str, ticks: int, settings: FitSettings | None = None,
        progress: bool | None = None) -> nn.Module:  # fmt: skip
    """A `design` network trained on `data` with masked binary cross-entropy (each output's
    positives weighted up to 3 times towards balancing its negatives), AdamW, one-cycle schedule."""
    s = settings or FitSettings()
    torch.manual_seed(s.seed)
    rng = np.random.default_rng(s.seed)
    net = make_model(design, ticks)
    x = torch.from_numpy(data.x)
    y = torch.from_numpy(data.y)
    m = torch.from_numpy(data.mask)
    pos = (y * m).sum(0)
    neg = ((1 - y) * m).sum(0)
    pos_weight = (neg / pos.clamp(min=1.0)).clamp(1.0, 3.0)
    loss_fn = nn.BCEWithLogitsLoss(reduction="none", pos_weight=pos_weight)
    opt = torch.optim.AdamW(net.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    steps = s.epochs * math.ceil(len(x) / s.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=s.lr, total_steps=max(steps, 1))
    bar = None
    if progress or (progress is None and sys.stderr.isatty()):
        from tqdm import tqdm

        bar = tqdm(total=steps, desc=f"train {design}", unit="step", leave=False)
    net.train()
    for _ in range(s.epochs):
        order = torch.from_numpy(rng.permutation(len(x)))
        for k in range(0, len(x), s.batch):
            idx = order[k : k + s.batch]
            xb = _augment(x[idx], rng)
            loss = (loss_fn(net(xb), y[idx]) * m[idx]).sum() / m[idx].sum().clamp(min=1.0)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss.item():.3f}")
    if bar is not None:
        bar.close()
    return net.eval()


def _augment(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Mirror half the windows left-right (x -> -x, left and right keypoints swapped)."""
    flip = torch.from_numpy(rng.random(len(x)) < 0.5)
    if not flip.any():
        return x
    x = x.clone()
    f = x[flip]
    kp = f[:, :, : N_KEYPOINTS * 3].reshape(f.shape[0], f.shape[1], N_KEYPOINTS, 3)
    kp = kp[:, :, MIRROR]
    kp[..., 0] = -kp[..., 0]
    box = f[:, :, N_KEYPOINTS * 3 :].clone()
    box[:, :, 0], box[:, :, 2] = -f[:, :, N_KEYPOINTS * 3 + 2], -f[:, :, N_KEYPOINTS * 3]
    x[flip] = torch.cat([kp.reshape(f.shape[0], f.shape[1], -1), box], dim=2)
    return x


# keypoint index of each keypoint's mirror image (left <-> right)
MIRROR = [0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15]


def predict(net: nn.Module, x: np.ndarray, batch: int = 2048) -> np.ndarray:
    """(N, 3) probabilities of (N, ticks, FEATURES_PER_TICK) windows."""
    out = []
    with torch.no_grad():
        for k in range(0, len(x), batch):
            out.append(torch.sigmoid(net(torch.from_numpy(x[k : k + batch]))).numpy())
    return np.concatenate(out) if out else np.zeros((0, 3), np.float32)


# --- export ----------------------------------------------------------------------------------


def export(net: nn.Module, contract: SeqContract, out: Path, atol: float = 1e-4) -> float:
    """Write `net` (probabilities out, dynamic batch) to `out` with `contract` as metadata, run
    the ONNX checker and check ONNX Runtime against PyTorch; the largest difference."""
    import onnx

    from edge_hf.core.runtime import open_session

    graph = WithProbabilities(net).eval()
    x = torch.from_numpy(_parity_windows(contract.ticks))
    out.parent.mkdir(parents=True, exist_ok=True)
    dynamic = {INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}}
    torch.onnx.export(graph, (x[:2],), str(out), input_names=[INPUT_NAME],
                      output_names=[OUTPUT_NAME], opset_version=OPSET, dynamo=False,
                      dynamic_axes=dynamic)  # fmt: skip
    proto = onnx.load(str(out))
    del proto.metadata_props[:]
    for key, value in contract.metadata().items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    proto.doc_string = f"edge_hf pose-sequence model ({contract.design}), outputs {OUTPUTS}"
    onnx.checker.check_model(proto)
    onnx.save(proto, str(out))
    with torch.no_grad():
        expected = graph(x).numpy()
    got = open_session(out).run([OUTPUT_NAME], {INPUT_NAME: x.numpy()})[0]
    diff = float(np.abs(got - expected).max())
    if diff > atol:
        raise RuntimeError(f"{out}: ONNX Runtime and PyTorch disagree (max |diff| {diff:.2e})")
    return diff


def _parity_windows(ticks: int, n: int = 8) -> np.ndarray:
    """Windows that look like real ones (a standing skeleton that tips over, some ticks unseen)."""
    rng = np.random.default_rng(0)
    x = np.zeros((n, ticks, FEATURES_PER_TICK), np.float32)
    for b in range(n):
        for i in range(ticks):
            if rng.random() < 0.15:
                continue
            a = min(1.0, max(0.0, (i - ticks / 2) / 3)) * (b % 2) * math.pi / 2
            h = rng.uniform(0, 1, N_KEYPOINTS)
            kx, ky = h * math.sin(a) * 0.9, -h * math.cos(a)
            seen = (rng.random(N_KEYPOINTS) > 0.2).astype(np.float32)
            x[b, i, : N_KEYPOINTS * 3] = np.stack([kx * seen, ky * seen, seen], 1).ravel()
            x[b, i, N_KEYPOINTS * 3 :] = (kx.min(), ky.min(), kx.max(), 0.0, 1.0)
    return x
