"""Two ONNX models of one input shape on this CPU, side by side in one run (interleaved repeats):
fp32 vs int8, or one model vs an ensemble of it.

    python benchmarks/onnx_speed.py A.onnx B.onnx [--names fp32 int8] [--batches 1 8]
                                    [--repeats 200]

One ONNX Runtime CPU session per model (one intra-op thread, as the daemon runs it); random
windows of the first model's input shape; prints median ms per batch and A's time over B's
(`a_over_b`: B's speed-up, or below 1 its extra cost), as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edge_hf.bench.capture import interleaved_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--names", nargs=2, default=["fp32", "int8"], help="labels of A and B")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=200)
    args = p.parse_args()
    na, nb = args.names
    if na == nb:
        raise SystemExit(f"--names {na} {nb}: give two different labels")
    speed = interleaved_ms({na: Path(args.a), nb: Path(args.b)}, args.batches, args.repeats)
    for row in speed.values():
        row["a_over_b"] = round(row[f"{na}_ms"] / row[f"{nb}_ms"], 2)
    print(json.dumps({"a": args.a, "b": args.b, **speed}))  # paths: fold models are all model.onnx


if __name__ == "__main__":
    main()
