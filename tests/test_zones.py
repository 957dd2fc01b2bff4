"""#43 items 1 and 3: zones (a bed where lying is no fall, floor zones where only lying counts) and
someone else in the room (`others_present`, `person.when_others_present`), on real GMDCSA24
clips replayed through the daemon with the shipped models; two people by compositing two clips."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import cv2
import jsonschema
import numpy as np
import pytest

import edge_hf
from edge_hf.cli import main
from edge_hf.core.zones import Zone, Zones, inside, polygon_problem
from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.config import Config
from edge_hf.daemon.payload import FallEvent
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.synth import write_video
from tests.conftest import SHARED_DATA, clip_frames

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
REAL_MODEL = ROOT / "models" / "fall-real-efficientnet_lite0-t3.onnx"
POSE = ROOT / "models" / "person-movenet-multipose-lightning.onnx"
GMDCSA = SHARED_DATA / "gmdcsa24"
FALL = GMDCSA / "S3_Fall_01.mp4"  # falling forward; the person ends lying low in the picture
SCHEMA = json.loads((Path(edge_hf.__file__).parent / "event.schema.json").read_text())
needs_gmdcsa = pytest.mark.skipif(not GMDCSA.is_dir(), reason="../shared/data/gmdcsa24 absent")


def _starts(
    video: Path,
    tmp_path: Path,
    decision: str = "pose",
    zones: list[dict[str, Any]] | None = None,
    model: Path = DEMO_MODEL,
    **person: object,
) -> list[FallEvent]:
    """The `start` events of a replay (the last frame held 3 s). The demo classifier at 0.99
    never fires on real footage: with decision `pose` the events are the pose rules'."""
    threshold = {"threshold": 0.99} if model == DEMO_MODEL else {}
    camera = {"name": "cam", "source": str(video), **({"zones": zones} if zones else {})}
    cfg = Config.model_validate(
        {
            "device_id": "t",
            "model": {"path": str(model), "providers": ["cpu"], **threshold},
            "cameras": [camera],
            "state_dir": str(tmp_path / "state"),
            "person": {"model": str(POSE), "decision": decision, **person},
        }
    )
    sink = RecordingSink()
    replay_files(build_pipeline(cfg, sink, score_history=None, live=False), hold_end_s=3.0)
    starts = [e for e in sink.events if e.type == "start"]
    for e in starts:
        jsonschema.validate(e.as_dict(), SCHEMA, format_checker=jsonschema.FormatChecker())
    return starts


def _around(box: tuple[float, float, float, float], by: float = 0.05) -> list[list[float]]:
    """A rectangle zone around a 0-1 box, grown by `by` on each side (within the picture)."""
    x0, y0, x1, y1 = (max(0.0, box[0] - by), max(0.0, box[1] - by),
                      min(1.0, box[2] + by), min(1.0, box[3] + by))  # fmt: skip
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


@pytest.fixture(scope="module")
def lying_box(tmp_path_factory: pytest.TempPathFactory) -> tuple[float, float, float, float]:
    """Where the person of FALL lies: the box the fall's event names, without zones."""
    if not GMDCSA.is_dir():
        pytest.skip("../shared/data/gmdcsa24 absent")
    starts = _starts(FALL, tmp_path_factory.mktemp("nozones"))
    assert len(starts) == 1 and starts[0].person is not None, "the fall raises its event"
    return starts[0].person[1]


# ------------------------------------------------------------------ zones on real footage


@needs_gmdcsa
def test_a_person_lying_inside_an_ignore_zone_raises_no_fall(
    lying_box: tuple[float, float, float, float], tmp_path: Path
) -> None:
    """The same real fall (S3_Fall_01) raises its event without zones (the fixture), and nothing
    with an `ignore` zone (a bed) where the person lies; a zone elsewhere changes nothing."""
    bed = {"name": "bed", "kind": "ignore", "points": _around(lying_box)}
    assert _starts(FALL, tmp_path, zones=[bed]) == []
    elsewhere = {"name": "sofa", "kind": "ignore", "points": [[0.0, 0.0], [0.3, 0.0], [0.3, 0.3]]}
    starts = _starts(FALL, tmp_path, zones=[elsewhere])
    assert len(starts) == 1 and starts[0].zone is None


@needs_gmdcsa
def test_with_floor_zones_only_lying_inside_them_counts(
    lying_box: tuple[float, float, float, float], tmp_path: Path
) -> None:
    """A `floor` zone where the person lies: the fall is raised and names the zone; floor zones
    that leave that spot out (the top of the picture): nothing; an `ignore` zone inside the floor
    zone, where the person lies, wins."""
    floor = {"name": "floor", "kind": "floor", "points": _around(lying_box)}
    starts = _starts(FALL, tmp_path, zones=[floor])
    assert len(starts) == 1 and starts[0].zone == "floor"
    assert starts[0].as_dict()["zone"] == "floor"
    top = {"name": "hall", "kind": "floor", "points": [[0, 0], [1, 0], [1, 0.4], [0, 0.4]]}
    assert _starts(FALL, tmp_path, zones=[top]) == []
    rug = {"name": "rug", "kind": "ignore", "points": _around(lying_box, 0.02)}
    assert _starts(FALL, tmp_path, zones=[floor, rug]) == []


@needs_gmdcsa
def test_the_classifier_alone_respects_zones_through_the_person_boxes(
    lying_box: tuple[float, float, float, float], tmp_path: Path
) -> None:
    """Decision `cnn` (the shipped real classifier decides alone; the person stage only watches):
    its fall is raised without zones and refused when the person it saw lies in an ignore zone."""
    assert len(_starts(FALL, tmp_path, "cnn", model=REAL_MODEL)) == 1
    bed = {"name": "bed", "kind": "ignore", "points": _around(lying_box)}
    assert _starts(FALL, tmp_path, "cnn", zones=[bed], model=REAL_MODEL) == []


# ------------------------------------------------------------------ someone else in the room


@pytest.fixture(scope="module")
def two_people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A person walking about (S1_ADL_10, left half) beside a real fall (S3_Fall_20, right)."""
    if not GMDCSA.is_dir():
        pytest.skip("../shared/data/gmdcsa24 absent")
    walk, fps = clip_frames(GMDCSA / "S1_ADL_10.mp4")
    fall, _ = clip_frames(GMDCSA / "S3_Fall_20.mp4")
    both = [np.hstack([walk[i % len(walk)], fall[i]]) for i in range(len(fall))]
    video = tmp_path_factory.mktemp("two") / "walk_fall.mp4"
    write_video(video, iter(both), fps, (1280, 480))
    return video


@needs_gmdcsa
def test_a_fall_with_someone_else_upright_in_view_says_so(two_people: Path, tmp_path: Path) -> None:
    """`alert` (the default) raises the fall as always and says how many others were upright
    (`others_present: 1`); `flag` raises it marked; `suppress` raises nothing."""
    alert = _starts(two_people, tmp_path)
    assert len(alert) == 1 and alert[0].others_present == 1 and alert[0].flag is None
    payload = alert[0].as_dict()
    assert payload["others_present"] == 1 and "flag" not in payload
    flagged = _starts(two_people, tmp_path, when_others_present="flag")
    assert len(flagged) == 1 and flagged[0].as_dict()["flag"] == "others_present"
    assert flagged[0].event_id == alert[0].event_id
    assert _starts(two_people, tmp_path, when_others_present="suppress") == []


@needs_gmdcsa
def test_suppress_never_silences_a_person_who_falls_alone(tmp_path: Path) -> None:
    """Alone in view (S3_Fall_01): `others_present: 0`, and `suppress` still raises the fall."""
    starts = _starts(FALL, tmp_path, when_others_present="suppress")
    assert len(starts) == 1 and starts[0].as_dict()["others_present"] == 0


def test_the_new_fields_survive_the_journal() -> None:
    """A `start` read back from its payload (the journal of open events) keeps others_present,
    zone and flag, so a start sent again after a crash says what the first one said."""
    payload = {
        "event_id": "77def2e0-a20e-5b48-b3eb-51c3de50d67c", "type": "start", "camera": "hall",
        "device_id": "box", "time": 10.0, "started_at": 10.0, "score": 0.9, "peak_score": 0.9,
        "model": {"name": "m.onnx", "window": 3, "interval_ms": 100.0},
        "others_present": 2, "zone": "floor", "flag": "others_present",
    }  # fmt: skip
    back = FallEvent.from_dict(payload).as_dict()
    assert (back["others_present"], back["zone"], back["flag"]) == (2, "floor", "others_present")


def test_what_the_detector_cannot_see_it_neither_counts_nor_refuses() -> None:
    """No pose tick before the classifier's fall: `others_present` is left out (unknown, not 0).
    A camera whose person stage fails (`degraded`): its zones refuse nothing (an alarm with less
    evidence). A fallen person the pose model lost is judged where the rules last had them."""
    from edge_hf.core.posefall import PoseVerdict, Seen
    from edge_hf.daemon.config import DetectionConfig
    from edge_hf.daemon.events import FallDetector
    from edge_hf.daemon.payload import ModelInfo

    bed = Zones((Zone("bed", "ignore", ((0.0, 0.5), (1.0, 0.5), (1.0, 1.0), (0.0, 1.0))),))

    def detector(zones: Zones | None = None) -> FallDetector:
        return FallDetector("c", "d", DetectionConfig(), 0.5, ModelInfo("m", 3, 100.0), "either",
                            zones=zones, when_others="alert")  # fmt: skip

    def starts(d: FallDetector, t0: float = 0.0) -> list[FallEvent]:
        return [e for i in range(3) for e in d.update(0.9, t0 + i * 0.1) if e.type == "start"]

    assert "others_present" not in starts(detector())[0].as_dict()
    two_up = [Seen(1, (0.1, 0.1, 0.2, 0.4), (0.15, 0.3), upright=True),
              Seen(2, (0.5, 0.1, 0.6, 0.4), (0.55, 0.3), upright=True)]  # fmt: skip
    d = detector()
    d.on_pose(0.0, PoseVerdict(False, False, t=0.0, seen=two_up))
    assert starts(d)[0].others_present == 1, "the faller unknown: one of the two is them"
    lying = PoseVerdict(True, True, t=0.0, person=(3, (0.2, 0.7, 0.6, 0.9)))  # not in `seen`
    d = detector(bed)
    d.on_pose(0.0, lying)
    assert starts(d) == [] and d.counts.in_zone == 1
    d = detector(bed)
    d.on_pose(0.0, lying)
    d.pose_ok = False
    assert len(starts(d)) == 1


# ------------------------------------------------------------------ the geometry


def test_zone_geometry() -> None:
    """Inside a concave polygon, the rule (ignore wins, floor zones confine) and bad polygons."""
    ell = [(0.0, 0.0), (1.0, 0.0), (1.0, 0.4), (0.4, 0.4), (0.4, 1.0), (0.0, 1.0)]
    assert inside((0.2, 0.8), ell) and inside((0.8, 0.2), ell) and not inside((0.8, 0.8), ell)
    bed = Zone("bed", "ignore", ((0.1, 0.1), (0.3, 0.1), (0.3, 0.3), (0.1, 0.3)))
    floor = Zone("floor", "floor", tuple(ell))
    zones = Zones((bed, floor))
    assert zones.refusal((0.2, 0.2)) == "zone bed"
    assert zones.refusal((0.8, 0.8)) == "outside the floor zones"
    assert zones.refusal((0.2, 0.8)) is None and zones.named((0.2, 0.8)) == "floor"
    assert Zones((bed,)).refusal((0.8, 0.8)) is None  # no floor zones: anywhere else counts
    assert polygon_problem([(0.1, 0.1), (0.5, 0.1)]) is not None
    assert "outside the picture" in (polygon_problem([(10, 20), (500, 20), (500, 300)]) or "")
    assert "cross" in (polygon_problem([(0, 0), (1, 1), (1, 0), (0, 0.8)]) or "")
    assert polygon_problem(ell) is None


# ------------------------------------------------------------------ check and `edge-hf zones`


def _config(tmp_path: Path, zones: str, person: bool = True, source: Path = FALL) -> Path:
    text = (
        "device_id: t\n"
        f"model: {{path: {DEMO_MODEL}, providers: [cpu]}}\n"
        + (f"person: {{model: {POSE}}}\n" if person else "")
        + f"state_dir: {tmp_path / 'state'}\n"
        "cameras:\n"
        "  - name: bedroom\n"
        f"    source: {source}\n"
        "    crop: [0, 0, 960, 720]\n"
        "    zones:\n"
        f"{zones}"
    )
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


BED = "      - {name: bed, kind: ignore, points: [[0.2, 0.6], [0.7, 0.6], [0.7, 1], [0.2, 1]]}\n"


def _check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(config)],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )  # fmt: skip


def test_check_says_zones_need_the_person_stage(tmp_path: Path) -> None:
    """Zones with the person stage off: `check` refuses in one line naming the file, the line,
    the key and what to do; with it on, `check` lists the camera's zones."""
    proc = _check(_config(tmp_path, BED, person=False))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1
    assert f"{tmp_path / 'config.yaml'}:8: cameras[0].zones (bed)" in line
    assert "person stage" in line and "set person.model" in line
    ok = _check(_config(tmp_path, BED))
    assert ok.returncode == 0, ok.stderr
    assert "zone bed (ignore)" in ok.stdout and "others present: alert" in ok.stdout


@pytest.mark.parametrize(
    ("zone", "says"),
    [
        ("{name: bed, kind: bedroom, points: [[0.2, 0.6], [0.7, 0.6], [0.7, 1.0]]}",
         "cameras[0].zones[0].kind = 'bedroom': use ignore"),
        ("{name: bed, kind: ignore, points: [[0.2, 0.6], [0.7, 0.6]]}",
         "cameras[0].zones[0].points: 2 points; a zone needs at least 3"),
        ("{name: bed, kind: ignore, points: [[120, 400], [600, 400], [600, 700]]}",
         "cameras[0].zones[0].points: point 0 [120, 400] is outside the picture"),
        ("{name: bed, kind: ignore, points: [[0, 0], [1, 1], [1, 0], [0, 0.8]]}",
         "cameras[0].zones[0].points: edges 0-1 and 2-3 cross"),
    ],
)  # fmt: skip
def test_a_bad_zone_is_one_line_naming_file_line_and_key(
    tmp_path: Path, zone: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--config", str(_config(tmp_path, f"      - {zone}\n"))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"config.yaml:10: {says}" in err, err


@needs_gmdcsa
def test_edge_hf_zones_draws_the_zones_on_a_frame_of_the_cameras_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`edge-hf zones` writes a PNG of the camera's view (its crop of the source's frame) in
    which the zone's pixels are tinted and the rest away from the edges is the frame as it is."""
    out = tmp_path / "zones.png"
    config = _config(tmp_path, BED)
    assert main(["zones", "--config", str(config), "--camera", "bedroom", "--out", str(out)]) == 0
    assert "bed (ignore, 4 corners)" in capsys.readouterr().out
    drawn = cv2.imread(str(out))
    cap = cv2.VideoCapture(str(FALL))
    ok, frame = cap.read()
    cap.release()
    assert ok and drawn is not None
    plain = frame[0:720, 0:960]  # the camera's crop
    assert drawn.shape == plain.shape
    diff = np.abs(drawn.astype(int) - plain.astype(int)).sum(axis=2)
    h, w = plain.shape[:2]
    zone = diff[int(0.65 * h) : int(0.95 * h), int(0.25 * w) : int(0.65 * w)]
    assert (zone > 30).mean() > 0.95, "the zone is tinted"
    outside = diff[int(0.1 * h) : int(0.5 * h), int(0.1 * w) : int(0.9 * w)]
    assert (outside == 0).mean() > 0.99, "outside the zones the frame is unchanged"
    assert main(["zones", "--config", str(config), "--camera", "hall", "--out", str(out)]) == 2
    assert "no camera of that name" in capsys.readouterr().err
