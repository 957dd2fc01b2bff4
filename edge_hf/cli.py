"""The `edge-hf` command line: one sub-command per job, user errors as one line and exit code 2."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
import typing
from collections.abc import Sequence
from pathlib import Path

from edge_hf import __version__
from edge_hf.errors import UserError


def _cmd_window(args: argparse.Namespace) -> int:
    from edge_hf.hyperframe import suggest_window

    try:
        t = suggest_window(args.action_s, args.interval_ms / 1000.0)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    span = (t - 1) * args.interval_ms
    print(f"T={t} (window spans {span:.0f} ms at {args.interval_ms:g} ms per step)")
    return 0


def _cmd_synth(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from edge_hf.synth import CLASSES, generate, write_demo_clips

    if args.demo:
        for path in write_demo_clips(Path(args.out), args.fps or 15.0):
            print(f"wrote {path}")
        return 0
    args.fps = args.fps or 30.0
    classes = tuple(args.classes or CLASSES)
    bad = sorted(set(classes) - set(CLASSES))
    if bad:
        raise UserError(f"--classes {bad}: unknown; choose from {', '.join(CLASSES)}")
    if args.clips < 1 or args.fps <= 0:
        raise UserError("--clips must be >= 1 and --fps > 0")
    with tqdm(total=args.clips * len(classes), desc="synth", unit="clip") as bar:
        manifest = generate(
            Path(args.out),
            args.clips,
            args.fps,
            seed=args.seed,
            width=args.width,
            height=args.height,
            classes=classes,
            progress=lambda done, total: bar.update(done - bar.n),
        )
    print(f"wrote {args.clips * len(classes)} clips and {manifest}")
    return 0


def _train_config(args: argparse.Namespace) -> typing.Any:
    from edge_hf.train import TrainConfig

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**values)


def _cmd_train(args: argparse.Namespace) -> int:
    from edge_hf.train import train

    result = train(_train_config(args))
    r = result.best_report
    print(
        f"best epoch {result.best_epoch}: val accuracy {r['accuracy']:.3f}, "
        f"fall F1 {r['fall_f1']:.3f} -> {result.best_checkpoint}"
    )
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from edge_hf.evaluate import evaluate, report_text

    report = evaluate(
        Path(args.model),
        Path(args.data),
        shuffle_time=args.shuffle_time,
        batch_size=args.batch_size,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        confusion_png=Path(args.confusion_png) if args.confusion_png else None,
        background_label=args.background_label,
    )
    print(json.dumps(report) if args.json else report_text(report))
    return 0


def _cmd_diagnose(args: argparse.Namespace) -> int:
    from edge_hf.evaluate import diagnose, diagnose_table

    cfg = _train_config(args)
    results = diagnose(cfg, Path(args.test_data), Path(cfg.out))
    print(diagnose_table(results))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from edge_hf.export import ExportError, export_onnx

    try:
        contract = export_onnx(Path(args.checkpoint), Path(args.out), atol=args.atol)
    except ExportError as exc:
        print(f"edge-hf export: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {contract.backbone} T={contract.window} classes={contract.classes}")
    return 0


def _load_checked(path: str) -> typing.Any:
    """Config plus the model's contract check: what `check` validates and `run` starts from."""
    from edge_hf.config import check_against_model, load_config
    from edge_hf.contract import read_contract

    cfg = load_config(Path(path))
    contract = read_contract(cfg.model.path)
    check_against_model(cfg, contract, path)
    return cfg, contract


def _cmd_bench(args: argparse.Namespace) -> int:
    from edge_hf.bench_report import SECTIONS, run_bench

    run_bench(
        Path(args.out),
        Path(args.model),
        Path(args.video) if args.video else None,
        args.sections or SECTIONS,
        args.seconds,
        args.soak_s,
        args.soak_cameras,
        args.repeats,
        args.quick,
    )
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    cfg, contract = _load_checked(args.config)
    cams = ", ".join(f"{c.name}{'' if c.enabled else ' (disabled)'}" for c in cfg.cameras)
    print(
        f"{args.config}: OK - device {cfg.device_id}, model {cfg.model.path.name} "
        f"(T={contract.window}, {contract.interval_ms:g} ms, {contract.input_size[0]}x"
        f"{contract.input_size[1]}), cameras: {cams}, mqtt {'on' if cfg.mqtt.enabled else 'off'}"
    )
    return 0


def _install_stop_handlers(stop: typing.Any) -> None:
    import signal

    def handler(signum: int, _frame: object) -> None:
        logging.getLogger("edge_hf").info("signal %d: stopping", signum)
        stop.set()  # only a flag: the loops notice it within their wait timeouts

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _make_sink(cfg: typing.Any, statuses: bool = False) -> typing.Any:
    """JSON lines on stdout, plus the MQTT publisher when `mqtt.enabled`."""
    from edge_hf.sinks import JsonLinesSink, TeeSink

    lines = JsonLinesSink(statuses=statuses)
    if not cfg.mqtt.enabled:
        return lines
    from edge_hf.mqtt import MqttSink

    cams = [c.name for c in cfg.enabled_cameras()]
    mqtt = MqttSink(cfg.mqtt, cfg.device_id, cams, cfg.state_dir, cfg.model.path.name)
    return TeeSink(lines, mqtt)


def _cmd_run(args: argparse.Namespace) -> int:
    from edge_hf.config import ensure_state_dir
    from edge_hf.pipeline import Pipeline
    from edge_hf.sdnotify import Notifier

    cfg, _ = _load_checked(args.config)
    ensure_state_dir(cfg)
    notifier = Notifier()
    pipeline = Pipeline(
        cfg, _make_sink(cfg, args.statuses), config_name=args.config, notifier=notifier
    )
    _install_stop_handlers(pipeline.stop)
    metrics = None
    if cfg.metrics.enabled:
        from edge_hf.metrics_export import Metrics

        metrics = Metrics(pipeline)
        try:
            metrics.serve(cfg.metrics.host, cfg.metrics.port)
        except OSError as exc:
            raise UserError(
                f"metrics.port {cfg.metrics.port}: cannot listen on {cfg.metrics.host} "
                f"({exc.strerror}); pick a free port"
            ) from None
        pipeline.metrics = metrics
    try:
        pipeline.start()
        pipeline.run(drain_s=args.drain_s)
    finally:
        if metrics is not None:
            metrics.close()
    return 0


def _replay_config(args: argparse.Namespace) -> typing.Any:
    from edge_hf.config import Config, load_config

    if args.config:
        cfg = load_config(Path(args.config))
        if args.model:
            cfg = cfg.model_copy(
                update={"model": cfg.model.model_copy(update={"path": Path(args.model)})}
            )
        return cfg
    if not (args.model and args.video):
        raise UserError("give --config FILE, or both --model and --video")
    return Config.model_validate(
        {
            "device_id": "replay",
            "model": {"path": args.model, "providers": ["cpu"]},
            "cameras": [
                {
                    "name": Path(args.video).stem.replace(".", "_")[:64] or "video",
                    "source": args.video,
                }
            ],
            "state_dir": args.state_dir,
        }
    )


def _cmd_replay(args: argparse.Namespace) -> int:
    from datetime import datetime

    from edge_hf.pipeline import Pipeline, score_timeline_png
    from edge_hf.sources import SourceError

    cfg = _replay_config(args)
    if args.video and not Path(args.video).is_file():
        raise UserError(f"--video {args.video}: no such file")
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
    from edge_hf.config import ensure_state_dir

    ensure_state_dir(cfg)
    if args.video:  # the replayed camera takes the video's place in topics and events
        cfg = cfg.model_copy(update={"cameras": cfg.enabled_cameras()[:1]})
    pipeline = Pipeline(
        cfg, _make_sink(cfg), source_override=args.video, config_name=args.config or "replay"
    )
    try:
        pipeline.replay(origin)
    except SourceError as exc:
        raise UserError(str(exc)) from None
    if args.timeline_png:
        score_timeline_png(Path(args.timeline_png), pipeline.cameras, cfg.model.threshold)
    return 0


def _cmd_alerts(args: argparse.Namespace) -> int:
    import threading

    from edge_hf.config import MqttConfig, load_config
    from edge_hf.mqtt import watch_alerts

    if args.config:
        cfg = load_config(Path(args.config))
        mqtt_cfg, device = cfg.mqtt, args.device or cfg.device_id
    else:
        mqtt_cfg, device = MqttConfig(host=args.host, port=args.port), args.device or "+"
    stop = threading.Event()
    _install_stop_handlers(stop)
    print(f"listening on {mqtt_cfg.host}:{mqtt_cfg.port} for {mqtt_cfg.topic_prefix}/{device}/...",
          file=sys.stderr)  # fmt: skip
    return watch_alerts(mqtt_cfg, device, stop=stop)


def _add_dataclass_args(p: argparse.ArgumentParser, cls: type, skip: set[str]) -> None:
    """One --option per field of a config dataclass, typed from its default."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        default: typing.Any = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        hint = hints[f.name]
        if hint is bool:
            p.add_argument(flag, action="store_true", default=default)
        elif typing.get_origin(hint) is list:
            p.add_argument(flag, nargs="+", default=default, metavar="X")
        elif default is dataclasses.MISSING:
            p.add_argument(flag, required=True)
        else:
            kind = type(default) if default is not None else str
            p.add_argument(flag, type=kind, default=default, help=f"(default: {default})")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    from edge_hf.train import TrainConfig

    parser = argparse.ArgumentParser(
        prog="edge-hf", description="Real-time fall detection with hyperframes."
    )
    parser.add_argument("--version", action="version", version=f"edge-hf {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)  # so --log-level also works after COMMAND
    common.add_argument("--log-level", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    p = sub.add_parser(
        "window", parents=[common], help="suggest the window length T for an action's duration"
    )
    p.add_argument("--action-s", type=float, required=True, help="typical action duration (s)")
    p.add_argument("--interval-ms", type=float, default=100.0, help="sampling interval (ms)")
    p.set_defaults(func=_cmd_window)

    p = sub.add_parser(
        "synth", parents=[common], help="generate synthetic action videos and a manifest"
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--clips", type=int, default=20, help="clips per class")
    p.add_argument("--fps", type=float, default=None, help="frame rate (default 30; demo 15)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--demo", action="store_true", help="write the two demo scenes instead")
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--classes", nargs="+", help="subset of the classes (default: all)")
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("train", parents=[common], help="train a hyperframe classifier")
    _add_dataclass_args(p, TrainConfig, skip=set())
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "eval", parents=[common], help="clip-level evaluation of a checkpoint or ONNX model"
    )
    p.add_argument("--model", required=True, help="best.pt from train, or an exported .onnx")
    p.add_argument("--data", required=True, help="manifest CSV or data folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--shuffle-time", action="store_true", help="shuffle frame blocks (control)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--cache-dir")
    p.add_argument("--confusion-png", help="also write the confusion matrix as a PNG")
    p.add_argument("--background-label", help="score the time before each segment as this class")
    p.set_defaults(func=_cmd_eval)

    p = sub.add_parser(
        "diagnose", parents=[common], help="hyperframe vs T=1 vs time-shuffled, same budget"
    )
    p.add_argument("--test-data", required=True, help="held-out clips (ideally another fps)")
    _add_dataclass_args(p, TrainConfig, skip={"shuffle_time"})
    p.set_defaults(func=_cmd_diagnose, shuffle_time=False)

    p = sub.add_parser(
        "check", parents=[common], help="validate a daemon config (and its model) without starting"
    )
    p.add_argument("--config", required=True)
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser(
        "run", parents=[common], help="the daemon: cameras -> hyperframes -> model -> fall events"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--drain-s", type=float, default=5.0, help="shutdown budget (s)")
    p.add_argument("--statuses", action="store_true", help="also print camera status changes")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "replay",
        parents=[common],
        help="the daemon's pipeline over a video file, as fast as possible",
    )
    p.add_argument("--config", help="daemon config (its first enabled camera is replayed)")
    p.add_argument("--video", help="the video file (overrides the camera's source)")
    p.add_argument("--model", help="ONNX model (overrides model.path; enough with --video)")
    p.add_argument("--state-dir", default="/tmp/edge-hf-replay", help="without --config")
    p.add_argument("--timeline-png", help="plot the score timeline to this PNG")
    p.add_argument(
        "--origin",
        default="epoch",
        help="event times: media time after epoch (default), now, or ISO",
    )
    p.set_defaults(func=_cmd_replay)

    p = sub.add_parser(
        "alerts", parents=[common], help="print fall alerts from the broker (de-duplicated)"
    )
    p.add_argument("--config", help="take broker settings and device_id from the daemon config")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=1883)
    p.add_argument("--device", help="only this device_id (default: all)")
    p.set_defaults(func=_cmd_alerts)

    p = sub.add_parser(
        "export", parents=[common], help="export a checkpoint to ONNX with its metadata, verified"
    )
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True, help="the .onnx file to write")
    p.add_argument("--atol", type=float, default=1e-3, help="largest allowed logit difference")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser(
        "bench",
        parents=[common],
        help="measure window preparation, inference, cameras per machine, alert latency and RSS",
    )
    p.add_argument("--out", default="bench-results", help="folder for bench.json and bench.md")
    p.add_argument(
        "--model",
        default="models/fall-synth-mobilenet_v3_small-t3.onnx",
        help="the ONNX model to measure (default: the shipped synthetic model)",
    )
    p.add_argument("--video", help="camera clip for the capacity runs (default: a generated one)")
    p.add_argument(
        "--sections", nargs="+", help="prep, inference, capacity, latency (default: all)"
    )
    p.add_argument("--seconds", type=float, default=10.0, help="length of each capacity run")
    p.add_argument("--soak-s", type=float, default=600.0, help="length of the latency/RSS run")
    p.add_argument("--soak-cameras", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7, help="timing repeats (median and IQR)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and batches (smoke test)")
    p.set_defaults(func=_cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `edge-hf` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"edge-hf {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the user gave that cannot be read or written
        what = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
        print(
            f"edge-hf {args.command}: error: {what} (check the path and permissions)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
