"""ONNX Runtime sessions, opened in one place, and the model contract read from an open session.

Every part that runs an exported model (the daemon's classifier, `eval`, the export parity check,
model cards, benchmarks) opens it here, so a bad file gives the same one-line error everywhere and
the daemon can read the contract from the session it classifies with (the file is loaded once).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edge_hf.core.contract import INPUT_NAME, OUTPUT_NAME, ModelContract
from edge_hf.core.errors import UserError

CPU = "CPUExecutionProvider"
Providers = Sequence[str | tuple[str, dict[str, str]]]


def open_session(
    path: Path, providers: Providers = (CPU,), threads: int = 0, key: str = "model.path"
) -> Any:
    """An `onnxruntime.InferenceSession` for `path`; a one-line UserError naming the config
    `key` that gave it (`model.path`, `person.model`) if it cannot load."""
    import onnxruntime as ort

    if not path.is_file():
        raise UserError(f"{key}: {path} does not exist (see models/ for shipped models)")
    opts = ort.SessionOptions()
    if threads:
        opts.intra_op_num_threads = threads
    # ONNX Runtime's worker threads otherwise spin for a while after every run, waiting for the
    # next: half a core burnt at 10 windows/s, taken from the capture threads (`make bench`).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), opts, providers=list(providers))
    except Exception as exc:  # onnxruntime raises its own InvalidProtobuf/Fail types
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{key}: {path} is not a loadable ONNX model ({msg})") from None


def contract_of(session: Any, path: Path) -> ModelContract:
    """The contract in the session's metadata, checked against the graph's own input and output.

    Metadata that contradicts the graph (another T, size or number of classes than the tensors
    have) is refused here, at `check`, rather than failing at the first batch.
    """
    try:
        contract = ModelContract.from_metadata(
            session.get_modelmeta().custom_metadata_map, str(path)
        )
    except ValueError as exc:
        raise UserError(f"model.path: {exc}") from None
    inputs, outputs = session.get_inputs(), session.get_outputs()
    if [i.name for i in inputs] != [INPUT_NAME] or OUTPUT_NAME not in [o.name for o in outputs]:
        raise UserError(
            f"model.path: {path} has inputs {[i.name for i in inputs]} and outputs "
            f"{[o.name for o in outputs]}; an edge_hf model has one input {INPUT_NAME!r} and an "
            f"output {OUTPUT_NAME!r} (export it with edge-hf export)"
        )
    h, w = contract.input_size
    expected = [3 * contract.window * contract.volumes, h, w]
    got = list(inputs[0].shape[1:])
    fixed = len(got) == 3 and all(
        not isinstance(g, int) or g == e for g, e in zip(got, expected, strict=True)
    )
    if not fixed:
        raise UserError(
            f"model.path: {path} metadata says T={contract.window}, volumes={contract.volumes}, "
            f"input {h}x{w} (channels, H, W = {expected}) but the graph takes {got}"
        )
    logits = next(o for o in outputs if o.name == OUTPUT_NAME).shape
    if logits and isinstance(logits[-1], int) and logits[-1] != len(contract.classes):
        raise UserError(
            f"model.path: {path} metadata names {len(contract.classes)} classes "
            f"{list(contract.classes)} but the graph gives {logits[-1]} logits"
        )
    return contract


def read_contract(path: Path) -> ModelContract:
    """The model's contract from its ONNX file; a one-line UserError if unusable."""
    return contract_of(open_session(path), path)
