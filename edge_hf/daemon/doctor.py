"""`edge-hf doctor`: on the box itself, is everything the daemon needs there and working?

One line per check, `ok` / `warn` / `FAIL`, each naming what it saw and, when it fails, what to
do: the config and model, the ONNX Runtime providers in use (and whether TensorRT has cached
engines), OpenCV's GStreamer and the hardware decoder, every enabled camera delivering a frame,
the MQTT broker accepting our connection, and the daemon's memory. Exit status 1 if any FAIL.
"""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_hf.core.errors import UserError
from edge_hf.core.runtime import read_contract
from edge_hf.daemon.config import CameraConfig, Config, StateFiles


@dataclass(frozen=True)
class Finding:
    level: str  # ok, warn, FAIL
    what: str
    detail: str


def _providers(cfg: Config) -> list[Finding]:
    from edge_hf.daemon.classifier import OnnxFallClassifier

    try:
        clf = OnnxFallClassifier(
            cfg.model.path, cfg.model.providers, cfg.state_dir, cfg.model.fp16, cfg.max_batch
        )
    except UserError as exc:
        return [Finding("FAIL", "model", str(exc))]
    out = [Finding("ok", "model", f"{cfg.model.path} loads (T={clf.contract.window})")]
    asked = cfg.model.providers[0]
    in_use = clf.providers[0]
    level = "ok" if in_use.lower().startswith(asked.lower()) else "warn"
    out.append(
        Finding(level, "providers", f"asked {', '.join(cfg.model.providers)}; in use {in_use}")
    )
    ms = clf.warm_up()
    out.append(Finding("ok", "inference", f"{ms:.1f} ms per window after warm-up"))
    if "Tensorrt" in in_use:
        engines = list((cfg.state_dir / StateFiles.TRT_CACHE).glob("*.engine"))
        out.append(
            Finding(
                "ok" if engines else "warn",
                "tensorrt",
                f"{len(engines)} cached engine(s) in {cfg.state_dir / StateFiles.TRT_CACHE}"
                + ("" if engines else " (built on the first run: minutes)"),
            )
        )
    stage = (
        "NumPy on the CPU (torch not loaded)"
        if clf.device == "cpu"
        else "torch on CUDA (cat + in-place normalisation on the GPU)"
    )
    out.append(Finding("ok", "window stage", stage))
    return out


def _gstreamer(cfg: Config) -> list[Finding]:
    import cv2

    from edge_hf.daemon.sources import hardware_decoder, opencv_has_gstreamer

    gst = opencv_has_gstreamer()
    rtsp = any(c.source.startswith(("rtsp://", "rtsps://")) for c in cfg.enabled_cameras())
    csi = any("nvarguscamerasrc" in c.source for c in cfg.enabled_cameras())
    need = "needed by a CSI camera" if csi else "optional"
    out = [
        Finding(
            "ok" if gst else ("FAIL" if csi else "warn"),
            "gstreamer",
            f"OpenCV {cv2.__version__} {'with' if gst else 'without'} GStreamer ({need})",
        )
    ]
    if rtsp:
        hw = hardware_decoder()
        out.append(
            Finding(
                "ok" if hw else "warn",
                "rtsp decoding",
                "hardware (nvv4l2decoder)" if hw else "software (FFmpeg): no nvv4l2decoder here",
            )
        )
    return out


FPS_PROBE_S = 2.0  # how long doctor counts a live camera's frames


def _camera(cam: CameraConfig, interval_s: float | None = None) -> Finding:
    from edge_hf.core.video import VideoError
    from edge_hf.daemon.capture import SLOW_FACTOR, check_frame_size
    from edge_hf.daemon.sources import SourceError, make_source

    src = make_source(
        cam.source, realtime=False, open_timeout_s=cam.open_timeout_s, decoder=cam.decoder
    )
    t0 = time.monotonic()
    fps = 0.0
    try:
        src.open()
        got = src.read()
        if got is not None:
            fps = _frame_rate(src) if src.live else float(getattr(src, "fps", 0.0))
    except SourceError as exc:
        return Finding("FAIL", f"camera {cam.name}", f"{exc}: check cameras[].source")
    finally:
        src.release()
    if got is None:
        return Finding("FAIL", f"camera {cam.name}", f"{src.description} opened but gave no frame")
    try:
        check_frame_size(got[0])
    except VideoError as exc:
        return Finding("FAIL", f"camera {cam.name}", f"{src.description}: {exc}")
    h, w = got[0].shape[:2]
    detail = f"{src.description}: a {w}x{h} frame in {time.monotonic() - t0:.1f} s, {fps:.1f} fps"
    if interval_s and fps and 1.0 / fps > SLOW_FACTOR * interval_s:
        return Finding(
            "warn", f"camera {cam.name}",
            f"{detail}: too slow for the model's {interval_s * 1000:.0f} ms sampling (windows "
            f"repeat frames, falls can be missed); set the camera to >= {1 / interval_s:.0f} fps",
        )  # fmt: skip
    return Finding("ok", f"camera {cam.name}", detail)


def _frame_rate(src: Any) -> float:
    """Frames per second a live source delivers, counted over FPS_PROBE_S."""
    t0, n = time.monotonic(), 0
    while time.monotonic() - t0 < FPS_PROBE_S and src.read() is not None:
        n += 1
    return n / max(time.monotonic() - t0, 1e-6)


def _mqtt(cfg: Config, timeout_s: float = 5.0) -> Finding:
    if not cfg.mqtt.enabled:
        return Finding("ok", "mqtt", "off (no mqtt.host): alerts go to stdout / journal only")
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge_hf.daemon.mqtt import apply_auth_tls

    m = cfg.mqtt
    done = threading.Event()
    result: list[str] = []

    def on_connect(_c: object, _u: object, _f: object, reason: object, _p: object = None) -> None:
        result.append(str(reason))
        done.set()

    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=f"edge-hf-doctor-{cfg.device_id}",
        protocol=mqtt.MQTTv5 if m.protocol == "5" else mqtt.MQTTv311,
    )
    try:
        apply_auth_tls(client, m)
        client.on_connect = on_connect
        client.connect_async(m.host, m.port, keepalive=10)
        client.loop_start()
        done.wait(timeout_s)
    except (OSError, ValueError, UserError) as exc:
        return Finding("FAIL", "mqtt", f"{m.host}:{m.port}: {exc}")
    finally:
        client.loop_stop()
        client.disconnect()
    if not result:
        return Finding(
            "FAIL", "mqtt", f"{m.host}:{m.port}: no answer in {timeout_s:g} s (broker down?)"
        )
    if result[0] != "Success":
        return Finding("FAIL", "mqtt", f"{m.host}:{m.port} refused: {result[0]} (mqtt.username?)")
    return Finding("ok", "mqtt", f"{m.host}:{m.port} accepts {m.username or 'anonymous'}")


def diagnose(
    cfg: Config, cameras: bool = True, say: Callable[[Finding], None] | None = None
) -> list[Finding]:
    """Run every check; `say` is called with each finding as it comes."""
    findings: list[Finding] = []

    def add(items: list[Finding]) -> None:
        for f in items:
            findings.append(f)
            if say is not None:
                say(f)

    add(_providers(cfg))
    add(_gstreamer(cfg))
    if cameras:
        try:
            model_interval_ms: float | None = read_contract(cfg.model.path).interval_ms
        except UserError:
            model_interval_ms = None  # said by the model check above
        for cam in cfg.enabled_cameras():
            ms = cam.interval_ms or model_interval_ms
            add([_camera(cam, ms / 1000 if ms else None)])
    add([_mqtt(cfg)])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    add([Finding("ok", "memory", f"{rss:.0f} MB peak RSS of this check (the daemon's is close)")])
    return findings


def print_finding(f: Finding) -> None:
    print(f"{f.level:>4}  {f.what}: {f.detail}", flush=True)


def doctor(path: Path, cameras: bool = True) -> int:
    from edge_hf.daemon.app import check

    cfg, _ = check(path)
    print(f"edge-hf doctor: {path}")
    findings = diagnose(cfg, cameras, print_finding)
    failed = [f for f in findings if f.level == "FAIL"]
    print(f"{len(findings)} checks, {len(failed)} failed" + (": see FAIL above" if failed else ""))
    return 1 if failed else 0
