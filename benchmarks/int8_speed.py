"""fp32 vs int8 (QDQ) inference on this CPU, side by side in one run (interleaved repeats).

    python benchmarks/int8_speed.py FP32.onnx INT8.onnx [--batches 1 8] [--repeats 200]

One ONNX Runtime CPU session per model (one intra-op thread, as the daemon runs it); random
windows of the model's input shape; prints median ms per batch and the speed-up, as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from edge_hf.core.contract import INPUT_NAME
from edge_hf.core.runtime import contract_of, open_session


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("fp32")
    p.add_argument("int8")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeats", type=int, default=200)
    a = p.parse_args()
    paths = {"fp32": Path(a.fp32), "int8": Path(a.int8)}
    sessions = {k: open_session(v, threads=1) for k, v in paths.items()}
    c = contract_of(sessions["fp32"], paths["fp32"])
    h, w = c.input_size
    out: dict[str, object] = {"model": paths["fp32"].name}
    rng = np.random.default_rng(0)
    for b in a.batches:
        x = rng.standard_normal((b, 3 * c.window * c.volumes, h, w)).astype(np.float32)
        times: dict[str, list[float]] = {k: [] for k in sessions}
        for s in sessions.values():  # warm-up
            for _ in range(5):
                s.run(None, {INPUT_NAME: x})
        for _ in range(a.repeats):
            for k, s in sessions.items():  # interleaved: the machine's noise hits both alike
                t0 = time.perf_counter()
                s.run(None, {INPUT_NAME: x})
                times[k].append((time.perf_counter() - t0) * 1000)
        med = {k: statistics.median(v) for k, v in times.items()}
        out[f"batch{b}"] = {
            "fp32_ms": round(med["fp32"], 3),
            "int8_ms": round(med["int8"], 3),
            "speedup": round(med["fp32"] / med["int8"], 2),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
