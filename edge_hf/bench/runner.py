"""`edge-hf bench`: run the benchmark sections in one process and write bench.json + bench.md."""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.bench.capture import capture_costs, interleaved_ms, model_effect, score_effect
from edge_hf.bench.graph import one_vs_three
from edge_hf.bench.live import capacity, soak
from edge_hf.bench.prep import copy_bandwidth_gbs, inference_rows, prep_rows
from edge_hf.bench.report import markdown
from edge_hf.core.contract import POSE_MODEL
from edge_hf.core.errors import UserError
from edge_hf.core.runtime import read_contract
from edge_hf.core.video import RESIZE

log = logging.getLogger(__name__)

SECTIONS = ("prep", "inference", "graph", "capture", "int8", "capacity", "latency")
# The model trained on real footage, the one people deploy: the resize's score effect and int8
# are measured on it, and its capacity beside the demo model's.
REAL_MODEL = Path("models/fall-real-efficientnet_lite0-t3.onnx")
SCORE_DATA = Path("../shared/data/gmdcsa24")  # real clips for the score effect of the resize
POSE_SEQ = Path("models/pose-seq.onnx")  # ... and the opt-in pose-sequence model (#41)


def _say(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _machine() -> dict[str, Any]:
    import onnxruntime
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
    }


def run_bench(
    out: Path,
    model: Path,
    video: Path | None,
    sections: Sequence[str] = SECTIONS,
    seconds: float = 10.0,
    soak_s: float = 600.0,
    soak_cameras: int = 2,
    repeats: int = 7,
    quick: bool = False,
    score_model: Path = REAL_MODEL,
    score_data: Path = SCORE_DATA,
    readme: Path | None = None,
    real_model: Path | None = REAL_MODEL,
    pose_model: Path | None = POSE_MODEL,
) -> dict[str, Any]:
    """Run the chosen sections; write `out/bench.json` and `out/bench.md`; return the results."""
    _refuse_bad_args(model, video, sections, seconds, soak_s, soak_cameras, repeats, readme)
    contract = read_contract(model)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    res: dict[str, Any] = {"machine": _machine(), "model": str(model), "quick": quick}
    with tempfile.TemporaryDirectory(prefix="edge-hf-bench-") as tmp:
        work = Path(tmp)
        if "prep" in sections:
            _say("window preparation (ours vs naive vs memory floor)")
            bw = copy_bandwidth_gbs()
            res["copy_bandwidth_gbs"] = round(bw, 2)
            windows, sizes = ((1, 3), (112,)) if quick else ((1, 3, 5), (112, 224))
            res["prep"] = prep_rows(windows, sizes, repeats, bw)
        if "inference" in sections:
            _say(f"inference ({contract.backbone}: ONNX Runtime vs PyTorch eager vs FLOP floor)")
            rows, rates = inference_rows(contract, (1, 3), (1,) if quick else (1, 8), repeats)
            res["inference"], res["matmul"] = rows, rates
        if "graph" in sections:
            _say("one network vs the three-network ensemble, static vs run-time padding")
            res["graph"] = one_vs_three(
                work / "graph", 3 if quick else repeats, size=64 if quick else 160
            )
        clip = video
        if clip is None and {"capture", "capacity", "latency"} & set(sections):
            from edge_hf.training.synth import write_demo_clips

            clip = write_demo_clips(work / "clips")[0]
        camera = None
        if {"capture", "capacity"} & set(sections):
            assert clip is not None  # cameras deliver 640x480 at 15 fps in these runs
            camera = retimed(clip, work / "camera.mp4", size=CAMERA_SIZE)
            res["camera_video"] = (
                f"{video.name if video else 'a generated clip'} at {CAMERA_SIZE[0]}x"
                f"{CAMERA_SIZE[1]}, {CAMERA_FPS:g} fps"
            )
        if "capture" in sections:
            assert camera is not None
            _say("capture: decode, convert and resize per frame (before vs ours vs floor)")
            bw = res.get("copy_bandwidth_gbs") or round(copy_bandwidth_gbs(), 2)
            res["copy_bandwidth_gbs"] = bw
            res["capture"] = capture_costs(camera, (112, 112), bw, repeats, CAMERA_FPS)
            clips = _clips(score_data)
            if score_model.is_file() and clips:
                vids: list[tuple[Path, tuple[int, int, int, int] | None]] = [
                    (c, None) for c in clips
                ]
                if video is not None:
                    vids.append((video, None))
                res["capture"]["scores"] = score_effect(score_model, vids, progress=_say)
        if "int8" in sections:
            clips = _clips(score_data)
            if score_model.is_file() and clips:
                _say(f"int8: {score_model.name} quantised, calibrated on {score_data}")
                res["int8"] = int8_rows(score_model, score_data, work, clips, repeats, _say)
            else:
                _say(f"int8: skipped ({score_model} or clips in {score_data} missing)")
        if "capacity" in sections:
            assert camera is not None
            res["capacity"] = _capacity_rows(model, real_model, pose_model, camera, seconds, work)
        if "latency" in sections:
            from edge_hf.training.synth import write_demo_clips

            fall_clip = write_demo_clips(work / "clips")[0]
            _say(f"latency and RSS: the daemon for {soak_s:.0f} s, {soak_cameras} looping cameras")
            res["latency"] = soak(
                model, fall_clip, soak_cameras, soak_s, work / "soak", progress=_say
            )
    res["total_s"] = round(time.monotonic() - started, 1)
    (out / "bench.json").write_text(json.dumps(res, indent=2) + "\n")
    (out / "bench.md").write_text(markdown(res))
    if readme is not None:
        paste_into_readme(readme, markdown(res))
        _say(f"pasted the tables into {readme}")
    _say(f"wrote {out / 'bench.json'} and {out / 'bench.md'} in {res['total_s']:.0f} s")
    return res


CAMERA_FPS = 15.0
CAMERA_SIZE = (640, 480)


def _refuse_bad_args(
    model: Path, video: Path | None, sections: Sequence[str], seconds: float, soak_s: float,
    soak_cameras: int, repeats: int, readme: Path | None,
) -> None:  # fmt: skip
    """A UserError for the first argument run_bench cannot run with, before anything runs."""
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise UserError(f"--sections {sorted(unknown)}: choose from {', '.join(SECTIONS)}")
    for name, value, least in (
        ("--seconds", seconds, 1.0),
        ("--soak-s", soak_s, 5.0),
        ("--soak-cameras", soak_cameras, 1),
        ("--repeats", repeats, 1),
    ):
        if value < least:
            raise UserError(f"{name} {value:g}: must be at least {least:g}")
    if not model.is_file():
        raise UserError(f"--model {model}: no such file; run `make demo-model` or pass a model")
    if video is not None and not video.is_file():
        raise UserError(f"--video {video}: no such file")
    if readme is not None:
        _readme_text(readme)  # refused before a 15-minute run, not after it


def _clips(score_data: Path) -> list[Path]:
    """The real clips the score effect and int8 run on (none when the folder is missing)."""
    return sorted(score_data.glob("*.mp4")) if score_data.is_dir() else []


def _capacity_rows(
    model: Path, real_model: Path | None, pose_model: Path | None, camera: Path,
    seconds: float, work: Path,
) -> list[dict[str, Any]]:  # fmt: skip
    """The capacity section: the demo model in both layouts, then the shipped real model's
    pipelines when it is there."""
    # Capacity measures time: the model relabelled with the cheap resize rule (what a model
    # trained by this version records) when it predates the rule.
    timed = with_resize(model, work / "capacity-model.onnx", RESIZE)
    rows = [
        capacity(timed, camera, mode, seconds, work / "state", progress=_say,
                 label=f"{model.name} (demo)")
        for mode in ("batched", "per_camera")
    ]  # fmt: skip
    # The pipeline people deploy: the shipped real model, without and with the person stage
    # (MoveNet at 5 Hz a camera), side by side in the same run.
    if real_model is not None and real_model.is_file():
        rows += real_pipeline_capacity(real_model, camera, seconds, work, pose_model, _say)
    return rows


def int8_rows(
    model: Path, data: Path, work: Path, clips: list[Path], repeats: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    """`model` quantised as `edge-hf export --int8` does (calibrated on `data`), then fp32 vs int8
    side by side: CPU time per batch (interleaved) and fall probabilities on the real clips."""
    from edge_hf.training.quantize import calibration_windows, quantize_int8

    q = work / f"{model.stem}-int8.onnx"
    windows = calibration_windows(model, data, limit=200, cache_dir=work / "cache")
    agreement = quantize_int8(model, q, windows)
    speed = interleaved_ms({"fp32": model, "int8": q}, (1, 8), max(50, 30 * repeats))
    for row in speed.values():
        row["speedup"] = round(row["fp32_ms"] / row["int8_ms"], 2)
    return {
        "model": model.name,
        "calibration": str(data),
        "size_mb": {
            "fp32": round(model.stat().st_size / 1e6, 1),
            "int8": round(q.stat().st_size / 1e6, 1),
        },
        "agreement": agreement,
        "speed": speed,
        "scores": model_effect(model, q, [(c, None) for c in clips], progress),
    }


def real_pipeline_capacity(
    real_model: Path,
    camera: Path,
    seconds: float,
    work: Path,
    pose_model: Path | None,
    progress: Callable[[str], None] = _say,
) -> list[dict[str, Any]]:
    """Cameras the shipped real model sustains (batched): alone, with the person stage in its own
    thread (the daemon's way since 2026-12-06), the same with its second look (#40) and, for
    comparison, in the inference loop (the way before), and with the pose-sequence model
    (`models/pose-seq.onnx`, opt-in), side by side in one run."""
    real = with_resize(real_model, work / "capacity-real.onnx", RESIZE)
    out = []
    rows: list[tuple[Path | None, bool, bool, Path | None]] = [
        (None, True, False, None), (pose_model, True, False, None), (pose_model, True, True, None),
        (pose_model, False, False, None),
    ]  # fmt: skip
    if POSE_SEQ.is_file():  # the opt-in pose-sequence model (#41): its cost beside the stage's
        rows.append((pose_model, True, False, POSE_SEQ))
    for pose, threaded, look, sequence in rows:
        if pose is not None and not pose.is_file():
            continue
        where = ("" if threaded else ", in the inference loop") + (
            " and its second look" if look else ""
        ) + (" and the pose-sequence model" if sequence else "")  # fmt: skip
        person = "" if pose is None else f" + person stage 5 Hz{where}"
        out.append(
            capacity(real, camera, "batched", seconds, work / "state", progress=progress,
                     person=pose, label=f"{real_model.name}{person}", person_threaded=threaded,
                     second_look=look, sequence=sequence)
        )  # fmt: skip
    return out


def with_resize(model: Path, out: Path, rule: str) -> Path:
    """`model` as is if it records `rule`; else a copy at `out` whose metadata says `rule`."""
    import onnx

    if read_contract(model).resize == rule:
        return model
    proto = onnx.load(str(model))
    for prop in proto.metadata_props:
        if prop.key == "edge_hf.resize":
            prop.value = rule
            break
    else:
        onnx.helper.set_model_props(
            proto, {**{p.key: p.value for p in proto.metadata_props}, "edge_hf.resize": rule}
        )
    onnx.save(proto, str(out))
    return out


def retimed(
    src: Path, out: Path, fps: float = CAMERA_FPS, size: tuple[int, int] | None = None
) -> Path:
    """`src` re-declared at `fps` (same frames, played faster or slower), resized to `size`
    (width, height) if given.

    A camera whose frame rate equals the 10 Hz sampling rate beats against the tick grid: a frame
    that arrives a hair after its tick is written together with the next tick's, and the window
    in between is skipped. Cameras run at 15-30 fps; so do the capacity runs.
    """
    import cv2

    from edge_hf.training.synth import write_video

    cap = cv2.VideoCapture(str(src))
    if not cap.isOpened():
        raise UserError(f"--video {src}: OpenCV cannot open it")
    own = (int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)))
    wh = size or own

    def frames() -> Iterator[np.ndarray]:
        while True:
            ok, frame = cap.read()
            if not ok:
                return
            yield frame if wh == own else cv2.resize(frame, wh, interpolation=cv2.INTER_AREA)

    try:
        write_video(out, frames(), fps, wh)
    finally:
        cap.release()
    return out


START, END = "<!-- bench:start", "<!-- bench:end -->"


def _readme_text(readme: Path) -> str:
    """The text of the file the tables go into (`--readme`: benchmarks/README.md in `make bench`),
    refused in one line if it is missing or has no bench markers."""
    if not readme.is_file():
        raise UserError(f"--readme {readme}: no such file")
    text = readme.read_text()
    if START not in text or END not in text:
        raise UserError(f"--readme {readme}: no '{START} ...' / '{END}' markers to paste between")
    return text


def paste_into_readme(readme: Path, md: str) -> None:
    """Replace what is between the file's bench markers with `md` (its title dropped and its
    headings one level down)."""
    text = _readme_text(readme)
    body = md.split("\n", 2)[2] if md.startswith("# ") else md
    body = "\n".join("#" + ln if ln.startswith("## ") else ln for ln in body.splitlines())
    head, rest = text.split(START, 1)
    marker_line, _ = rest.split("\n", 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{START}{marker_line}\n{body.strip()}\n{END}{tail}")
