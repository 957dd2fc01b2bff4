"""MoveNet MultiPose Lightning with a batch dimension, made from the shipped ONNX (no TensorFlow).

The shipped graph (tf2onnx) takes (1, H, W, 3) and its post-processing (heatmap peaks, TopK,
GatherND, Reshapes to (6, 17, 2) ...) is written for one frame. Its convolutional trunk, everything
up to the six head convolutions (centre heatmap, keypoint heatmaps, offsets and regressions, box
scale and offset), holds no shape constant that fixes the batch, and the post-processing reads
nothing else. So the batched graph is: the trunk as it is, on (N, H, W, 3), then a Scan over the
batch whose body is the shipped post-processing, node for node, on one frame's head outputs
(each unsqueezed back to a batch of 1): out comes (N, 6, 56). No weight is touched; on ONNX
Runtime's CPU provider each frame's answer is the shipped model's bit for bit (`--check`).

    python deploy/pose/batch_movenet.py [--src SHIPPED.onnx] [--out BATCHED.onnx]

The file records the name and sha256 of the file it was made from (metadata
`edge_hf.batched_from`, `edge_hf.batched_from_sha256`).
"""

from __future__ import annotations

import argparse
import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "person-movenet-multipose-lightning.onnx"
OUT = ROOT / "build" / "pose" / "person-movenet-multipose-lightning-batch.onnx"
OUTPUT = "output_0"
FRAME = "/frame"  # suffix of a head output's one-frame slice (the Scan body's input)
ONE = "/one"  # suffix of that slice as a batch of one (what the post-processing reads)
AXIS0 = "batch/axis0"


def head_outputs(graph: Any) -> list[str]:
    """The outputs of the last convolutions (each with no convolution after it), in graph order:
    where the trunk ends."""
    consumers = defaultdict(list)
    for node in graph.node:
        for name in node.input:
            consumers[name].append(node)
    memo: dict[str, bool] = {}

    def conv_after(tensor: str) -> bool:
        if tensor not in memo:
            memo[tensor] = any(
                n.op_type == "Conv" or any(conv_after(o) for o in n.output)
                for n in consumers[tensor]
            )
        return memo[tensor]

    return [n.output[0] for n in graph.node if n.op_type == "Conv" and not conv_after(n.output[0])]


def split(graph: Any) -> tuple[list[Any], list[Any], list[str]]:
    """(trunk nodes, post-processing nodes, head outputs): the trunk is every node the head
    outputs depend on. Raises ValueError if the post-processing reads anything of the trunk or
    the input besides the head outputs, or the trunk holds a node that fixes the batch."""
    ends = head_outputs(graph)
    producer = {o: n for n in graph.node for o in n.output}
    trunk: set[str] = set()
    todo = list(ends)
    while todo:
        node = producer.get(todo.pop())
        if node is not None and node.name not in trunk:
            trunk.add(node.name)
            todo.extend(node.input)
    pre = [n for n in graph.node if n.name in trunk]
    post = [n for n in graph.node if n.name not in trunk]
    fixes = [n.name for n in pre if n.op_type in ("Reshape", "Squeeze", "Unsqueeze", "Expand")]
    if fixes:
        raise ValueError(f"the trunk changes shapes with constants: {fixes}")
    made = {o for n in pre for o in n.output} | {i.name for i in graph.input}
    reads = {i for n in post for i in n.input if i in made}
    if reads - set(ends):
        raise ValueError(f"the post-processing reads {sorted(reads - set(ends))} of the trunk")
    return pre, post, ends


def batched(model: Any, source_name: str, source_sha256: str) -> Any:
    """`model` (the shipped MoveNet MultiPose, batch 1) with a batch dimension: its trunk on
    (N, H, W, 3), its post-processing in a Scan over the N frames; output (N, 6, 56)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    pre, post, ends = split(graph)
    trunk_reads = {i for n in pre for i in n.input}
    outer = [t for t in graph.initializer if t.name in trunk_reads]
    # (constants only the post-processing reads go into the body; the few both read stay outside,
    # where a subgraph may read them)
    inner = [t for t in graph.initializer if t.name not in trunk_reads]
    weight = {t.name: t for t in graph.initializer}
    producer = {o: n for n in pre for o in n.output}

    body_inputs, body_nodes = [], []
    for end in ends:
        channels = weight[producer[end].input[1]].dims[0]  # the head convolution's filters
        body_inputs.append(
            helper.make_tensor_value_info(end + FRAME, TensorProto.FLOAT, [channels, None, None])
        )
        body_nodes.append(
            helper.make_node(
                "Unsqueeze", [end + FRAME, AXIS0], [end + ONE], name=end + "/unsqueeze"
            )
        )
    for node in post:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [i + ONE if i in ends else i for i in copy.input]
        copy.output[:] = [o + ONE if o == OUTPUT else o for o in copy.output]
        body_nodes.append(copy)
    body_nodes.append(
        helper.make_node("Squeeze", [OUTPUT + ONE, AXIS0], [OUTPUT + FRAME], name="frame/squeeze")
    )
    axis0 = numpy_helper.from_array(np.array([0], np.int64), AXIS0)
    body = helper.make_graph(
        body_nodes, "one_frame", body_inputs,
        [helper.make_tensor_value_info(OUTPUT + FRAME, TensorProto.FLOAT, [6, 56])],
        initializer=[*inner, axis0],
    )  # fmt: skip
    scan = helper.make_node(
        "Scan", ends, [OUTPUT], name="per_frame", body=body, num_scan_inputs=len(ends)
    )
    inp = onnx.ValueInfoProto()
    inp.CopyFrom(graph.input[0])
    batch = inp.type.tensor_type.shape.dim[0]
    batch.Clear()
    batch.dim_param = "batch"
    out = helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", 6, 56])
    new = helper.make_model(
        helper.make_graph([*pre, scan], graph.name, [inp], [out], initializer=outer),
        opset_imports=list(model.opset_import), ir_version=model.ir_version,
        producer_name="edge_hf deploy/pose/batch_movenet.py",
        doc_string=f"{source_name} with a batch dimension (its trunk batched, its "
        "post-processing in a Scan over the frames); weights unchanged",
    )  # fmt: skip
    helper.set_model_props(
        new, {"edge_hf.batched_from": source_name, "edge_hf.batched_from_sha256": source_sha256}
    )
    onnx.checker.check_model(new)
    return new


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make(src: Path, out: Path) -> str:
    """Write the batched model of `src` to `out`; its sha256."""
    import onnx

    model = batched(onnx.load(str(src)), src.name, sha256(src))
    out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out))
    return sha256(out)


def check(batched_path: Path, src: Path) -> float:
    """The largest |difference| between the batched file on batches of 1 to 3 and the source
    file frame by frame (random frames of three sizes; ONNX Runtime, CPU)."""
    import numpy as np
    import onnxruntime as ort

    one, many = (
        ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        for p in (src, batched_path)
    )
    rng = np.random.default_rng(0)
    worst = 0.0
    for h, w in ((256, 256), (192, 256), (256, 160)):
        for n in (1, 2, 3):
            x = rng.integers(0, 256, (n, h, w, 3)).astype(np.int32)
            got = many.run(None, {"input": x})[0]
            want = np.concatenate([one.run(None, {"input": x[i : i + 1]})[0] for i in range(n)])
            worst = max(worst, float(np.abs(got - want).max()))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=SHIPPED, help=f"default {SHIPPED}")
    parser.add_argument("--out", type=Path, default=OUT, help=f"default {OUT}")
    args = parser.parse_args()
    digest = make(args.src, args.out)
    print(f"{args.out}: sha256 {digest} ({args.out.stat().st_size} bytes)")
    worst = check(args.out, args.src)
    same = worst <= 1e-5
    verdict = "the same answers" if same else "DIFFERENT"
    print(f"batches of 1-3 vs {args.src.name} frame by frame: max |output difference| "
          f"{worst:.2g} on 3 input sizes: {verdict}")  # fmt: skip
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
