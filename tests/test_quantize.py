"""int8 export: a QDQ model calibrated on real windows, that the daemon loads unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from edge_hf.core.contract import INPUT_NAME
from edge_hf.core.runtime import contract_of, open_session
from edge_hf.training.quantize import calibration_windows
from edge_hf.training.synth import generate

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def calib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("calib")
    return generate(out, clips_per_class=2, fps=15.0, seed=5, width=96, height=72)


def test_export_int8_writes_a_qdq_model_the_daemon_can_run(
    tiny_resnet_onnx: Path, calib: Path, tmp_path: Path
) -> None:
    model = tiny_resnet_onnx  # a random resnet18: its int8 stays close (conftest)
    out = tmp_path / "tiny-int8.onnx"
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "export", "--checkpoint", str(model), "--out",
         str(out), "--int8", "--calibration", str(calib), "--calibration-windows", "24"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "int8 QDQ" in proc.stdout
    graph = onnx.load(str(out)).graph
    ops = {n.op_type for n in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops, "QDQ format"
    assert sum(n.op_type == "QuantizeLinear" for n in graph.node) > 5
    # Same contract and input as the fp32 model: the daemon feeds it unchanged.
    fp32 = contract_of(open_session(model), model)
    q = contract_of(open_session(out), out)
    assert (q.window, q.input_size, q.classes, q.mean, q.std) == (
        fp32.window, fp32.input_size, fp32.classes, fp32.mean, fp32.std,
    )  # fmt: skip
    meta = {p.key: p.value for p in onnx.load(str(out)).metadata_props}
    assert meta["edge_hf.quantization"].startswith("int8 QDQ")
    windows = calibration_windows(model, calib, 24)
    a = open_session(model).run(None, {INPUT_NAME: windows})[0]
    b = open_session(out).run(None, {INPUT_NAME: windows})[0]
    assert not np.allclose(a, b, atol=1e-6), "really quantised"
    # Close to fp32: the int8 error is small next to how much the logits move between windows.
    assert np.abs(a - b).mean() < 0.5 * a.std(axis=0).mean(), "and close to fp32"
    assert (a.argmax(axis=1) == b.argmax(axis=1)).mean() >= 0.9
    assert out.stat().st_size < 0.5 * model.stat().st_size, "int8 weights"


def test_export_int8_without_calibration_is_one_line(tiny_onnx: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "export", "--checkpoint", str(tiny_onnx), "--out",
         str(tmp_path / "x.onnx"), "--int8"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--calibration" in proc.stderr
