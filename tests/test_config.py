"""The daemon's YAML config: typed, strict, and every mistake a one-line error with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edge_hf.core.errors import UserError
from edge_hf.daemon.config import parse_config
from tests.conftest import SHIPPED_MODEL

GOOD = """\
device_id: hall
model:
  path: {model}
  providers: [cpu]
cameras:
  - name: door
    source: /dev/video0
  - name: bed
    source: rtsp://user:pw@cam.local/stream
state_dir: {state}
"""


def _good(model: Path, tmp_path: Path) -> str:
    return GOOD.format(model=model, state=tmp_path / "state")


def test_a_good_config_gives_typed_defaults(tiny_onnx: Path, tmp_path: Path) -> None:
    cfg = parse_config(_good(tiny_onnx, tmp_path), "c.yaml")
    assert cfg.model.path == tiny_onnx and cfg.model.providers == ["cpu"]
    assert cfg.model.threshold is None and cfg.detection.smoothing == "k_of_n"  # the model's
    assert [c.name for c in cfg.enabled_cameras()] == ["door", "bed"]
    assert cfg.cameras[0].interval_ms is None, "defaults to the model's"
    assert cfg.mqtt.topic_prefix == "edge_hf" and cfg.mqtt.enabled is False
    assert cfg.cameras[0].crop is None, "the whole frame unless a crop is given"
    cropped = parse_config(
        _replace(_good(tiny_onnx, tmp_path), "source: /dev/video0", "source: a.mp4\n    crop: [853, 0, 427, 320]"),
        "c.yaml",
    )  # fmt: skip
    assert cropped.cameras[0].crop == (853, 0, 427, 320)


def _replace(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new)


BAD = [
    # (edit of the good config, what the one-line message must contain)
    (lambda t: _replace(t, "  providers: [cpu]", "  providers: [cpu]\n  treshold: 0.4"),
     r"c.yaml:5: model.treshold: unknown key"),
    (lambda t: _replace(t, "  providers: [cpu]", "  providers: [cpu]\n  threshold: 1.5"),
     r"c.yaml:5: model.threshold = 1.5"),
    (lambda t: _replace(t, "  providers: [cpu]", "  providers: [gpu]"), r"model.providers\[0\] = 'gpu'"),
    (lambda t: _replace(t, "device_id: hall\n", ""), r"device_id: Field required"),
    (lambda t: _replace(t, "name: bed", "name: door"), r"camera names must be unique \(repeated: door\)"),
    (lambda t: _replace(t, "name: bed", "name: bed room"), r"c.yaml:8: cameras\[1\].name = 'bed room'"),
    (lambda t: _replace(t, "source: /dev/video0", "source: /dev/video0\n    interval_ms: -100"),
     r"cameras\[0\].interval_ms = -100"),
    (lambda t: t + "detection:\n  k: 4\n  n: 3\n", r"k \(4\) must not exceed n \(3\)"),
    (lambda t: t + "mqtt:\n  password_env: X\n  password_file: /run/x\n", r"not both"),
    (lambda t: _replace(t, "cameras:", "cameras: ["), r"c.yaml:\d+: not valid YAML"),
    (lambda t: t + "mqtt:\n  port: 99999\n", r"mqtt.port = 99999"),
    (lambda t: _replace(t, "source: /dev/video0", "source: /dev/video0\n    crop: [0, 0, 0, 10]"),
     r"c.yaml:\d+: cameras\[0\].crop = \[0, 0, 0, 10\]: .*w, h >= 1"),
    (lambda t: _replace(t, "source: /dev/video0", "source: /dev/video0\n    crop: [1, 2, 3]"),
     r"cameras\[0\].crop"),
    (lambda t: _replace(t, "source: /dev/video0", "source: /dev/video0\n    detection: {clear_after_s: 0}"),
     r"c.yaml:\d+: cameras\[0\].detection.clear_after_s = 0"),
    (lambda t: _replace(t, "source: /dev/video0", "source: /dev/video0\n    detection: {latched: true}"),
     r"cameras\[0\].detection.latched: unknown key"),
]  # fmt: skip


def test_a_camera_overrides_detection_keys_and_mqtt_is_on_with_a_host(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    text = _replace(
        _good(tiny_onnx, tmp_path), "source: /dev/video0",
        "source: /dev/video0\n    detection: {latch: false, k: 3}",
    ) + "detection: {n: 5, clear_after_s: 600}\nmqtt: {host: broker.lan}\n"  # fmt: skip
    cfg = parse_config(text, "c.yaml")
    door, bed = cfg.cameras
    assert cfg.detection_for(door).latch is False and cfg.detection_for(door).k == 3
    assert cfg.detection_for(door).n == 5, "keys not overridden come from the top level"
    assert cfg.detection_for(bed) == cfg.detection and cfg.detection.latch is True
    assert cfg.detection.clear_after_s == 600
    assert cfg.mqtt.enabled and cfg.mqtt.host == "broker.lan", "a host turns MQTT on"
    off = parse_config(_good(tiny_onnx, tmp_path) + "mqtt: {host: b, enabled: false}\n", "c.yaml")
    assert not off.mqtt.enabled, "unless enabled: false"


@pytest.mark.parametrize(("edit", "message"), BAD)
def test_bad_configs_are_one_line_errors_naming_file_line_and_key(
    edit, message: str, tiny_onnx: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UserError, match=message) as info:
        parse_config(edit(_good(tiny_onnx, tmp_path)), "c.yaml")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "text",
    ["device_id: a\ndevice_id: b\nmodel: {path: m.onnx}\ncameras: [{name: a, source: x}]\n",
     "device_id: a\nmodel: {path: m.onnx}\ncameras:\n  - {name: a, source: x}\n"
     "cameras:\n  - {name: b, source: y}\n"],
    ids=["device_id", "cameras"],
)  # fmt: skip
def test_a_key_given_twice_is_refused_naming_both_lines(text: str) -> None:
    with pytest.raises(UserError, match=r"c\.yaml:\d: key '\w+' is already set on line \d"):
        parse_config(text, "c.yaml")


def _check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


CLI_BAD = [
    ("unknown key", lambda t: _replace(t, "device_id: hall", "device_id: hall\ndevise: x"), "devise"),
    ("threshold", lambda t: _replace(t, "  providers: [cpu]", "  threshold: 0"), "model.threshold"),
    ("missing model", lambda t: _replace(t, "tiny.onnx", "gone.onnx"), "does not exist"),
    ("window", lambda t: _replace(t, "  providers: [cpu]", "  window: 5"), "T=3"),
    ("input size", lambda t: _replace(t, "  providers: [cpu]", "  input_size: [96, 96]"), "[64, 64]"),
    ("interval", lambda t: _replace(t, "source: /dev/video0", "source: x.mp4\n    interval_ms: 200"),
     "trained at 100 ms"),
    ("not a mapping", lambda t: "- just\n- a list\n", "mapping"),
    ("no cameras", lambda t: t.split("cameras:")[0] + "cameras: []\n", "cameras"),
    ("all disabled", lambda t: _replace(_replace(t, "/dev/video0", "/dev/video0\n    enabled: false"),
     "stream", "stream\n    enabled: false"), "every camera is disabled"),
    ("yaml syntax", lambda t: t + "  : :\n bad", "not valid YAML"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "edit", "needle"), CLI_BAD, ids=[c[0] for c in CLI_BAD])
def test_check_command_exit_2_one_line(
    name: str, edit, needle: str, tiny_onnx: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "edge-hf.yaml"
    path.write_text(edit(_good(tiny_onnx, tmp_path)))
    proc = _check(path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert str(path) in lines[0] or "model.path" in lines[0]
    assert "Traceback" not in proc.stderr


def test_check_accepts_the_good_config_and_a_missing_file_is_one_line(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    path = tmp_path / "edge-hf.yaml"
    path.write_text(_good(tiny_onnx, tmp_path))
    ok = _check(path)
    assert ok.returncode == 0 and "OK" in ok.stdout and "T=3" in ok.stdout
    assert "person stage: off" in ok.stdout
    missing = _check(tmp_path / "nope.yaml")
    assert missing.returncode == 2 and "cannot read the config" in missing.stderr


def _check_config(tmp_path: Path, state_dir: Path, extra: str = "") -> Path:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"device_id: box\nmodel: {{path: {SHIPPED_MODEL}, providers: [cpu]}}\n"
        f"cameras: [{{name: hall, source: x.mp4}}]\nstate_dir: {state_dir}\n{extra}"
    )
    return cfg


def test_check_refuses_what_run_would_refuse(tmp_path: Path) -> None:
    import socket

    for state, needle in ((Path("/tmp"), "writable by other users"),
                          (tmp_path / "afile", "is not a folder")):  # fmt: skip
        (tmp_path / "afile").write_text("x")
        proc = _check(_check_config(tmp_path, state))
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        extra = f"metrics: {{enabled: true, port: {port}}}\n"
        proc = _check(_check_config(tmp_path, tmp_path / "s", extra))
        assert proc.returncode == 2 and f"metrics.port {port}: cannot listen" in proc.stderr
    proc = _check(_check_config(tmp_path, tmp_path / "s", extra))
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "s").exists(), "check creates nothing"


def test_password_comes_from_env_or_file_never_the_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = "device_id: d\nmodel: {path: m.onnx}\ncameras: [{name: a, source: x.mp4}]\n"
    with pytest.raises(UserError, match="unknown key"):
        parse_config(base + "mqtt: {password: hunter2}\n", "c.yaml")
    monkeypatch.setenv("EDGE_HF_PW", "s3cret")
    assert parse_config(base + "mqtt: {password_env: EDGE_HF_PW}\n").mqtt.password() == "s3cret"
    (tmp_path / "pw").write_text("from-file\n")
    cfg = parse_config(base + f"mqtt: {{password_file: {tmp_path / 'pw'}}}\n")
    assert cfg.mqtt.password() == "from-file"
    with pytest.raises(UserError, match="EDGE_HF_NOPE is not set"):
        parse_config(base + "mqtt: {password_env: EDGE_HF_NOPE}\n").mqtt.password()


@pytest.mark.parametrize(
    "example",
    sorted((Path(__file__).parents[1] / "deploy" / "examples").glob("*.yaml")),
    ids=lambda p: p.name,
)
def test_example_configs_are_valid(example: Path) -> None:
    cfg = parse_config(example.read_text(), str(example))
    assert cfg.enabled_cameras() and cfg.mqtt.enabled


def test_unwritable_state_dir_is_one_line(tiny_onnx: Path, tmp_path: Path) -> None:
    path = tmp_path / "edge-hf.yaml"
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    path.write_text(
        _good(tiny_onnx, tmp_path).replace(str(tmp_path / "state"), str(blocker / "state"))
    )
    proc = subprocess.run([sys.executable, "-m", "edge_hf.cli", "run", "--config", str(path)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "state_dir" in proc.stderr


def test_links_and_shared_folders_in_state_dir_are_refused(tmp_path: Path) -> None:
    from edge_hf.daemon.config import Config, ensure_state_dir

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: anyone can plant files there
    with pytest.raises(UserError, match="writable by other users"):
        ensure_state_dir(Config.model_construct(state_dir=shared))
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "outbox.sqlite3").symlink_to(victim)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {tmp_path / 'm.onnx'}}}\n"
        f"cameras: [{{name: a, source: /dev/null}}]\nstate_dir: {state}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "outbox.sqlite3 is a symbolic link" in lines[0]
    assert victim.read_text() == "precious\n", "the link's target is untouched"
    fresh = tmp_path / "fresh" / "state"
    ensure_state_dir(Config.model_construct(state_dir=fresh))
    assert fresh.stat().st_mode & 0o777 == 0o700, "a state_dir we create is ours alone"
