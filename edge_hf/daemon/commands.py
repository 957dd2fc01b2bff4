"""The daemon's sub-commands (`check`, `doctor`, `run`, `replay`, `calibrate`, `zones`,
`alerts`), called by cli.py with the parsed arguments."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from edge_hf.core.errors import UserError


def check_command(args: argparse.Namespace) -> int:
    from edge_hf.daemon.app import camera_operating_point, check
    from edge_hf.daemon.load import capacity_warning

    cfg, contract = check(Path(args.config))
    cams = ", ".join(f"{c.name}{'' if c.enabled else ' (disabled)'}" for c in cfg.cameras)
    print(
        f"{args.config}: OK - device {cfg.device_id}, model {cfg.model.path.name} "
        f"(T={contract.window}, {contract.interval_ms:g} ms, {contract.input_size[0]}x"
        f"{contract.input_size[1]}), cameras: {cams}"
    )
    m = cfg.mqtt
    print(
        f"  mqtt: on, {m.host}:{m.port}, topics {m.topic_prefix}/{cfg.device_id}/..., Home "
        f"Assistant discovery under {m.discovery_prefix}/"
        if m.enabled
        else "  mqtt: off (give mqtt.host to send alerts over MQTT)"
    )
    for cam in cfg.enabled_cameras():
        d = cfg.detection_for(cam)
        threshold, confirm_s = camera_operating_point(cfg, contract, cam)
        latch = f"latched until acknowledged or {d.clear_after_s:g} s" if d.latch else "unlatched"
        zones = "".join(f", zone {z.name} ({z.kind})" for z in cam.zones)
        snap = f"on ({cfg.snapshots.mode})" if d.snapshot else "off"
        after = d.escalate_after_s
        escalate = f"escalation after {after:g} s down" if after else "no escalation"
        print(
            f"  {cam.name}: threshold {threshold:g}, confirm {confirm_s:g} s, "
            f"{latch}, {escalate}, snapshot {snap}{zones}"
        )
    c = cfg.clips
    if c.enabled:
        print(f"  clips: on ({c.mode}), {c.pre_s:g} s before to {c.post_s:g} s after each fall")
    person = cfg.person
    seq = person.sequence is not None
    centred = ", person-centred windows (edge_hf.crop)" if contract.crop != "full" else ""
    print(
        f"  person stage: on, {person.model} at {person.rate_hz:g} Hz, decision "
        f"{person.decision}{centred}"
        f"{f', learned pose head {person.head}' if person.head else ''}"
        f"{f', pose-sequence model {person.sequence} ({person.sequence_mode})' if seq else ''}"
        f", others present: {person.when_others_present}"
        if person.model is not None
        else "  person stage: off (give person.model to run the pose model beside the classifier)"
    )
    metrics = cfg.metrics
    print(f"  metrics: {f'on, {metrics.host}:{metrics.port}' if metrics.enabled else 'off'}")
    warning = capacity_warning(
        cfg.model.path.name, person.model is not None, len(cfg.enabled_cameras())
    )
    if warning:
        print(f"  {warning}")
    return 0


def doctor_command(args: argparse.Namespace) -> int:
    from edge_hf.daemon.doctor import doctor

    return doctor(Path(args.config), cameras=not args.no_cameras)


def run_command(args: argparse.Namespace) -> int:
    from edge_hf.daemon.app import run

    return run(Path(args.config), args.drain_s, args.statuses)


def replay_command(args: argparse.Namespace) -> int:
    from datetime import datetime

    from edge_hf.daemon.replay import REPLAY_STATE_DIR, ReplayRequest, replay

    if args.origin == "now":
        origin = time.time()
    elif args.origin == "epoch":
        origin = 0.0
    else:
        try:
            origin = datetime.fromisoformat(args.origin.replace("Z", "+00:00")).timestamp()
        except ValueError:
            raise UserError(
                f"--origin {args.origin!r}: use epoch, now or an ISO-8601 time"
            ) from None
    return replay(
        ReplayRequest(
            config=Path(args.config) if args.config else None,
            video=Path(args.video) if args.video else None,
            model=Path(args.model) if args.model else None,
            state_dir=REPLAY_STATE_DIR if args.state_dir is None else Path(args.state_dir),
            origin_unix=origin,
            timeline_png=Path(args.timeline_png) if args.timeline_png else None,
            hold_end_s=args.hold_end_s,
            publish=args.publish,
            explain=args.explain,
        )
    )


def calibrate_command(args: argparse.Namespace) -> int:
    from edge_hf.daemon.calibrate import calibrate, write_threshold, zones_text
    from edge_hf.daemon.config import load_config

    if (args.video is None) == (args.minutes is None):
        raise UserError("give --video FILE (a recording of normal activity) or --minutes N (live)")
    path = Path(args.config)
    cfg = load_config(path)
    videos = [Path(v) for v in args.video or []]
    result = calibrate(cfg, args.camera, videos, args.minutes or 0.0, args.margin, args.allow_lower)
    print(result.report())
    if args.write:
        write_threshold(path, args.camera, result.threshold)
        print(f"wrote cameras[{args.camera}].threshold = {result.threshold:.3f} to {path}")
    else:
        print(f"add to camera {args.camera}: threshold: {result.threshold:.3f}  (or use --write)")
    if result.zones:  # printed, never written: a zone deserves a look before it silences falls
        print(zones_text(args.camera, args.config, result.zones))
    return 0


def zones_command(args: argparse.Namespace) -> int:
    from edge_hf.daemon.config import load_config
    from edge_hf.daemon.zonepicture import zones_picture

    cfg = load_config(Path(args.config))
    video = Path(args.video) if args.video else None
    print(zones_picture(cfg, args.camera, Path(args.out), video, args.at_s))
    return 0


def alerts_command(args: argparse.Namespace) -> int:
    import signal
    import threading

    from edge_hf.daemon.alerts import watch_alerts
    from edge_hf.daemon.config import MqttConfig, load_config

    if args.config:
        cfg = load_config(Path(args.config))
        mqtt_cfg, device = cfg.mqtt, args.device or cfg.device_id
    else:
        mqtt_cfg, device = MqttConfig(host=args.host, port=args.port), args.device or "+"
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"listening on {mqtt_cfg.host}:{mqtt_cfg.port} for {mqtt_cfg.topic_prefix}/{device}/...",
          file=sys.stderr)  # fmt: skip
    return watch_alerts(mqtt_cfg, device, stop=stop)
