"""The `edge-hf` command line: one sub-command per job, user errors as one line and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="edge-hf", description="Real-time fall detection with hyperframes."
    )
    parser.add_argument("--version", action="version", version=f"edge-hf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("window", help="suggest the window length T for an action's duration")
    p.add_argument("--action-s", type=float, required=True, help="typical action duration (s)")
    p.add_argument("--interval-ms", type=float, default=100.0, help="sampling interval (ms)")
    p.set_defaults(func=_cmd_window)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `edge-hf` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as exc:
        print(f"edge-hf {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
