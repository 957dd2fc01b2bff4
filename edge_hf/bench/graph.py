"""One network against the three-network ensemble it replaced, and static against run-time padding:
ONNX node counts and CPU time per window, side by side in one run (#33).

The networks are the shipped real model's shape (EfficientNet-Lite0, T=3, 160x160, classes
adl/down/falling) with random weights (speed and graph size do not depend on the weights),
exported by `export_onnx` as `edge-hf export` does: one checkpoint, or three averaged into one
model. Timed with ONNX Runtime on the CPU, one thread and all cores, the four graphs interleaved
within each repeat so that a noisy neighbour hits them alike.
"""

from __future__ import annotations

import collections
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edge_hf.core.contract import INPUT_NAME
from edge_hf.core.runtime import open_session

OPS = ("Shape", "Ceil", "Cast", "Pad", "Conv")
GRAPHS = ("one, static", "one, run-time padding", "three, static", "three, run-time padding")


def _export_all(work: Path, size: int) -> dict[str, Path]:
    from edge_hf.training.export import export_onnx
    from edge_hf.training.models import build_model
    from edge_hf.training.train import TrainConfig, save_checkpoint

    classes = ["adl", "down", "falling"]
    cfg = TrainConfig(data="none", backbone="efficientnet_lite0", input_size=size,
                      classes=classes, fall_class="falling", down_class="down")  # fmt: skip
    # Three different members (seeds 0-2): ONNX Runtime merges identical subgraphs (common
    # subexpression elimination), so three copies of one checkpoint would run as one.
    checkpoints = []
    for seed in range(3):
        checkpoints.append(work / f"lite0_{seed}.pt")
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            save_checkpoint(checkpoints[-1], build_model(cfg.backbone, 3, 3), cfg, classes)
    paths = {}
    for name in GRAPHS:
        members = checkpoints if name.startswith("three") else checkpoints[:1]
        paths[name] = work / (name.replace(", ", "-").replace(" ", "_") + ".onnx")
        export_onnx(members, paths[name], static_padding=name.endswith("static"))
    return paths


def one_vs_three(work: Path, repeats: int = 7, size: int = 160) -> dict[str, Any]:
    """Node counts and per-window CPU time (batch 1 and 8; 1 thread and all cores) of one network
    and the three-network ensemble, each with static and run-time padding."""
    import onnx

    work.mkdir(parents=True, exist_ok=True)
    paths = _export_all(work, size)
    nodes = {}
    for name, path in paths.items():
        ops = collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)
        nodes[name] = {"total": sum(ops.values()), **{op: ops.get(op, 0) for op in OPS}}
    rng = np.random.default_rng(0)
    timing: dict[str, dict[str, float]] = {}
    for threads in (1, 0):
        sessions = {name: open_session(path, threads=threads) for name, path in paths.items()}
        for batch in (1, 8):
            x = rng.standard_normal((batch, 9, size, size)).astype(np.float32)
            runs: dict[str, list[float]] = {name: [] for name in sessions}
            for s in sessions.values():
                s.run(None, {INPUT_NAME: x})  # warm-up
            for _ in range(repeats):
                for name, s in sessions.items():  # interleaved
                    t0 = time.perf_counter()
                    s.run(None, {INPUT_NAME: x})
                    runs[name].append((time.perf_counter() - t0) * 1000 / batch)
            key = f"batch {batch}, {'1 thread' if threads == 1 else 'all cores'}"
            timing[key] = {name: round(statistics.median(v), 2) for name, v in runs.items()}
    return {"size": size, "nodes": nodes, "ms_per_window": timing}
