"""The pose-sequence model (#41): its window, labels, ONNX contract and its place in the rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from edge_hf.core.errors import UserError
from edge_hf.core.pose import Person
from edge_hf.core.posefall import PoseFallRules, PoseRuleSettings
from edge_hf.core.poseseq import PoseSequenceModel, SeqContract
from edge_hf.core.posewindow import FEATURES_PER_TICK, N_KEYPOINTS, WindowSpec, window_array
from edge_hf.training import poseseq as ps
from tests.test_pose import STAND, _person

ROOT = Path(__file__).resolve().parents[1]
POSE = "person-movenet-multipose-lightning.onnx"
BOX = N_KEYPOINTS * 3  # where the box starts in a window row


def _moved(p: Person, k: float, dx: float, dy: float) -> Person:
    kp = p.keypoints.copy()
    kp[:, 0] = kp[:, 0] * k + dx
    kp[:, 1] = kp[:, 1] * k + dy
    b = p.box
    return Person((b[0] * k + dx, b[1] * k + dy, b[2] * k + dx, b[3] * k + dy), p.score, kp)


def test_a_window_carries_no_room_and_no_resolution() -> None:
    track = [_person(3, STAND, 200), None, _person(40, (90, 150, 200, 300), 240)]
    near = window_array(track, 5)
    far = window_array([None if p is None else _moved(p, 0.3, 400, -20) for p in track], 5)
    np.testing.assert_allclose(near, far, atol=1e-5)  # the same person, smaller and elsewhere
    assert near.shape == (5, FEATURES_PER_TICK) and near.dtype == np.float32
    assert not near[:2].any() and not near[3].any()  # before the track began; not found
    assert near[2, -1] == near[4, -1] == 1.0
    # the origin is the last box's bottom centre, the unit its largest side over the window
    assert near[4, BOX : BOX + 4] == pytest.approx((-55 / 200, -150 / 200, 55 / 200, 0.0), abs=1e-6)
    # keypoints the pose model did not see are (0, 0, 0), seen ones carry a 1
    kp = near[4, :BOX].reshape(N_KEYPOINTS, 3)
    assert set(np.flatnonzero(kp[:, 2])) == {5, 6, 11, 12} and not kp[0].any()


def test_generated_labels_follow_the_phases() -> None:
    up, falling, down, low = 0, 1, 2, 3
    descent = (3.0, 3.8)
    assert ps.generated_labels(falling, 3.4, descent, 4.0).mask == (0, 0, 0)
    assert ps.generated_labels(down, 5.0, descent, 4.0).y == (1, 1, 0)
    # once the descent has left the window, down is still down but no longer "falling"
    assert ps.generated_labels(down, 8.0, descent, 4.0).y == (0, 1, 0)
    assert ps.generated_labels(low, 5.0, None, 4.0).y == (0, 1, 0)
    assert ps.generated_labels(up, 2.0, descent, 4.0).y == (0, 0, 1)


def test_real_labels_leave_unknown_what_the_manifest_does_not_say() -> None:
    fall = ps.real_labels(5.0, "fall", 4.0, 4.5, 4.0)
    assert fall.y == (1, 1, 0) and fall.mask == (1, 1, 1)
    assert ps.real_labels(4.2, "fall", 4.0, 4.5, 4.0).mask == (0, 0, 0)  # the descent
    before = ps.real_labels(2.0, "fall", 4.0, 4.5, 4.0)
    assert before.y[:2] == (0, 0) and before.mask == (1, 1, 0)  # standing or sitting: unknown
    adl = ps.real_labels(3.0, "adl", None, None, 4.0)
    assert adl.y[0] == 0 and adl.mask == (1, 0, 0)


class _ShortBox(nn.Module):
    """A hand-set sequence model: falling and down when the last box is at most ~3/4 of the
    tallest box of the window (a person who fell towards the camera), up otherwise."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top = x[:, -1, BOX + 1]  # the last box's top, in units of the window's largest side
        z = 20 * (top + 0.75)
        return torch.stack([z, z, -z], dim=1)


@pytest.fixture(scope="module")
def short_box_model(tmp_path_factory: pytest.TempPathFactory) -> PoseSequenceModel:
    path = tmp_path_factory.mktemp("seq") / "short.onnx"
    ps.export(_ShortBox(), SeqContract(5.0, 20, POSE, design="hand-set"), path)
    return PoseSequenceModel(path)


def _towards_camera() -> list[tuple[float, Person]]:
    """2 s standing, then lying along the view: the box half as tall and still narrower than
    tall, the torso near vertical, the hips a quarter of a height lower (under drop_frac)."""
    frames = [(t / 5, _person(3, STAND, 200)) for t in range(10)]
    frames += [(2.0 + t / 5, _person(10, (100, 200, 160, 300), 250)) for t in range(1, 10)]
    return frames


def test_the_sequence_model_catches_a_fall_the_geometry_reads_as_upright(
    short_box_model: PoseSequenceModel,
) -> None:
    frames = _towards_camera()
    rules_alone = PoseFallRules(PoseRuleSettings(confirm_s=1.0))
    assert not any(rules_alone.update(t, [p]).new_fall for t, p in frames)
    joined = PoseFallRules(PoseRuleSettings(confirm_s=1.0), seq=short_box_model)
    verdicts = [joined.update(t, [p]) for t, p in frames]
    confirmed = [v.t for v in verdicts if v.new_fall]
    assert confirmed == [pytest.approx(3.2)]  # P(falling) high from 2.2 s, held 1 s
    assert verdicts[-1].fall and "sequence" in verdicts[-1].reasons
    assert verdicts[-1].seen[0].seq_p is not None and verdicts[-1].seen[0].seq_p[0] > 0.9
    # the geometry reads upright all along, yet the fall stays until the model sees them up
    up = [joined.update(4.0 + t / 5, [_person(3, STAND, 200)]) for t in range(1, 15)]
    assert up[0].fall is False or up[0].seen[0].seq_p[2] >= 0.5
    assert not up[-1].fall


def test_decide_mode_lets_the_model_alone_say_fallen(short_box_model: PoseSequenceModel) -> None:
    rules = PoseFallRules(PoseRuleSettings(confirm_s=1.0), seq=short_box_model, seq_mode="decide")
    assert [t for t, p in _towards_camera() if rules.update(t, [p]).new_fall] == [
        pytest.approx(3.2)
    ]
    with pytest.raises(ValueError, match="seq_mode"):
        PoseFallRules(seq=short_box_model, seq_mode="vote")


def test_windows_are_recorded_for_training_with_the_track_and_box() -> None:
    windows: list[tuple[float, int, tuple[float, float, float, float], np.ndarray]] = []
    rules = PoseFallRules(windows=windows, window=WindowSpec(5.0, 8))
    for t, p in _towards_camera():
        rules.update(t, [p])
    assert len(windows) == 19 and {w[1] for w in windows} == {1}
    t, _, box, w = windows[-1]
    assert t == pytest.approx(3.8) and box == (100, 200, 160, 300) and w.shape == (8, 56)


@pytest.mark.parametrize("design", ps.DESIGNS)
def test_both_designs_export_with_their_contract(design: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = ps.make_model(design, 20).eval()
    path = tmp_path / f"{design}.onnx"
    diff = ps.export(net, SeqContract(5.0, 20, POSE, threshold=0.6, design=design), path)
    assert diff < 1e-4
    model = PoseSequenceModel(path)
    assert model.contract.threshold == 0.6 and model.contract.ticks == 20
    assert model.spec == WindowSpec(5.0, 20) and model.contract.design == design
    x = ps._parity_windows(20, 5)
    np.testing.assert_allclose(model.probs(x), ps.predict(net, x), atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        model.probs(x[:, :10])


def test_a_model_without_the_contract_is_refused_with_the_config_key() -> None:
    classifier = ROOT / "models" / "fall-real-efficientnet_lite0-t3.onnx"
    with pytest.raises(UserError, match=r"person.sequence: .* is not a pose-sequence model"):
        PoseSequenceModel(classifier)
    meta = SeqContract(5.0, 20, POSE).metadata()
    meta["poseseq.normalisation"] = "per-frame z-score"
    with pytest.raises(UserError, match="normalised as 'per-frame z-score'"):
        SeqContract.of(meta, "person.sequence: x.onnx")
    meta = SeqContract(5.0, 20, POSE).metadata()
    del meta["poseseq.ticks"]
    with pytest.raises(UserError, match=r"lacks poseseq\.ticks"):
        SeqContract.of(meta, "person.sequence: x.onnx")


def test_mirroring_swaps_left_and_right_and_keeps_the_box() -> None:
    x = torch.from_numpy(ps._parity_windows(6, 2))
    rng = np.random.default_rng(1)
    twice = ps._augment(ps._augment(x, np.random.default_rng(1)), np.random.default_rng(1))
    torch.testing.assert_close(twice, x)  # the same windows mirrored twice are themselves
    once = ps._augment(x, rng)
    flipped = [b for b in range(len(x)) if not torch.equal(once[b], x[b])]
    for b in flipped:
        kp, kp0 = once[b, :, :BOX].reshape(6, 17, 3), x[b, :, :BOX].reshape(6, 17, 3)
        torch.testing.assert_close(kp[:, 5, 0], -kp0[:, 6, 0])  # left shoulder from right's
        torch.testing.assert_close(once[b, :, BOX], -x[b, :, BOX + 2])


def test_check_names_the_sequence_model_and_refuses_a_mismatch_in_one_line(
    tmp_path: Path,
) -> None:
    import subprocess

    from edge_hf.core.pose import POSE_MODEL
    from edge_hf.core.posehead import file_sha256
    from tests.conftest import edge_hf_check

    pose = ROOT / POSE_MODEL
    sha = file_sha256(pose)

    def check(seq: Path, extra: str = "") -> subprocess.CompletedProcess[str]:
        person = f"  model: {pose}\n  sequence: {seq}\n{extra}"
        return edge_hf_check(
            tmp_path, ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx", person
        )

    good = tmp_path / "good.onnx"
    ps.export(_ShortBox(), SeqContract(5.0, 20, POSE, pose_model_sha256=sha), good)
    out = check(good, "  sequence_mode: decide\n")
    assert out.returncode == 0, out.stderr
    assert f"pose-sequence model {good} (decide)" in out.stdout
    # another rate than the model's: its 20 ticks would be another span of time
    out = check(good, "  rate_hz: 10\n")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "person.sequence" in out.stderr and "person.rate_hz: 5" in out.stderr
    # trained on another pose model's keypoints
    other = tmp_path / "other.onnx"
    ps.export(_ShortBox(), SeqContract(5.0, 20, POSE, pose_model_sha256="0" * 64), other)
    out = check(other)
    assert out.returncode == 2 and "is another model" in out.stderr, out.stderr
    out = check(tmp_path / "missing.onnx")
    assert (
        out.returncode == 2 and "person.sequence: " in out.stderr and "does not exist" in out.stderr
    )


def test_a_track_born_where_one_was_lost_keeps_its_window() -> None:
    """The tracker loses a person mid-fall (a missed tick, the box from tall to wide with no
    overlap); the new track's window still holds the seconds before the fall."""
    windows: list[tuple[float, int, tuple[float, float, float, float], np.ndarray]] = []
    rules = PoseFallRules(windows=windows, window=WindowSpec(5.0, 10))
    for t in range(5):
        rules.update(t / 5, [_person(3, STAND, 200)])
    rules.update(1.0, [])  # the descent missed
    lying = _person(85, (160, 260, 360, 300), 280)  # feet 0.65 heights away: another track
    rules.update(1.2, [lying])
    (_, first, _, _), (t, second, _, w) = windows[0], windows[-1]
    assert second != first and t == pytest.approx(1.2)
    assert w[-1, -1] == 1.0 and w[-2, -1] == 0.0  # found now, missed before
    assert w[-7:-2, -1].tolist() == [1.0] * 5  # the five standing ticks came along
    # someone appearing far from any lost track starts with an empty window
    rules.update(1.4, [lying, _person(3, (600, 100, 660, 300), 200)])
    assert windows[-1][3][:-1, -1].sum() == 0


SHIPPED = ROOT / "models" / "pose-seq.onnx"


def test_the_shipped_model_catches_a_fall_towards_the_camera_the_rules_miss() -> None:
    """A generated forward fall seen by a camera the person falls towards (azimuth 0: the body
    lies along the view, 1.75 m away, 1.5 m high): neither the rules nor the head read "down";
    the shipped sequence model joined to them confirms the fall after its descent."""
    from edge_hf.core.posehead import PoseHead
    from edge_hf.training import posegen, skeleton

    rng = np.random.default_rng(20)
    m = skeleton.motion("fall_forward_from_standing", rng, 5.0, 10.0)
    cam = posegen.random_camera(rng, azimuth=0.0, pitch=20.0)
    people = posegen.observe(m, cam, posegen.MoveNetErrors(), rng)
    assert m.descent is not None and cam.azimuth_deg == 0.0
    seq, head = PoseSequenceModel(SHIPPED), PoseHead.load(ROOT / "models" / "pose-head.json")

    def falls(rules: PoseFallRules) -> list[float]:
        return [i / 5 for i, found in enumerate(people) if rules.update(i / 5, found).new_fall]

    assert falls(PoseFallRules()) == falls(PoseFallRules(head=head)) == []
    joined = falls(PoseFallRules(head=head, seq=seq))
    assert len(joined) == 1 and m.descent[0] <= joined[0] <= m.descent[1] + 3.0


def test_the_shipped_model_is_the_one_its_card_describes() -> None:
    import hashlib
    import re

    card = (ROOT / "models" / "pose-seq.md").read_text()
    digest = re.search(r"sha256 `([0-9a-f]{64})`", card)
    assert digest and hashlib.sha256(SHIPPED.read_bytes()).hexdigest() == digest.group(1), (
        "the card's sha256 is this file's (update the card after make pose-seq)"
    )
    c = PoseSequenceModel(SHIPPED).contract
    assert f"threshold **{c.threshold:g}**" in card and c.design in card
    assert "ASSIST-IoT" in card and "CC BY 4.0" in card and "MIT" in card  # its data's terms
