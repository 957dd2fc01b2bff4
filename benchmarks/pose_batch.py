"""#40 item 2: the pose model on 1, 2 and 4 frames of 256x256, one run for all of them (the batched
file, `make pose-batch`) against one run a frame (the shipped file), side by side in one run.

    python benchmarks/pose_batch.py [--batched FILE] [--repeats 100] [--threads 1 2]
                                    [--out benchmarks/results/pose/batch.md]

ONNX Runtime's CPU provider, sessions opened as the daemon opens them (`open_session`, no
spinning), 1 and 2 intra-op threads; real frames (vtest.avi's centre squares, letterboxed as the
person stage does) where ../shared/data has them, else random pixels; every repeat times each
way in turn (the order alternating), so the machine's noise hits all alike; medians of ms per
frame. Without --batched, the batched file is made from the shipped one in a temporary folder.
Writes a table (markdown) and its numbers (JSON, beside it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from edge_hf.core.pose import POSE_MODEL, letterbox
from edge_hf.core.runtime import open_session

ROOT = Path(__file__).resolve().parents[1]

VTEST = ROOT.parent / "shared" / "data" / "capture" / "vtest.avi"


def frames(n: int) -> tuple[np.ndarray, str]:
    """`n` frames (n, 256, 256, 3) int32 and where they come from."""
    import cv2

    cap = cv2.VideoCapture(str(VTEST))
    out = []
    while cap.isOpened() and len(out) < n:
        ok, frame = cap.read()
        if not ok:
            break
        h, w = frame.shape[:2]
        x = (w - h) // 2
        rgb = cv2.cvtColor(frame[:, x : x + h], cv2.COLOR_BGR2RGB)
        out.append(letterbox(rgb, 256)[0])
        for _ in range(20):  # a frame every 2 s
            cap.grab()
    cap.release()
    if len(out) == n:
        return np.stack(out).astype(np.int32), "vtest.avi's centre squares, 256x256"
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (n, 256, 256, 3)).astype(np.int32), "random pixels, 256x256"


def measure(
    shipped: Path, batched: Path, x: np.ndarray, batches: list[int], threads: int, repeats: int
) -> list[dict[str, float]]:
    one, many = open_session(shipped, threads=threads), open_session(batched, threads=threads)
    for _ in range(3):  # warm-up
        for n in batches:
            many.run(None, {"input": x[:n]})
            one.run(None, {"input": x[:1]})
    times: dict[tuple[str, int], list[float]] = {}

    def seq(n: int) -> None:
        for i in range(n):
            one.run(None, {"input": x[i : i + 1]})

    def bat(n: int) -> None:
        many.run(None, {"input": x[:n]})

    for r in range(repeats):
        for n in batches:
            ways = [("one_by_one", seq), ("batched", bat)]
            for name, way in ways if r % 2 else ways[::-1]:
                t0 = time.perf_counter()
                way(n)
                times.setdefault((name, n), []).append((time.perf_counter() - t0) * 1000 / n)
    rows = []
    for n in batches:
        a, b = (statistics.median(times[(k, n)]) for k in ("one_by_one", "batched"))
        # each repeat's own ratio (the two ways timed back to back): less hit by the load's swings
        paired = [
            y / x for x, y in zip(times[("one_by_one", n)], times[("batched", n)], strict=True)
        ]
        q1, mid, q3 = statistics.quantiles(paired, n=4)
        rows.append({"threads": threads, "frames": n, "one_by_one_ms": round(a, 2),
                     "batched_ms": round(b, 2), "ratio": round(b / a, 3),
                     "paired_ratio": [round(q1, 3), round(mid, 3), round(q3, 3)]})  # fmt: skip
    return rows


def kernels_ms(path: Path, x: np.ndarray, runs: int = 10) -> dict[str, float]:
    """ms per frame of the whole run, the convolutions and the post-processing (the Scan) of the
    batched file on all of `x` at once (ONNX Runtime's profiler, one thread)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = str(Path(tmp) / "profile")
        session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        for _ in range(runs):
            session.run(None, {"input": x})
        events = json.loads(Path(session.end_profiling()).read_text())
    total = {"run": 0.0, "Conv": 0.0, "Scan": 0.0}
    for e in events:
        if e.get("cat") == "Session" and e["name"] == "model_run":
            total["run"] += e["dur"]
        elif e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"].get("op_name")
            if op in total:
                total[op] += e["dur"]
    return {k: round(v / 1000 / runs / len(x), 2) for k, v in total.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shipped", type=Path, default=ROOT / POSE_MODEL)
    p.add_argument("--batched", type=Path, help="default: made from --shipped, temporarily")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=100)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/pose/batch.md")
    args = p.parse_args()
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        batched = args.batched
        if batched is None:
            spec = importlib.util.spec_from_file_location(
                "batch_movenet", ROOT / "deploy" / "pose" / "batch_movenet.py"
            )
            assert spec is not None and spec.loader is not None
            batch_movenet = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(batch_movenet)
            batched = Path(tmp) / "batch.onnx"
            batch_movenet.make(args.shipped, batched)
        x, source = frames(max(args.batches))
        load0 = os.getloadavg()
        t0 = time.time()
        rows = [
            row
            for threads in args.threads
            for row in measure(args.shipped, batched, x, args.batches, threads, args.repeats)
        ]
        spent, load1 = time.time() - t0, os.getloadavg()
        kernels = {n: kernels_ms(batched, x[:n]) for n in (1, max(args.batches))}
    cpus = os.cpu_count()
    info = {
        "machine": f"{platform.processor() or platform.machine()}, {cpus} logical CPUs, shared",
        "onnxruntime": ort.__version__, "frames": source, "repeats": args.repeats,
        "load_average_1min": [round(load0[0], 2), round(load1[0], 2)], "seconds": round(spent),
        "rows": rows, "profile_ms_per_frame": kernels,
    }  # fmt: skip
    lines = [
        "# The pose model on a batch of frames: one run for all against one run a frame",
        "",
        "`python benchmarks/pose_batch.py` (#40 item 2): MoveNet MultiPose Lightning, the shipped "
        "file run once per frame against the file `make pose-batch` makes from it (a batch "
        "dimension; each frame's answer the same bit for bit) run once for all frames. "
        f"ONNX Runtime {ort.__version__}, CPU provider, sessions as the daemon opens them; "
        f"{source}; median ms per frame over {args.repeats} interleaved repeats.",
        "",
        f"Machine: {cpus} logical CPUs **shared with another benchmark running at the same time** "
        f"(1-min load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end): the "
        "absolute figures are slow and noisy; the ratios, from one run with every way timed in "
        "turn, are what to read.",
        "",
        "| threads | frames | one run a frame (ms/frame) | one run for all (ms/frame) | ratio "
        "| ratio per repeat: median [quartiles] |",
        "| --- | --- | --- | --- | --- | --- |",
        *(
            f"| {r['threads']} | {r['frames']} | {r['one_by_one_ms']:.1f} | "
            f"{r['batched_ms']:.1f} | {r['ratio']:.2f} | {r['paired_ratio'][1]:.2f} "
            f"[{r['paired_ratio'][0]:.2f}, {r['paired_ratio'][2]:.2f}] |"
            for r in rows
        ),
        "",
        "Where the time goes in the batched file (ONNX Runtime's profiler, 1 thread, ms per "
        "frame): "
        + "; ".join(
            f"{n} frame{'s' * (n > 1)} a run: {k['run']:.1f} in all, convolutions "
            f"{k['Conv']:.1f}, post-processing (Scan, frame by frame) {k['Scan']:.1f}"
            for n, k in kernels.items()
        )
        + ".",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    args.out.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
