"""`make demo`'s second part: the shipped real pipeline on the real clips bundled in demo/real/."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from edge_hf.daemon.replay import ReplayRequest, replay

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "demo-real.yaml"
CLIPS = ROOT / "demo" / "real"
FALL = "gmdcsa24_S3_Fall_20.mp4"
LOOK_ALIKE = "assist_iot_17_crawling_main.mp4"


def _replay_as_make_demo_does(
    clip: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> list[dict[str, object]]:
    """`edge-hf replay --config deploy/demo-real.yaml --hold-end-s 3 --video demo/real/<clip>`
    from the repo root (the config's paths are relative to it): the events it prints."""
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    req = ReplayRequest(
        config=CONFIG, video=CLIPS / clip, state_dir=tmp_path / "replay", hold_end_s=3.0
    )
    assert replay(req) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]


def test_make_demo_replays_the_bundled_clips_with_this_config() -> None:
    """The test below checks what `make demo` runs: the same config, clips and hold."""
    make = (ROOT / "Makefile").read_text()
    demo = make[make.index("define demo_real") : make.index("# The shipped synthetic demo model")]
    assert "--config deploy/demo-real.yaml" in demo and "--hold-end-s 3" in demo
    assert re.findall(r"\$\(call demo_real,([^)]+)\)", demo) == [FALL, LOOK_ALIKE]
    for name in (FALL, LOOK_ALIKE):
        assert (CLIPS / name).stat().st_size < 2_000_000  # a few MB in all
    licences = {p.name for p in CLIPS.glob("LICENSE-*")}
    assert licences == {"LICENSE-GMDCSA24-MIT.txt", "LICENSE-ASSIST-IoT-CC-BY-4.0.txt"}


def test_the_real_fall_raises_its_event_with_the_persons_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _replay_as_make_demo_does(FALL, tmp_path, monkeypatch, capsys)
    assert [e["type"] for e in events] == ["start", "end"]
    person = events[0]["person"]
    assert isinstance(person, dict)
    x0, y0, x1, y1 = person["box"]
    assert 0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0
    assert y0 > 0.5  # the fallen person lies in the lower half of the view


def test_the_real_look_alike_raises_no_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _replay_as_make_demo_does(LOOK_ALIKE, tmp_path, monkeypatch, capsys) == []
