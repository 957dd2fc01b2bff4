"""The `edge-hf` command line: one sub-command per job, user errors as one line and exit code 2."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import sys
import typing
from collections.abc import Sequence
from pathlib import Path

from edge_hf import __version__
from edge_hf.core.errors import UserError


def _cmd_bench(args: argparse.Namespace) -> int:
    from edge_hf.bench.runner import SECTIONS, run_bench

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
        Path(args.score_model),
        Path(args.score_data),
        Path(args.readme) if args.readme else None,
    )
    return 0


def _command(module: str, name: str) -> typing.Callable[[argparse.Namespace], int]:
    """Function `name` of `module` for a sub-command, imported when it runs (a command loads
    only its own subsystem)."""

    def call(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(module), name)(args))

    call.__name__ = call.__qualname__ = name  # (what the parser's `func` says it runs)
    return call


def _training(name: str) -> typing.Callable[[argparse.Namespace], int]:
    return _command("edge_hf.training.commands", name)


def _daemon(name: str) -> typing.Callable[[argparse.Namespace], int]:
    return _command("edge_hf.daemon.commands", name)


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
    parser = argparse.ArgumentParser(
        prog="edge-hf", description="Real-time fall detection with hyperframes."
    )
    parser.add_argument("--version", action="version", version=f"edge-hf {__version__}")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = argparse.ArgumentParser(add_help=False)  # so --log-level also works after COMMAND
    common.add_argument("--log-level", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    _training_commands(sub, common)
    _daemon_commands(sub, common)
    _bench_command(sub, common)
    return parser


def _training_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """window, synth, train, eval, diagnose, export, card."""
    from edge_hf.training.config import TrainConfig

    p = sub.add_parser(
        "window", parents=[common], help="suggest the window length T for an action's duration"
    )
    p.add_argument("--action-s", type=float, required=True, help="typical action duration (s)")
    p.add_argument("--interval-ms", type=float, default=100.0, help="sampling interval (ms)")
    p.set_defaults(func=_training("window"))

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
    p.set_defaults(func=_training("synth"))

    p = sub.add_parser("train", parents=[common], help="train a hyperframe classifier")
    _add_dataclass_args(p, TrainConfig, skip=set())
    p.set_defaults(func=_training("train"))

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
    p.set_defaults(func=_training("evaluate"))

    p = sub.add_parser(
        "diagnose", parents=[common], help="hyperframe vs T=1 vs time-shuffled, same budget"
    )
    p.add_argument("--test-data", required=True, help="held-out clips (ideally another fps)")
    _add_dataclass_args(p, TrainConfig, skip={"shuffle_time"})
    p.set_defaults(func=_training("diagnose"), shuffle_time=False)

    p = sub.add_parser(
        "export", parents=[common], help="export a checkpoint to ONNX with its metadata, verified"
    )
    p.add_argument(
        "--checkpoint", required=True, nargs="+",
        help="best.pt from train; several (one recipe, other seeds): one model averaging their "
        "probabilities",
    )  # fmt: skip
    p.add_argument("--out", required=True, help="the .onnx file to write")
    p.add_argument("--atol", type=float, default=1e-3, help="largest allowed logit difference")
    p.add_argument("--threshold", type=float, help="operating point: fall threshold it ships with")
    p.add_argument("--confirm-s", type=float, help="operating point: detection.confirm_s")
    p.add_argument(
        "--mirrored", action="store_true",
        help="score each window also mirrored left-right and average (twice the compute)",
    )  # fmt: skip
    p.add_argument(
        "--dynamic-padding", action="store_true",
        help="keep TensorFlow-'same' padding computed at run time (default: fixed for the "
        "model's input size, a simpler graph with the same outputs)",
    )  # fmt: skip
    p.add_argument(
        "--int8", action="store_true",
        help="write an int8 QDQ model (ONNX Runtime static quantisation; --checkpoint may then "
        "also be an exported fp32 .onnx)",
    )  # fmt: skip
    p.add_argument("--calibration", help="--int8: clips (folder or manifest) to calibrate on")
    p.add_argument("--calibration-windows", type=int, default=300, help="--int8: at most this many")
    p.add_argument("--cache-dir", help="decoded-clip cache for --calibration")
    p.set_defaults(func=_training("export"))

    p = sub.add_parser(
        "card", parents=[common], help="write a model card from an eval report and a table"
    )
    p.add_argument("--model", required=True, help="the exported .onnx")
    p.add_argument("--out", required=True, help="the Markdown file to write")
    p.add_argument("--train-command", required=True, help="how the model was made")
    p.add_argument("--data-note", required=True, help="what it was trained on")
    p.add_argument("--test-json", help="an `edge-hf eval --json` report on held-out clips")
    p.add_argument("--test-note", required=True, help="what the test numbers mean")
    p.add_argument("--diagnose-md", help="a Markdown table to include")
    p.add_argument("--diagnose-title", default="Diagnose (same data and budget)")
    p.set_defaults(func=_training("card"))


def _daemon_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """check, doctor, run, replay, calibrate, zones, alerts."""
    p = sub.add_parser(
        "check", parents=[common], help="validate a daemon config (and its model) without starting"
    )
    p.add_argument("--config", required=True)
    p.set_defaults(func=_daemon("check_command"))

    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="on the box: providers in use, TensorRT cache, GStreamer, cameras, MQTT, memory",
    )
    p.add_argument("--config", required=True)
    p.add_argument("--no-cameras", action="store_true", help="skip opening the cameras")
    p.set_defaults(func=_daemon("doctor_command"))

    p = sub.add_parser(
        "run", parents=[common], help="the daemon: cameras -> hyperframes -> model -> fall events"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--drain-s", type=float, default=5.0, help="shutdown budget (s)")
    p.add_argument("--statuses", action="store_true", help="also print camera status changes")
    p.set_defaults(func=_daemon("run_command"))

    p = sub.add_parser(
        "replay",
        parents=[common],
        help="the daemon's pipeline over a video file, as fast as possible",
    )
    p.add_argument("--config", help="daemon config (its first enabled camera is replayed)")
    p.add_argument("--video", help="the video file (overrides the camera's source)")
    p.add_argument("--model", help="ONNX model (overrides model.path; enough with --video)")
    p.add_argument(
        "--state-dir",
        help="the replay's own state (default: ~/.cache/edge-hf/replay, not world-writable "
        "/tmp); never the config's state_dir, which a running daemon may hold",
    )
    p.add_argument(
        "--publish", action="store_true",
        help="also publish events to the config's MQTT broker (off: a replayed fall must never "
        "raise a live alarm)",
    )  # fmt: skip
    p.add_argument(
        "--timeline-png",
        help="plot every signal that fed the decision (classifier, person stage, gates) to "
        "this PNG",
    )
    p.add_argument(
        "--explain", action="store_true",
        help="print, per second, every signal that fed the decision and why it did or did not "
        "alarm (one line per decision, the verdict last)",
    )  # fmt: skip
    p.add_argument(
        "--hold-end-s", type=float, default=0.0,
        help="keep the last frame on for this long (a clip cut right after a fall)",
    )  # fmt: skip
    p.add_argument(
        "--origin",
        default="epoch",
        help="event times: media time after epoch (default), now, or ISO",
    )
    p.set_defaults(func=_daemon("replay_command"))

    p = sub.add_parser(
        "calibrate",
        parents=[common],
        help="a camera's threshold under which normal activity at its site raises no event",
    )
    p.add_argument("--config", required=True)
    p.add_argument("--camera", required=True, help="the camera's name in the config")
    p.add_argument(
        "--video", nargs="+", help="recordings of normal activity from that camera (each silent)"
    )
    p.add_argument("--minutes", type=float, help="or watch the live camera this long")
    p.add_argument("--margin", type=float, default=0.05, help="added to the quiet point")
    p.add_argument("--write", action="store_true", help="write cameras[].threshold into the file")
    p.add_argument(
        "--allow-lower",
        action="store_true",
        help="allow a threshold below the model's operating point (normal activity alone does "
        "not show how falls score)",
    )
    p.set_defaults(func=_daemon("calibrate_command"))

    p = sub.add_parser(
        "zones", parents=[common], help="draw a camera's zones on a frame of its picture (PNG)"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--camera", required=True, help="the camera's name in the config")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--video", help="a recording (or picture) of that camera instead of its source")
    p.add_argument("--at-s", type=float, default=0.0, help="files: the frame this far in (s)")
    p.set_defaults(func=_daemon("zones_command"))

    p = sub.add_parser(
        "alerts", parents=[common], help="print fall alerts from the broker (de-duplicated)"
    )
    p.add_argument("--config", help="take broker settings and device_id from the daemon config")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=1883)
    p.add_argument("--device", help="only this device_id (default: all)")
    p.set_defaults(func=_daemon("alerts_command"))


def _bench_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """bench."""
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
        "--sections",
        nargs="+",
        help="prep, inference, capture, int8, capacity, latency (default: all)",
    )
    p.add_argument("--seconds", type=float, default=10.0, help="length of each capacity run")
    p.add_argument("--soak-s", type=float, default=600.0, help="length of the latency/RSS run")
    p.add_argument("--soak-cameras", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7, help="timing repeats (median and IQR)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and batches (smoke test)")
    p.add_argument(
        "--score-model", default="models/fall-real-efficientnet_lite0-t3.onnx",
        help="capture section: a real-footage model whose scores the resize rules are compared on",
    )  # fmt: skip
    p.add_argument(
        "--score-data", default="../shared/data/gmdcsa24",
        help="capture section: a folder of real .mp4 clips for that comparison (skipped if absent)",
    )  # fmt: skip
    p.add_argument("--readme", help="also paste the tables between this file's bench markers")
    p.set_defaults(func=_cmd_bench)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `edge-hf` console script."""
    args = build_parser().parse_args(argv)
    # FFmpeg and OpenCV print their own warnings straight to stderr ("[rtsp @ 0x…] method
    # OPTIONS failed"); the daemon says what failed in one line of its own. Set either variable
    # to see theirs again.
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
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
