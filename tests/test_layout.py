"""The house plan: layers that never import each other the wrong way, one model load at start,
bounded memory, and the composition root's refusals of models the daemon cannot feed."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import moving_clip

PACKAGE = Path(__file__).resolve().parents[1] / "edge_hf"
# layer -> layers it must never import
FORBIDDEN = {
    "core": {"daemon", "training", "bench"},
    "daemon": {"training", "bench"},
    "training": {"daemon", "bench"},
}


def _imports(path: Path) -> set[str]:
    """Every `edge_hf.<layer>` a module imports, at any depth (lazy imports count too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "edge_hf" and len(parts) > 1:
                found.add(parts[1])
    return found


def layer_violations(root: Path) -> list[str]:
    bad = []
    for layer, forbidden in FORBIDDEN.items():
        for path in sorted((root / layer).rglob("*.py")):  # packages inside a layer too
            for hit in sorted(_imports(path) & forbidden):
                bad.append(f"{path.relative_to(root)} imports edge_hf.{hit}")
    for path in sorted(root.rglob("*.py")):
        if path.parent.name != "bench" and path.name != "cli.py" and "bench" in _imports(path):
            bad.append(f"{path.relative_to(root)} imports edge_hf.bench")
    return bad


def test_layers_import_only_downwards() -> None:
    assert layer_violations(PACKAGE) == []


def test_the_layering_check_catches_a_daemon_to_training_import(tmp_path: Path) -> None:
    for layer in ("core", "daemon", "training", "bench"):
        (tmp_path / layer).mkdir()
    (tmp_path / "daemon" / "pipeline.py").write_text(
        "def f():\n    from edge_hf.training.models import build_model\n"
    )
    (tmp_path / "core" / "video.py").write_text("import edge_hf.daemon.ring\n")
    (tmp_path / "training" / "train.py").write_text("from edge_hf.bench import prep\n")
    assert layer_violations(tmp_path) == [
        "core/video.py imports edge_hf.daemon",
        "daemon/pipeline.py imports edge_hf.training",
        "training/train.py imports edge_hf.bench",
        "training/train.py imports edge_hf.bench",
    ]


def _config(model: Path, tmp_path: Path, cameras: dict[str, Path], **extra: object):  # type: ignore[no-untyped-def]
    from edge_hf.daemon.config import Config

    return Config.model_validate(
        {
            "device_id": "t",
            "model": {"path": str(model), "providers": ["cpu"]},
            "cameras": [{"name": n, "source": str(p), "loop": True} for n, p in cameras.items()],
            "state_dir": str(tmp_path / "state"),
            **extra,
        }
    )


def test_start_up_loads_the_model_file_once(
    tiny_onnx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxruntime as ort

    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.sinks import RecordingSink

    made: list[str] = []
    real = ort.InferenceSession

    def counting(path: str, *args: object, **kw: object) -> object:
        made.append(path)
        return real(path, *args, **kw)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    clip = SHARED_CAPTURE / "vtest.avi"
    pipeline = build_pipeline(_config(tiny_onnx, tmp_path, {"a": clip, "b": clip}), RecordingSink())
    assert made == [str(tiny_onnx)], "one ONNX Runtime session, no other parse of the file"
    assert pipeline.classifier.contract.window == 3


def test_the_composition_root_builds_the_capture_threads(tiny_onnx: Path, tmp_path: Path) -> None:
    """`build_pipeline` makes every camera's capture thread (keyword arguments, the camera's own
    crop and the model's size); `Pipeline.start` only starts them; replay builds none."""
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.capture import CaptureThread
    from edge_hf.daemon.sinks import RecordingSink

    clip = moving_clip()
    cfg = _config(tiny_onnx, tmp_path, {"a": clip, "b": clip})
    seen: list[float] = []
    live = build_pipeline(cfg, RecordingSink(), on_batch=seen.append)
    threads = [c.thread for c in live.cameras]
    assert all(isinstance(t, CaptureThread) and not t.is_alive() for t in threads)
    assert [t.camera for t in threads if t is not None] == ["a", "b"]
    assert all(t is not None and t.size == live.size for t in threads)
    assert all(t is not None and t._stop_event is live.stop for t in threads)
    live.start()
    try:
        assert [c.thread for c in live.cameras] == threads, "start() builds nothing new"
        assert all(t is not None and t.is_alive() for t in threads)
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            live.process(live._due_windows(), lambda t: t)
            time.sleep(0.05)
    finally:
        live.stop.set()
        for t in threads:
            assert t is not None
            t.join(10)
    assert seen and all(s > 0 for s in seen), "on_batch was given at build time and called"
    replay = build_pipeline(cfg, RecordingSink(), live=False)
    assert all(c.thread is None for c in replay.cameras)
    with pytest.raises(RuntimeError, match="live=False"):
        replay.start()


SHARED_CAPTURE = Path(__file__).resolve().parents[2] / "shared" / "data" / "capture"
needs_capture = pytest.mark.skipif(
    not (SHARED_CAPTURE / "vtest.avi").exists(), reason="../shared/data not present"
)


@needs_capture
def test_two_cameras_share_batches_and_memory_stays_bounded(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    from edge_hf.daemon import app, pipeline
    from edge_hf.daemon.sinks import RecordingSink

    clip = SHARED_CAPTURE / "vtest.avi"
    cfg = _config(tiny_onnx, tmp_path, {"a": clip, "b": clip})
    p = app.build_pipeline(cfg, RecordingSink(), score_history=50)
    # Shrink the live bound so that a short run passes it many times over.
    p.stats.inference_ms = type(p.stats.inference_ms)(maxlen=40)
    p.stats.latency_ms = type(p.stats.latency_ms)(maxlen=40)
    p.start()
    runner = threading.Thread(target=p.run, kwargs={"drain_s": 2.0}, daemon=True)
    runner.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and min(c.windows for c in p.cameras) < 150:
        time.sleep(0.2)
    p.stop.set()
    runner.join(20)
    snap = p.snapshot()
    windows = sum(c.windows for c in snap.cameras)
    assert min(c.windows for c in snap.cameras) >= 150, snap.summary()
    # Both cameras tick on one grid, so batches carry both windows (how many do depends on the
    # load: a starved machine delivers them apart more often; `make bench` measures the rest).
    assert snap.batches < 0.95 * windows, (snap.batches, windows)
    for cam in p.cameras:
        assert len(cam.scores) == 50 < cam.windows, "per-camera history is bounded"
    assert len(p.stats.inference_ms) == 40 < snap.batches
    assert len(p.stats.latency_ms) == 40
    assert pipeline.RECENT >= 40 and app.LIVE_SCORE_HISTORY >= 50


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(config)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def _write_config(model: Path, tmp_path: Path) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(
        f"device_id: t\nmodel: {{path: {model}, providers: [cpu]}}\n"
        f"cameras: [{{name: a, source: /dev/video0}}]\nstate_dir: {tmp_path / 'state'}\n"
    )
    return path


def _with_metadata(src: Path, dst: Path, **changes: str) -> Path:
    import onnx

    proto = onnx.load(str(src))
    for entry in proto.metadata_props:
        if entry.key.removeprefix("edge_hf.") in changes:
            entry.value = changes[entry.key.removeprefix("edge_hf.")]
    onnx.save(proto, str(dst))
    return dst


@pytest.fixture(scope="module")
def volumes_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from edge_hf.training.export import export_onnx
    from edge_hf.training.models import build_model
    from edge_hf.training.train import TrainConfig, save_checkpoint

    out = tmp_path_factory.mktemp("volumes")
    cfg = TrainConfig(data="none", backbone="mobilenet_v3_small", input_size=64, volumes=2)
    save_checkpoint(out / "v.pt", build_model(cfg.backbone, 3, 2, volumes=2), cfg, ["adl", "fall"])
    export_onnx(out / "v.pt", out / "v.onnx")
    return out / "v.onnx"


def test_check_refuses_a_model_the_daemon_cannot_feed_and_takes_a_hyper_volume(
    tiny_onnx: Path, volumes_onnx: Path, tmp_path: Path
) -> None:
    cases = {
        "channel order": (
            _with_metadata(tiny_onnx, tmp_path / "order.onnx", channel_order="rgb-time-minor"),
            "channel order 'rgb-time-minor'",
        ),
        "window vs graph": (
            _with_metadata(tiny_onnx, tmp_path / "t5.onnx", window="5"),
            "metadata says T=5",
        ),
        "classes vs graph": (
            _with_metadata(tiny_onnx, tmp_path / "c2.onnx", classes='["adl", "fall"]'),
            "graph gives 6 logits",
        ),
    }
    ok = _check(_write_config(tiny_onnx, tmp_path))
    assert ok.returncode == 0, ok.stderr
    volumes = _check(_write_config(volumes_onnx, tmp_path))  # #32: the daemon feeds V*T samples
    assert volumes.returncode == 0 and "T=3" in volumes.stdout, volumes.stderr
    for name, (model, needle) in cases.items():
        proc = _check(_write_config(model, tmp_path))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (name, proc.stderr)
        assert len(lines) == 1 and needle in lines[0], (name, proc.stderr)


def test_metadata_is_read_without_loading_the_graph(tiny_onnx: Path, tmp_path: Path) -> None:
    import onnx

    from edge_hf.core.contract import read_metadata

    expected = {e.key: e.value for e in onnx.load(str(tiny_onnx)).metadata_props}
    assert read_metadata(tiny_onnx) == expected and "edge_hf.window" in expected
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(tiny_onnx.read_bytes()[:1000])
    with pytest.raises(ValueError):
        read_metadata(truncated)
    assert np.isfinite(len(expected))


def test_the_model_carries_its_operating_point_and_the_config_can_override_it(
    tmp_path: Path,
) -> None:
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.sinks import RecordingSink
    from edge_hf.training.export import export_onnx
    from edge_hf.training.models import build_model
    from edge_hf.training.train import TrainConfig, save_checkpoint

    cfg = TrainConfig(data="none", backbone="mobilenet_v3_small", input_size=64,
                      classes=["adl", "down", "falling"], fall_class="falling", down_class="down")  # fmt: skip
    save_checkpoint(tmp_path / "m.pt", build_model(cfg.backbone, 3, 3), cfg, cfg.classes)
    model = tmp_path / "m.onnx"
    contract = export_onnx(tmp_path / "m.pt", model, threshold=0.42, confirm_s=1.5)
    assert (contract.threshold, contract.confirm_s, contract.down_class) == (0.42, 1.5, "down")
    clip = SHARED_CAPTURE / "vtest.avi"
    p = build_pipeline(_config(model, tmp_path, {"a": clip}), RecordingSink())
    det = p.cameras[0].detector
    assert det.threshold == 0.42 and det.cfg.confirm_s == 1.5, "the model's own"
    assert p.classifier.down_index == 1 and p.classifier.fall_index == 2
    own = _config(model, tmp_path, {"a": clip}).model_copy(deep=True)
    own = own.model_copy(update={
        "model": own.model.model_copy(update={"threshold": 0.6}),
        "detection": own.detection.model_copy(update={"confirm_s": 0.0}),
    })  # fmt: skip
    det = build_pipeline(own, RecordingSink()).cameras[0].detector
    assert det.threshold == 0.6 and det.cfg.confirm_s == 0.0, "the config wins"
