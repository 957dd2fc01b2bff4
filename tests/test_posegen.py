"""The generated motion (edge_hf.training.skeleton) and what a camera and MoveNet make of it
(edge_hf.training.posegen): bodies keep their bones, falls fall and daily life does not, phases
say what happens, cameras project where they look, detections are `Person`s like the pose
model's."""

from __future__ import annotations

import numpy as np
import pytest

from edge_hf.core.pose import MIN_KEYPOINT_SCORE, Person
from edge_hf.training.posegen import (
    Camera,
    MoveNetErrors,
    observe,
    pose_of,
    project,
    random_camera,
    random_errors,
    stats,
)
from edge_hf.training.skeleton import (
    DAILY,
    DOWN,
    FALLING,
    FALLS,
    LOW,
    STYLES,
    UP,
    Body,
    motion,
    random_body,
    random_motion,
    style_of,
)

BONES = ((5, 7), (7, 9), (6, 8), (8, 10), (11, 13), (13, 15), (12, 14), (14, 16), (5, 6),
         (11, 12), (3, 4), (1, 2), (0, 1))  # fmt: skip


def pelvis_z(m) -> np.ndarray:
    return m.joints[:, [11, 12]].mean(axis=1)[:, 2]


def times(m) -> np.ndarray:
    return np.arange(len(m.joints)) / m.rate_hz


def test_kinds_and_styles_cover_the_issue():
    assert len(FALLS) >= 12 and len(DAILY) >= 15
    fall_styles = {style_of(k) for k in FALLS}
    assert len(fall_styles) >= 6 and {"forward", "backward", "sideways", "twisting"} <= fall_styles
    assert fall_styles | {style_of(k) for k in DAILY} == set(STYLES)
    for word in ("walking", "chair", "bed_edge", "stool", "turning", "trip", "slip"):
        assert any(word in k for k in FALLS), word
    for kind in ("lie_down_floor_slowly", "lie_down_bed", "lie_down_sofa", "sit_on_floor",
                 "squat", "bend_pick_up", "tie_shoes", "kneel", "crawl", "situps", "pushups",
                 "yoga", "child_play_floor", "walk", "sit_on_chair"):  # fmt: skip
        assert kind in DAILY


@pytest.mark.parametrize("kind", FALLS + DAILY)
def test_every_kind_keeps_its_bones_and_stays_on_the_floor(kind):
    m = motion(kind, np.random.default_rng(3), rate_hz=10.0, duration_s=8.0)
    assert m.joints.shape == (80, 17, 3) and m.joints.dtype == np.float32
    assert m.phase.shape == (80,) and m.phase.dtype == np.int8
    for a, b in BONES:
        length = np.linalg.norm(m.joints[:, a] - m.joints[:, b], axis=1)
        assert length.std() < 1e-3 * length.mean() + 1e-5, (kind, a, b)
    assert m.joints[..., 2].min() > -0.05  # nothing sinks into the floor (a limb swung through
    # it for a moment in a fall aside)
    assert m.name == kind and m.fall == (kind in FALLS) and m.style == style_of(kind)
    assert 0 <= m.facing_deg < 360


@pytest.mark.parametrize("kind", FALLS)
def test_falls_descend_under_gravity_and_phases_follow(kind):
    for seed in range(4):
        m = motion(kind, np.random.default_rng(seed), rate_hz=30.0, duration_s=8.0)
        start, end = m.descent
        assert 0.4 <= end - start <= 1.2
        assert 1.0 <= start <= 8.0 - 3.0
        t, z = times(m), pelvis_z(m)
        before = z[np.searchsorted(t, start)]
        assert z[(t >= start) & (t <= end + 0.1)].min() < 0.6 * before, (kind, seed)
        assert np.all(m.phase[t < start] == UP)
        assert np.all(m.phase[(t >= start) & (t < end)] == FALLING)
        assert not np.any(m.phase[(t < start) | (t >= end)] == FALLING)
        assert np.all(m.phase[(t >= end) & (t < end + 1.0)] == DOWN)
        assert LOW not in m.phase
        # after the fall: down until upright again, then up for good
        after = m.phase[t >= end]
        if UP in after:
            assert np.all(after[np.argmax(after == UP) :] == UP)


def tilt(m) -> np.ndarray:
    """The trunk's angle from vertical (degrees) per tick."""
    axis = m.joints[:, [5, 6]].mean(axis=1) - m.joints[:, [11, 12]].mean(axis=1)
    return np.degrees(np.arctan2(np.linalg.norm(axis[:, :2], axis=1), axis[:, 2]))


def test_lying_down_slowly_takes_two_seconds_or_more():
    """From leaving the standing height to lying on the floor; a fall takes half that at most."""

    def way_down(m) -> float:
        z, t = pelvis_z(m), times(m)
        lying = int(np.argmax((tilt(m) > 60) & (z < 0.4)))
        assert lying > 0
        left = int(np.flatnonzero(z[:lying] > z[0] - 0.03).max())
        return float(t[lying] - t[left])

    for seed in range(10):
        m = motion("lie_down_floor_slowly", np.random.default_rng(seed), rate_hz=30.0)
        assert way_down(m) >= 2.0, seed
        assert m.descent is None and m.phase[-1] == LOW
        fall = motion("fall_backward_from_standing", np.random.default_rng(seed), rate_hz=30.0)
        assert way_down(fall) <= 1.2


@pytest.mark.parametrize("kind", DAILY)
def test_daily_life_never_falls(kind):
    for seed in range(3):
        m = motion(kind, np.random.default_rng(seed))
        assert m.descent is None and not m.fall
        assert FALLING not in m.phase and DOWN not in m.phase


@pytest.mark.parametrize(
    "kind,phase",
    [("walk", UP), ("stand_idle", UP), ("sit_on_chair", UP), ("lie_down_floor_slowly", LOW),
     ("lie_down_bed", LOW), ("sit_on_floor", LOW), ("kneel", LOW), ("crawl", LOW),
     ("situps", LOW), ("pushups", LOW), ("child_play_floor", LOW)],
)  # fmt: skip
def test_daily_phase_at_the_end(kind, phase):
    for seed in range(3):
        m = motion(kind, np.random.default_rng(seed), duration_s=10.0)
        assert m.phase[-1] == phase, (kind, seed)
        if phase == UP:
            assert np.all(m.phase == UP)


def test_bodies_range_from_children_to_tall_adults():
    rng = np.random.default_rng(0)
    bodies = [random_body(rng) for _ in range(300)]
    heights = np.array([b.height_m for b in bodies])
    assert heights.min() < 1.2 and heights.max() > 1.85
    assert {b.kind for b in bodies} == {"adult", "child", "elderly"}
    assert all(b.stoop_deg > 0 for b in bodies if b.kind == "elderly")
    tall = motion("stand_idle", np.random.default_rng(1), body=Body.of(1.9))
    small = motion("stand_idle", np.random.default_rng(1), body=Body.of(1.0))
    assert tall.joints[:, 0, 2].max() > 1.65 and small.joints[:, 0, 2].max() < 1.0


def test_random_motion_respects_kinds_and_styles():
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert random_motion(rng, styles=("slump",)).style == "slump"
        assert random_motion(rng, kinds=("squat", "walk")).name in ("squat", "walk")
    with pytest.raises(ValueError):
        random_motion(rng, kinds=("walk",), styles=("forward",))
    with pytest.raises(ValueError):
        motion("flying", rng)


def test_same_seed_same_take_and_same_detections():
    a = motion("fall_twisting_from_walking", np.random.default_rng(7))
    b = motion("fall_twisting_from_walking", np.random.default_rng(7))
    assert np.array_equal(a.joints, b.joints) and a.descent == b.descent
    cam = random_camera(np.random.default_rng(2))
    oa = observe(a, cam, MoveNetErrors(), np.random.default_rng(5))
    ob = observe(b, cam, MoveNetErrors(), np.random.default_rng(5))
    assert len(oa) == len(ob)
    for pa, pb in zip(oa, ob, strict=True):
        assert len(pa) == len(pb)
        for x, y in zip(pa, pb, strict=True):
            assert x.box == y.box and np.array_equal(x.keypoints, y.keypoints)


def test_a_point_on_the_optical_axis_lands_in_the_middle():
    for cam in (Camera(), Camera(pitch_deg=0.0, pan_deg=20.0, size=(720, 1280), k1=-0.05),
                Camera(pitch_deg=90.0, distance_m=0.0, height_m=2.8, roll_deg=5.0)):  # fmt: skip
        centre, rot = pose_of(cam, facing_deg=33.0, target=(1.0, -2.0))
        point = centre + 2.5 * rot[2]
        xy, depth, inside = project(point[None], cam, facing_deg=33.0, target=(1.0, -2.0))
        assert np.allclose(xy[0], np.array(cam.size) / 2, atol=1e-6)
        assert depth[0] == pytest.approx(2.5) and inside[0]
        behind = centre - 1.0 * rot[2]
        assert not project(behind[None], cam, 33.0, (1.0, -2.0))[2][0]


def lying_takes(n: int = 12) -> list:
    rng = np.random.default_rng(11)
    out = []
    while len(out) < n:
        m = motion(str(rng.choice(["fall_backward_from_standing", "fall_forward_from_standing"])),
                   rng)  # fmt: skip
        z = pelvis_z(m)
        if z[-1] < 0.2:  # still lying at the end
            out.append(m)
    return out


def extent_aspect(m, cam: Camera) -> float:
    target = np.median(m.joints[:, [11, 12]].mean(axis=1)[:, :2], axis=0)
    xy, _, _ = project(m.joints[-1], cam, m.facing_deg, target)
    return float(np.ptp(xy[:, 0]) / max(np.ptp(xy[:, 1]), 1e-6))


def test_a_side_camera_sees_a_lying_body_wide_and_one_along_it_short():
    """A wall camera (2.4 m up, 3 m away): from the side the body's length shows across the
    picture; from its feet or head it is foreshortened (a low camera along the body sees it
    flatter still, and its spread arms can make it wide: that is the view that is hard)."""
    side, along, behind = (Camera(height_m=2.4, pitch_deg=35.0, azimuth_deg=a, distance_m=3.0)
                           for a in (90.0, 0.0, 180.0))  # fmt: skip
    takes = lying_takes()
    assert all(extent_aspect(m, side) > 1.3 for m in takes)
    assert np.mean([extent_aspect(m, along) < 1.3 for m in takes]) >= 0.6
    assert np.mean([extent_aspect(m, behind) < 1.3 for m in takes]) >= 0.6
    for view in (along, behind):
        assert np.median([extent_aspect(m, view) for m in takes]) < 0.6 * np.median(
            [extent_aspect(m, side) for m in takes]
        )


def test_a_ceiling_camera_sees_standing_people_small_and_lying_ones_long():
    ceiling = Camera(height_m=2.8, pitch_deg=90.0, distance_m=0.0, hfov_deg=100.0)
    lying = lying_takes(4)
    standing = [motion("stand_idle", np.random.default_rng(s)) for s in range(4)]

    def long_side(m) -> float:
        target = np.median(m.joints[:, [11, 12]].mean(axis=1)[:, :2], axis=0)
        xy, _, inside = project(m.joints[-1], ceiling, m.facing_deg, target)
        assert inside[[11, 12]].all()  # straight above them
        return float(max(np.ptp(xy[:, 0]), np.ptp(xy[:, 1])))

    assert min(long_side(m) for m in lying) > 1.25 * max(long_side(m) for m in standing)


def test_observe_gives_pose_model_people():
    rng = np.random.default_rng(4)
    found = 0
    for i in range(12):
        m = random_motion(rng, kinds=FALLS if i % 2 else None)
        cam = random_camera(rng)
        ticks = observe(m, cam, random_errors(rng), rng)
        assert len(ticks) == len(m.joints)
        w, h = cam.size
        for people in ticks:
            assert len(people) <= 2
            for p in people:
                assert isinstance(p, Person)
                assert p.keypoints.shape == (17, 3) and p.keypoints.dtype == np.float32
                x0, y0, x1, y1 = p.box
                assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
                assert 0.2 <= p.score <= 1.0
                assert np.all((p.keypoints[:, 2] >= 0) & (p.keypoints[:, 2] <= 1))
                assert np.all((p.keypoints[:, 0] >= 0) & (p.keypoints[:, 0] <= w))
                assert np.all((p.keypoints[:, 1] >= 0) & (p.keypoints[:, 1] <= h))
            found += bool(people)
    assert found > 0.3 * 12 * 40


def test_a_near_side_view_finds_the_person_with_most_keypoints():
    rng = np.random.default_rng(8)
    m = motion("walk", rng)
    cam = Camera(height_m=1.6, pitch_deg=10.0, azimuth_deg=90.0, distance_m=6.0, hfov_deg=90.0)
    s = stats(observe(m, cam, MoveNetErrors(), rng), cam.size)
    assert s["found"] > 0.6 and s["kp_seen"] > 0.7
    assert s["aspect_p50"] < 0.8  # upright: taller than wide


def test_a_far_person_is_not_found():
    rng = np.random.default_rng(8)
    m = motion("stand_idle", rng)
    far = Camera(height_m=1.6, pitch_deg=0.0, azimuth_deg=90.0, distance_m=60.0, hfov_deg=100.0)
    assert not any(observe(m, far, MoveNetErrors(), rng))


def test_a_slow_camera_repeats_its_last_frame():
    rng = np.random.default_rng(1)
    m = motion("walk", rng, rate_hz=10.0)
    ticks = observe(m, Camera(fps=5.0, distance_m=3.0), MoveNetErrors(), rng)
    assert len(ticks) == 80 and len({id(t) for t in ticks}) == 41  # frames 0..40 at 5 fps


def test_random_camera_ranges_and_exclude():
    rng = np.random.default_rng(0)
    cams = [random_camera(rng) for _ in range(400)]
    assert all(0.3 <= c.height_m <= 3.0 and 0 <= c.pitch_deg <= 90 for c in cams)
    assert all(30 <= c.hfov_deg <= 120 and 5 <= c.fps <= 30 for c in cams)
    assert any(c.pitch_deg > 75 for c in cams) and any(c.size[1] > c.size[0] for c in cams)
    wide = [c.k1 for c in cams if c.hfov_deg > 100]
    tele = [c.k1 for c in cams if c.hfov_deg < 60]
    assert min(wide) < -0.03 and all(k == 0 for k in tele)

    def side(c: Camera) -> bool:
        return 60 <= c.azimuth_deg % 180 <= 120

    kept = [random_camera(rng, exclude=side) for _ in range(200)]
    assert not any(side(c) for c in kept)
    assert random_camera(rng, azimuth=90.0).azimuth_deg == 90.0
    steep = random_camera(rng, pitch=90.0)
    assert steep.pitch_deg == 90.0 and steep.distance_m < 0.1
    with pytest.raises(ValueError):
        random_camera(rng, exclude=lambda c: True, tries=50)


def test_scores_mark_what_moveNet_would_not_report():
    """A dropped keypoint scores below MIN_KEYPOINT_SCORE; one outside the frame nearly always."""
    rng = np.random.default_rng(2)
    m = motion("stand_idle", rng)
    # low and close by: the shoulders and head are above the frame
    cam = Camera(height_m=0.6, pitch_deg=0.0, azimuth_deg=90.0, distance_m=1.5, hfov_deg=60.0)
    ticks = [p for people in observe(m, cam, MoveNetErrors(), rng) for p in people]
    assert ticks
    head = np.concatenate([p.keypoints[:5, 2] for p in ticks])
    assert np.mean(head < MIN_KEYPOINT_SCORE) > 0.8
