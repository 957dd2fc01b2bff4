"""fp32 vs int8 (QDQ) inference on this CPU, side by side in one run (interleaved repeats).

    python benchmarks/int8_speed.py FP32.onnx INT8.onnx [--batches 1 8] [--repeats 200]

One ONNX Runtime CPU session per model (one intra-op thread, as the daemon runs it); random
windows of the model's input shape; prints median ms per batch and the speed-up, as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from edge_hf.bench.capture import interleaved_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("fp32")
    p.add_argument("int8")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=200)
    a = p.parse_args()
    speed = interleaved_ms({"fp32": Path(a.fp32), "int8": Path(a.int8)}, a.batches, a.repeats)
    for row in speed.values():
        row["speedup"] = round(row["fp32_ms"] / row["int8_ms"], 2)
    print(json.dumps({"model": Path(a.fp32).name, **speed}))


if __name__ == "__main__":
    main()
