"""Training-time augmentation that makes the frames of a window look as another camera, or the
conditions homes have, would show the scene: the same change for all T frames of a window, so
the time axis of a hyperframe stays a time axis (`HyperframeDataset` applies them).
"""

from __future__ import annotations

import random
from typing import Any

import cv2
import numpy as np


def camera_augment(frames: list[np.ndarray], rng: random.Random, p: float) -> list[np.ndarray]:
    """Make the frames look as if another camera had seen the scene, the same way for all T.

    Each of these happens with probability `p`: the scene shrunk into a corner of the view (the
    person small in the frame, as from a ceiling camera across a room), a perspective warp (another
    viewpoint), brightness/contrast/saturation changes, blur, and JPEG compression. Real footage
    from unseen rooms differs from the training rooms in exactly these ways.
    """
    h, w = frames[0].shape[:2]
    ops: list[tuple[str, Any]] = []
    if rng.random() < p:  # scale: person small in the frame
        s = rng.uniform(0.5, 0.9)
        sh, sw = max(8, round(h * s)), max(8, round(w * s))
        ops.append(("scale", (sh, sw, rng.randint(0, h - sh), rng.randint(0, w - sw))))
    if rng.random() < p:  # viewpoint: move each corner by up to 10% of the side
        src = np.array([[0, 0], [w, 0], [w, h], [0, h]], dtype=np.float32)
        jitter = np.array(
            [[rng.uniform(-0.1, 0.1) * w, rng.uniform(-0.1, 0.1) * h] for _ in range(4)],
            dtype=np.float32,
        )
        dst = src + jitter
        ops.append(("warp", cv2.getPerspectiveTransform(src, dst)))
    if rng.random() < p:
        ops.append(("colour", (rng.uniform(0.6, 1.4), rng.uniform(-40, 40), rng.uniform(0.5, 1.5))))
    if rng.random() < p:
        ops.append(("blur", rng.uniform(0.4, 1.5)))
    if rng.random() < p:
        ops.append(("jpeg", rng.randint(20, 70)))
    if not ops:
        return frames
    return [_apply_camera_ops(f, ops) for f in frames]


def condition_augment(frames: list[np.ndarray], rng: random.Random, p: float) -> list[np.ndarray]:
    """The conditions of real homes the training rooms lack, each with probability `p`, the same
    way for all T: an infrared night picture (`night_picture`), then part of the scene hidden
    (`hide_part`). Deliberately not the conditions benchmark's own transforms
    (experiments/realbench/conditions.py: fixed weights, contrast 45 %, noise sd 9, the lower
    third): a model must not be tuned to them."""
    out = frames
    if rng.random() < p:
        out = night_picture(out, rng)
    if rng.random() < p:
        out = hide_part(out, rng)
    return out


def night_picture(frames: list[np.ndarray], rng: random.Random) -> list[np.ndarray]:
    """An infrared camera's picture: one grey channel weighted towards red (skin and cloth
    bright), gamma 0.8-1.5, contrast cut to 30-80 % around a dark level, sensor noise of sd 2-12
    grey levels, new in every frame."""
    wr = rng.uniform(0.45, 0.75)
    wg = rng.uniform(0.2, 1.0 - wr)
    weights = np.array([1.0 - wr - wg, wg, wr], np.float32)  # B, G, R
    contrast, level = rng.uniform(0.3, 0.8), rng.uniform(20.0, 80.0)
    gamma, sd = rng.uniform(0.8, 1.5), rng.uniform(2.0, 12.0)
    noise = np.random.default_rng(rng.getrandbits(32))
    out = []
    for f in frames:
        ir = 255.0 * ((f.astype(np.float32) @ weights) / 255.0) ** gamma
        ir = level + contrast * (ir - level) + noise.normal(0.0, sd, ir.shape)
        g = np.clip(ir, 0, 255).astype(np.uint8)
        out.append(cv2.merge([g, g, g]))
    return out


def hide_part(frames: list[np.ndarray], rng: random.Random) -> list[np.ndarray]:
    """A flat dark box in front of part of the scene, the same in every frame: the bottom 20-45 %
    of the picture (a bed or sofa between camera and floor), or a block 25-50 % wide and 20-40 %
    high in its lower two thirds (a table, a counter)."""
    h, w = frames[0].shape[:2]
    shade = tuple(rng.randint(0, 90) for _ in range(3))
    if rng.random() < 0.5:
        y0, y1, x0, x1 = h - round(h * rng.uniform(0.2, 0.45)), h, 0, w
    else:
        bw, bh = round(w * rng.uniform(0.25, 0.5)), round(h * rng.uniform(0.2, 0.4))
        x0, y0 = rng.randint(0, w - bw), rng.randint(h // 3, h - bh)
        x1, y1 = x0 + bw, y0 + bh
    out = []
    for f in frames:
        g = f.copy()
        g[y0:y1, x0:x1] = shade
        out.append(g)
    return out


def _apply_camera_ops(frame: np.ndarray, ops: list[tuple[str, Any]]) -> np.ndarray:
    h, w = frame.shape[:2]
    f = frame
    for name, arg in ops:
        if name == "scale":
            sh, sw, y, x = arg
            canvas = np.empty_like(f)
            canvas[:] = f.reshape(-1, 3).mean(axis=0).astype(np.uint8)
            canvas[y : y + sh, x : x + sw] = cv2.resize(f, (sw, sh), interpolation=cv2.INTER_AREA)
            f = canvas
        elif name == "warp":
            f = cv2.warpPerspective(f, arg, (w, h), borderMode=cv2.BORDER_REPLICATE)
        elif name == "colour":
            contrast, brightness, saturation = arg
            g = f.astype(np.float32) * contrast + brightness
            grey = g.mean(axis=2, keepdims=True)
            f = np.clip(grey + (g - grey) * saturation, 0, 255).astype(np.uint8)
        elif name == "blur":
            f = cv2.GaussianBlur(f, (0, 0), arg)
        elif name == "jpeg":
            ok, buf = cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, arg])
            decoded = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED) if ok else None
            if decoded is not None:
                f = decoded
    return np.ascontiguousarray(f)
