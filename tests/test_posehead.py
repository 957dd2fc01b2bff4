"""The learned pose head (#30 item 3): its features, fitting, file, and its place in the rules."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edge_hf.core.clippeople import clip_people
from edge_hf.core.errors import UserError
from edge_hf.core.pose import POSE_MODEL, PoseEstimator
from edge_hf.core.posefall import PoseFallRules, PoseRuleSettings
from edge_hf.core.posehead import FEATURES, HIDDEN, PoseHead, fit
from tests.conftest import SHARED_DATA
from tests.test_pose import FLOOR, STAND, _person

ROOT = Path(__file__).resolve().parents[1]
TORSO = FEATURES.index("torso_deg")
DEMO_MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"


def _torso_head(threshold: float = 0.5) -> PoseHead:
    """A hand-set head: P(fallen) rises steeply as the torso passes 60 degrees."""
    w1 = np.zeros((HIDDEN, len(FEATURES)))
    w1[0, TORSO] = 1.0
    w2 = np.zeros(HIDDEN)
    w2[0] = 40.0
    return PoseHead(w1, np.zeros(HIDDEN), w2, -40.0 * 60 / 90, threshold)


def _record(frames: list[tuple[float, object]]) -> list[tuple[float, np.ndarray]]:
    record: list[tuple[float, np.ndarray]] = []
    rules = PoseFallRules(record=record)
    for t, p in frames:
        rules.update(t, [p])
    return record


def test_features_follow_one_person_from_standing_to_the_floor() -> None:
    frames = [(t / 5, _person(3, STAND, 200)) for t in range(10)]
    frames += [(2.0 + t / 5, _person(85, FLOOR, 280)) for t in range(1, 8)]
    rows = {round(t, 1): x for t, x in _record(frames)}
    up, down, later = rows[1.8], rows[2.2], rows[3.4]
    f = {name: i for i, name in enumerate(FEATURES)}
    assert up[f["torso_deg"]] < 0.1 and down[f["torso_deg"]] > 0.9
    # hips 80 px below the upright reference of a 200 px tall person
    assert down[f["hip_drop"]] == pytest.approx(0.4) and down[f["hip_known"]] == 1.0
    assert down[f["height_ratio"]] == pytest.approx(60 / 200)
    assert down[f["drop_1s"]] == pytest.approx(0.4)  # the drop happened within the last second
    assert later[f["drop_1s"]] == pytest.approx(0.0)  # over a second later it is old news
    assert down[f["since_upright"]] == pytest.approx(0.04)  # 0.4 s / 10
    assert up[f["keypoints_seen"]] == pytest.approx(4 / 17)


def test_the_head_confirms_a_fall_after_confirm_s_and_ends_it_when_up() -> None:
    rules = PoseFallRules(PoseRuleSettings(confirm_s=1.0), head=_torso_head())
    frames = [(t / 5, _person(3, STAND, 200)) for t in range(10)]
    frames += [(2.0 + t / 5, _person(85, FLOOR, 280)) for t in range(1, 10)]
    frames += [(3.9, _person(30, (90.0, 180.0, 200.0, 300.0), 270))]  # on the knees
    frames += [(4.0, _person(3, STAND, 200))]
    verdicts = [(t, rules.update(t, [p])) for t, p in frames]
    assert [t for t, v in verdicts if v.new_fall] == [pytest.approx(3.2)]
    assert all("head" in v.reasons for t, v in verdicts if 2.1 < t < 3.85)
    assert not verdicts[-1][1].fall  # standing again


def test_a_threshold_above_every_probability_raises_nothing() -> None:
    rules = PoseFallRules(head=_torso_head(threshold=1.01))
    frames = [(t / 5, _person(3, STAND, 200)) for t in range(10)]
    frames += [(2.0 + t / 5, _person(85, FLOOR, 280)) for t in range(1, 20)]
    assert not any(rules.update(t, [p]).new_fall for t, p in frames)


def test_fit_separates_fallen_rows_from_the_rest() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (400, len(FEATURES)))
    y = ((x[:, TORSO] > 0.6) & (x[:, FEATURES.index("hip_drop")] > 0.3)).astype(float)
    head = fit(x[:300], y[:300], seed=0)
    p = head.prob(x[300:])
    accuracy = float(np.mean((p >= 0.5) == (y[300:] > 0.5)))
    assert accuracy > 0.9
    with pytest.raises(ValueError, match="both classes"):
        fit(x, np.zeros(len(x)))


def test_the_head_file_round_trips_and_bad_files_are_named(tmp_path: Path) -> None:
    head = _torso_head(0.7)
    path = tmp_path / "head.json"
    head.save(path)
    back = PoseHead.load(path)
    x = np.random.default_rng(1).uniform(0, 1, (5, len(FEATURES)))
    assert np.allclose(back.prob(x), head.prob(x)) and back.threshold == 0.7
    d = json.loads(path.read_text())
    d["features"] = d["features"][:-1]
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match=r"person.head: .*head.json was trained on features"):
        PoseHead.load(path)
    path.write_text("{not json")
    with pytest.raises(UserError, match="is not a pose head file"):
        PoseHead.load(path)
    with pytest.raises(UserError, match="does not exist"):
        PoseHead.load(tmp_path / "missing.json")


@pytest.mark.skipif(not (SHARED_DATA / "gmdcsa24").is_dir(), reason="gmdcsa24 absent")
def test_clip_people_caches_keypoints_that_match_a_fresh_run(tmp_path: Path) -> None:
    clip = sorted((SHARED_DATA / "gmdcsa24").rglob("*.mp4"))[0]
    estimator = PoseEstimator(ROOT / POSE_MODEL)
    fresh = clip_people(clip, None, estimator, 2.0, tmp_path)
    cached = clip_people(clip, None, estimator, 2.0, tmp_path)
    assert len(list(tmp_path.glob("people-*.json"))) == 1
    assert [t for t, _, _ in fresh] == [t for t, _, _ in cached] and len(fresh) > 4
    assert sum(bool(people) for _, _, people in fresh) > len(fresh) // 2  # people are found
    for (_, hw, a), (_, hw2, b) in zip(fresh, cached, strict=True):
        assert hw == hw2 and len(a) == len(b)
        for pa, pb in zip(a, b, strict=True):
            assert pa.box == pytest.approx(pb.box)
            assert np.allclose(pa.keypoints, pb.keypoints, atol=1e-3)


def _replay_with_head(video: Path, tmp_path: Path, head: PoseHead | Path) -> list[str]:
    """Event types of `video` replayed with the demo classifier silenced (threshold 0.99) and the
    pose head deciding (`decision: pose`)."""
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.config import Config
    from edge_hf.daemon.replay import replay_files
    from edge_hf.daemon.sinks import RecordingSink

    path = head if isinstance(head, Path) else tmp_path / f"head_{head.threshold}.json"
    if isinstance(head, PoseHead):
        head.save(path)
    cfg = Config.model_validate(
        {
            "device_id": "t",
            "model": {"path": str(DEMO_MODEL), "providers": ["cpu"], "threshold": 0.99},
            "cameras": [{"name": "cam", "source": str(video)}],
            "state_dir": str(tmp_path / "state"),
            "person": {"model": str(ROOT / POSE_MODEL), "decision": "pose", "head": str(path)},
        }
    )
    sink = RecordingSink()
    pipeline = build_pipeline(cfg, sink, score_history=None, live=False)
    assert pipeline.person is not None and pipeline.person.head is not None
    replay_files(pipeline, hold_end_s=3.0)
    return [e.type for e in sink.events]


@pytest.mark.skipif(not (SHARED_DATA / "gmdcsa24").is_dir(), reason="gmdcsa24 absent")
def test_the_daemon_lets_the_head_decide_on_real_clips(tmp_path: Path) -> None:
    gmdcsa = SHARED_DATA / "gmdcsa24"
    fall, walk = gmdcsa / "S3_Fall_01.mp4", gmdcsa / "S1_ADL_10.mp4"
    assert _replay_with_head(fall, tmp_path, _torso_head()) == ["start", "end"]
    assert _replay_with_head(walk, tmp_path, _torso_head()) == []
    # the same fall with a head that never says "fallen" (its P < 1 always): the hand rules are
    # not consulted
    assert _replay_with_head(fall, tmp_path, _torso_head(threshold=1.0)) == []


def test_a_missing_head_file_is_one_line_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"person.head: .*nope.json does not exist"):
        _replay_with_head(ROOT / "README.md", tmp_path, tmp_path / "nope.json")


def test_in_veto_mode_the_rules_decide_and_the_head_can_only_take_away() -> None:
    frames = [(t / 5, _person(3, STAND, 200)) for t in range(10)]
    frames += [(2.0 + t / 5, _person(85, FLOOR, 280)) for t in range(1, 10)]
    # a slow lie-down: the rules say no, and a head that says "fallen" everywhere cannot add it
    slow = [(t / 5, _person(3, STAND, 200)) for t in range(10)]
    slow += [(2.0 + t / 5, _person(45, (90, 150, 200, 300), 240)) for t in range(1, 16)]
    slow += [(5.0 + t / 5, _person(85, FLOOR, 280)) for t in range(1, 25)]

    def falls(head: PoseHead | None, frames: list[tuple[float, object]]) -> list[float]:
        rules = PoseFallRules(PoseRuleSettings(confirm_s=1.0), head=head)
        return [t for t, p in frames if rules.update(t, [p]).new_fall]

    always = _torso_head(threshold=0.0)
    always.mode = "veto"
    never = _torso_head(threshold=1.01)
    never.mode = "veto"
    assert falls(None, frames) == falls(always, frames) == [pytest.approx(3.2)]
    assert falls(never, frames) == []
    assert falls(always, slow) == falls(None, slow) == []


def test_the_mode_is_kept_in_the_file_and_checked(tmp_path: Path) -> None:
    head = _torso_head(0.1)
    head.mode = "veto"
    path = tmp_path / "veto.json"
    head.save(path)
    assert PoseHead.load(path).mode == "veto"
    d = json.loads(path.read_text())
    d["mode"] = "vote"
    path.write_text(json.dumps(d))
    with pytest.raises(UserError, match="has mode 'vote'; expected one of veto, decide"):
        PoseHead.load(path)


def test_check_names_the_head_and_refuses_a_broken_one_in_one_line(tmp_path: Path) -> None:
    import subprocess

    from tests.conftest import edge_hf_check

    def check(head: Path) -> subprocess.CompletedProcess[str]:
        return edge_hf_check(
            tmp_path, DEMO_MODEL, f"  model: {ROOT / POSE_MODEL}\n  head: {head}\n"
        )

    shipped = ROOT / "models" / "pose-head.json"
    out = check(shipped)
    assert out.returncode == 0, out.stderr
    assert f"learned pose head {shipped}" in out.stdout
    broken = tmp_path / "broken.json"
    broken.write_text("[]")
    out = check(broken)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "person.head" in out.stderr and "broken.json" in out.stderr
