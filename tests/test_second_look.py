"""#40 item 2: the person stage's second look finds a person small in the frame (far away, lying
there) whom the pose model on the whole frame misses; near people cost nothing extra."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_hf.core.clippeople import clip_people
from edge_hf.core.pose import POSE_MODEL, Person, PoseEstimator, features, pose_frame
from edge_hf.core.runtime import CPU
from edge_hf.core.secondlook import (
    LOOK_ZOOM,
    LookBudget,
    LookSettings,
    SecondLook,
    motion_boxes,
    view_frame,
)
from edge_hf.daemon.config import PersonConfig
from edge_hf.daemon.person import PersonStage, PoseSlot
from tests.conftest import SHARED_DATA

CLIP = SHARED_DATA / "gmdcsa24" / "S3_Fall_01.mp4"  # side view: crawls, lies on the floor by ~2 s
needs_clip = pytest.mark.skipif(not CLIP.is_file(), reason=f"{CLIP} absent")


@pytest.fixture(scope="module")
def estimator() -> PoseEstimator:
    return PoseEstimator(POSE_MODEL)


def _far(frame: np.ndarray, shrink: float = 0.3) -> np.ndarray:
    """The frame shrunk into a 640x360 grey canvas: the room (and the person) far away."""
    canvas = np.full((360, 640, 3), 120, np.uint8)
    small = cv2.resize(frame, None, fx=shrink * 640 / frame.shape[1], fy=shrink * 640 / frame.shape[1],
                       interpolation=cv2.INTER_AREA)  # fmt: skip
    h, w = small.shape[:2]
    canvas[130 : 130 + h, 130 : 130 + w] = small
    return canvas


def _ticks(clip: Path, rate_hz: float = 5.0) -> list[tuple[float, np.ndarray]]:
    cap = cv2.VideoCapture(str(clip))
    fps = cap.get(cv2.CAP_PROP_FPS)
    out, i = [], 0
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        if i % round(fps / rate_hz) == 0:
            out.append((i / fps, frame))
        i += 1
    cap.release()
    return out


@needs_clip
def test_a_person_lying_far_away_is_found_by_the_second_look_not_by_the_whole_frame(
    estimator: PoseEstimator,
) -> None:
    look = SecondLook(estimator)
    alone = found = lying = 0
    ticks = _ticks(CLIP)
    for t, frame in ticks:
        far = _far(frame)
        small, view = pose_frame(far, None, 256), view_frame(far, None, 256)
        whole = estimator.people(small)
        people = look.people(t, small, view)
        if t >= 2.0:  # on the floor
            alone += bool(whole)
            found += bool(people)
            lying += bool(people) and features(people[0]).aspect >= 1.3
    n = sum(t >= 2.0 for t, _ in ticks)
    assert n >= 8
    assert alone <= 0.3 * n, (alone, n)  # the whole frame at 256 px: hardly ever
    assert found >= 0.8 * n, (found, n)  # a closer look: nearly always
    assert lying >= 0.6 * n, (lying, n)  # and read as lying (box wider than tall)
    assert look.crops <= 2 * len(ticks)  # at most max_crops squares a frame


@needs_clip
def test_a_near_person_is_not_looked_at_again(estimator: PoseEstimator) -> None:
    look = SecondLook(estimator)
    for t, frame in _ticks(CLIP)[:10]:
        look.people(t, pose_frame(frame, None, 256), view_frame(frame, None, 256))
    assert look.crops <= 1  # the person fills the frame: a square around them gains nothing


def test_what_moved_is_boxed_and_noise_is_not() -> None:
    rng = np.random.default_rng(0)
    before = rng.integers(100, 110, (144, 256), dtype=np.uint8)
    now = before.copy()
    now[40:70, 100:112] = 200  # something the size of a far person moved in
    boxes = motion_boxes(before, now, 25, 12)
    assert len(boxes) == 1
    x0, y0, x1, y1 = boxes[0]
    assert x0 <= 100 and y0 <= 40 and x1 >= 112 and y1 >= 70 and x1 - x0 < 30
    assert motion_boxes(before, before, 25, 12) == []


def test_squares_never_enlarge_more_than_max_upscale_and_stay_in_the_view(
    estimator: PoseEstimator,
) -> None:
    look = SecondLook(estimator, LookSettings())
    k = LOOK_ZOOM
    tiny = look.square((10.0, 10.0, 14.0, 20.0), k, (360, 640))
    assert tiny is not None
    x, y, side = tiny
    assert side == round(256 / LookSettings().max_upscale)
    assert x >= 0 and y >= 0 and y + side <= 360 and x + side <= 640
    assert look.square((0.0, 0.0, 120.0, 140.0), k, (360, 640)) is None  # a near person


def test_the_pose_slot_keeps_the_view_for_the_second_look() -> None:
    slot = PoseSlot(0.2, 256, look=True)
    slot.offer(0.0, np.zeros((1080, 1920, 3), np.uint8), None)
    got = slot.take()
    assert got is not None
    _, small, view = got
    assert small.shape == (144, 256, 3) and view is not None and view.shape == (360, 640, 3)
    plain = PoseSlot(0.2, 256)
    plain.offer(0.0, np.zeros((1080, 1920, 3), np.uint8), None)
    got = plain.take()
    assert got is not None and got[2] is None  # no second look: nothing more kept


@needs_clip
def test_clip_people_through_the_second_look_is_cached_apart(
    estimator: PoseEstimator, tmp_path: Path
) -> None:
    plain = clip_people(CLIP, None, estimator, 2.0, tmp_path)
    looked = clip_people(CLIP, None, estimator, 2.0, tmp_path, LookSettings())
    again = clip_people(CLIP, None, estimator, 2.0, tmp_path, LookSettings())
    assert len(list(tmp_path.glob("people-*.json"))) == 2
    assert [t for t, _, _ in looked] == [t for t, _, _ in plain]
    assert [len(p) for _, _, p in again] == [len(p) for _, _, p in looked]


def test_the_shipped_heads_each_hold_the_config_to_their_poses() -> None:
    from edge_hf.core.errors import UserError
    from edge_hf.daemon.config import PersonConfig
    from edge_hf.daemon.person import load_head

    models = Path(__file__).resolve().parents[1] / "models"
    look, plain = models / "pose-head-look.json", models / "pose-head.json"
    assert load_head(PersonConfig(model=POSE_MODEL, head=look, second_look=True)) is not None
    assert load_head(PersonConfig(model=POSE_MODEL, head=plain)) is not None
    with pytest.raises(
        UserError, match=r"set person\.second_look: true or leave person\.head unset"
    ):
        load_head(PersonConfig(model=POSE_MODEL, head=look))
    with pytest.raises(
        UserError, match=r"set person\.second_look: false or leave person\.head unset"
    ):
        load_head(PersonConfig(model=POSE_MODEL, head=plain, second_look=True))


def test_the_live_budget_gives_the_squares_only_the_stage_s_spare_time() -> None:
    b = LookBudget(share=0.5, cap_s=0.2)
    assert b.squares(0.0, 2) == 0  # no time has passed: nothing spare yet
    assert b.squares(0.1, 2) == 1  # 50 ms spare, a square's cost unknown: one, to learn it
    b.spent(0.02, 1)
    assert b.square_s == pytest.approx(0.02)
    assert b.squares(0.1, 2) == 1  # 30 ms left: one more 20 ms square
    assert b.squares(100.0, 50) == 10  # idle for long: at most cap_s (0.2 s) saved up
    b.spent(0.5)  # a whole frame took half a second: in debt, no squares
    assert b.squares(100.0, 2) == 0

    def ticks(cameras: int, frame_s: float = 0.03, square_s: float = 0.02) -> int:
        """Squares run over 10 s of pose ticks at 5 Hz, each camera wanting 2 a tick."""
        b, ran, t = LookBudget(share=0.75), 0, 0.0
        for _ in range(50):
            t += 0.2
            for _ in range(cameras):
                b.spent(frame_s)
                n = b.squares(t, 2)
                b.spent(n * square_s, n)
                ran += n
        return ran

    assert ticks(1) >= 95  # one camera: (nearly) every square it wants
    # three: 0.75 * 0.2 s a tick less 3 * 30 ms of whole frames leaves 60 ms: 3 squares a tick
    assert 120 <= ticks(3) <= 155
    assert ticks(5) == 0  # five cameras' whole frames take more than 75 % of the time: none
    # A square dearer than the bucket's cap (a slow board, or one stall) still runs now and then:
    # 0.75 * 0.2 s a tick less 30 ms leaves 120 ms, a 300 ms square every 2.5 ticks
    assert 15 <= ticks(1, square_s=0.3) <= 25


@needs_clip
def test_the_live_person_stage_looks_again_only_with_time_to_spare() -> None:
    """The person stage live (a `LookBudget`) runs a far camera's squares while it has time and
    none when it has none; a replay (no budget) runs every one. The whole frame always runs."""
    far = [(t, _far(frame)) for t, frame in _ticks(CLIP)[:20]]

    def looks(budget: LookBudget | None) -> tuple[int, int]:
        stage = PersonStage(PersonConfig(model=POSE_MODEL, second_look=True), [CPU])
        stage.look_budget = budget
        slot = stage.slot()
        for t, frame in far:
            slot.offer(t, frame, None)
            stage.step({"far": slot})
        return stage.counters.looks, stage.counters.frames

    replayed, frames = looks(None)
    assert frames == len(far) and replayed >= 10  # small, then lying far away: looked at again
    busy, frames = looks(LookBudget(share=0.0))
    assert frames == len(far) and busy == 0  # no spare time: the whole frames alone
    spare = LookBudget(share=1.0, cap_s=100.0)
    spare.spent(-100.0)  # (100 s saved up)
    assert looks(spare)[0] == replayed


def test_a_square_is_judged_by_the_person_s_upright_height_too(estimator: PoseEstimator) -> None:
    """A near person of whom only a small part shows (fallen behind a sofa) gets no square: a
    square there finds a low-scoring part of them, read standing, and they are never lost."""
    look = SecondLook(estimator, LookSettings())
    small = (100.0, 60.0, 112.0, 80.0)  # 20 pose pixels: small enough for a square
    assert look.square(small, LOOK_ZOOM, (360, 640)) is not None
    assert look.square(small, LOOK_ZOOM, (360, 640), upright=40.0) is not None  # far when up
    assert look.square(small, LOOK_ZOOM, (360, 640), upright=60.0) is None  # near when up


HIDDEN = SHARED_DATA / "gmdcsa24" / "S3_Fall_15.mp4"  # stands near the camera, falls at 1.9 s


@pytest.mark.skipif(not HIDDEN.is_file(), reason=f"{HIDDEN} absent")
def test_a_near_person_fallen_out_of_sight_is_not_looked_at_again(estimator: PoseEstimator) -> None:
    """Real footage, the lower third hidden (the conditions benchmark's `partial`): the person,
    60 % of the frame high while up, falls behind the hidden part; the second look cuts no square
    where what showed of them was small, so the person stage loses them (`person.lost_s`'s
    pose path then raises the fall) instead of finding a part of them "upright"."""
    look = SecondLook(estimator)
    found_after = 0
    for t, frame in _ticks(HIDDEN):
        frame = frame.copy()
        frame[frame.shape[0] * 2 // 3 :] = 0
        people = look.people(t, pose_frame(frame, None, 256), view_frame(frame, None, 256))
        found_after += t >= 3.0 and bool(people)
    assert look.crops <= 2, look.crops
    assert found_after <= 3, found_after


def test_a_far_person_keeps_their_own_standing_height_beside_a_near_one(
    estimator: PoseEstimator,
) -> None:
    """The standing height that keeps squares away from a near person (fallen behind furniture)
    follows that person by their feet and box, not whoever stands beside them, and not for ever."""
    look = SecondLook(estimator)

    def person(x0: float, y0: float, x1: float, y1: float) -> Person:
        return Person((x0, y0, x1, y1), 0.5, np.zeros((17, 3), np.float32))

    near = (40.0, 54.0, 80.0, 140.0)  # 86 pose pixels tall: 60 % of a 144 px frame
    look._seen = [(0.0, near, (86.0, 0.0))]
    far = person(103.0, 55.0, 117.0, 80.0)  # 25 px tall, standing, feet 0.9 heights away
    assert look._upright(far, 0.2) == (25.0, 0.2)
    part = person(60.0, 98.0, 80.0, 140.0)  # 42 px "standing" where the near one stood
    assert look._upright(part, 0.2) == (86.0, 0.0)  # part of them: their height kept
    lying = person(30.0, 110.0, 100.0, 140.0)  # wider than tall: no height of its own
    assert look._upright(lying, 0.2) == (86.0, 0.0)
    look._seen = [(20.0, near, (86.0, 0.0))]  # carried over 20 s without standing again
    assert look._upright(part, 20.2) == (42.0, 20.2)


def test_the_live_stage_starts_with_a_budget_and_a_replay_has_none() -> None:
    import threading

    stage = PersonStage(PersonConfig(model=POSE_MODEL, second_look=True), [CPU])
    assert stage.look_budget is None  # a replay (the stage stepped by the inference loop)
    stop = threading.Event()
    stage.start({}, stop)
    stop.set()
    stage.join(5.0)
    assert stage.look_budget is not None
