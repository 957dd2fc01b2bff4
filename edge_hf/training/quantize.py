"""int8 models: ONNX Runtime static quantisation (QDQ) calibrated on real windows.

`quantize_int8` takes an exported fp32 model and writes a QDQ model: weights int8 per channel,
activations uint8 with ranges calibrated on windows built exactly as training and the daemon
build them (the model's own window spec, normalisation and clamp rule), from a clip folder or
manifest. QDQ keeps the graph's input and output, so the daemon runs it unchanged: ONNX Runtime's
CPU provider executes the int8 kernels (VNNI where the CPU has it) and TensorRT builds an int8
engine from the Q/DQ scales on Jetson. The fp32 model's metadata (the contract) is copied over,
plus `edge_hf.quantization`.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.contract import INPUT_NAME
from edge_hf.core.errors import UserError
from edge_hf.training.data import HyperframeDataset, decode_clips, load_clips
from edge_hf.training.evaluate import load_model

log = logging.getLogger(__name__)


class _Windows:
    """onnxruntime.quantization's CalibrationDataReader over our evaluation windows."""

    def __init__(self, batches: list[np.ndarray]) -> None:
        self._it: Iterator[np.ndarray] = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._it, None)
        return None if batch is None else {INPUT_NAME: batch}


def calibration_windows(
    model: Path, data: Path, limit: int = 300, cache_dir: Path | None = None
) -> np.ndarray:
    """Up to `limit` windows (N, 3T, H, W) from `data`, as the model's contract builds them,
    spread over every clip from start to end: activation ranges need the falls as much as the
    daily life, whatever the manifest calls them (a three-state model has no `fall` label)."""
    _, spec, classes, _ = load_model(model)
    clips = [replace(c, label=classes[0], start_s=None, end_s=None) for c in load_clips(data)]
    if not clips:
        raise UserError(f"--calibration {data}: no clip in it")
    loaded = decode_clips(clips, spec.size, cache_dir, progress=True, resize=spec.resize)
    ds = HyperframeDataset(loaded, classes, spec, train=False)
    step = max(1, len(ds) // limit)
    xs = [ds[i][0].numpy() for i in range(0, len(ds), step)][:limit]
    return np.stack(xs).astype(np.float32)


def quantize_int8(model: Path, out: Path, windows: np.ndarray, note: str = "") -> dict[str, Any]:
    """Write the QDQ int8 version of `model` to `out`; returns how close it stays to fp32 on
    `windows` (argmax agreement, largest probability difference)."""
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from edge_hf.core.runtime import open_session

    with tempfile.TemporaryDirectory() as tmp:
        prepared = Path(tmp) / "prepared.onnx"
        quant_pre_process(str(model), str(prepared), skip_symbolic_shape=True)
        batches = [windows[i : i + 1] for i in range(len(windows))]
        out.parent.mkdir(parents=True, exist_ok=True)
        quantize_static(
            str(prepared), str(out), _Windows(batches), quant_format=QuantFormat.QDQ,
            per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )  # fmt: skip
    fp32, q = onnx.load(str(model)), onnx.load(str(out))
    del q.metadata_props[:]
    for prop in fp32.metadata_props:
        q.metadata_props.add(key=prop.key, value=prop.value)
    q.metadata_props.add(
        key="edge_hf.quantization",
        value=f"int8 QDQ static (per-channel weights, MinMax), {len(windows)} windows{note}",
    )
    onnx.save(q, str(out))

    def probs(path: Path) -> np.ndarray:
        session = open_session(path)
        logits = np.concatenate(
            [
                session.run(None, {INPUT_NAME: windows[i : i + 16]})[0]
                for i in range(0, len(windows), 16)
            ]
        )
        e = np.exp(logits - logits.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    p32, p8 = probs(model), probs(out)
    return {
        "windows": len(windows),
        "argmax_agreement": float((p32.argmax(1) == p8.argmax(1)).mean()),
        "max_prob_diff": float(np.abs(p32 - p8).max()),
        "fp32_bytes": model.stat().st_size,
        "int8_bytes": out.stat().st_size,
    }
