"""The real-footage benchmark's per-site calibration never calibrates a camera on its own clip."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from edge_hf.daemon.config import DetectionConfig
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.payload import ModelInfo
from experiments import realbench as rb


def _replayed(name: str, peaks: list[tuple[float, float]]) -> dict[str, Any]:
    """A camera whose detector was fed 10 Hz windows at 0.1, with each (time s, score) of `peaks`
    held for three windows (a two-class model: its quiet point is that score)."""
    det = FallDetector(name, "bench", DetectionConfig(), 0.5, ModelInfo("m", 3, 100.0))
    det.trace = []
    for i in range(600):
        t = i / 10
        high = [s for at, s in peaks if at <= t < at + 0.3]
        det.trace.append((t, max(high, default=0.1), None))
    return {"detector": det}


def _item(clip: str, label: str, start_s: float | None = None) -> rb.Item:
    return rb.Item("A", clip, Path(f"{clip}.mp4"), label, 10.0, start_s, None, "")


def test_each_camera_is_calibrated_on_the_rooms_other_clips_of_its_view() -> None:
    walk, sit = _item("walk", "adl"), _item("sit", "adl")
    fall, still = _item("fall", "fall", start_s=5.0), _item("still", "lying_still")
    items = [walk, walk, sit, fall, still]  # walk seen by two views, the rest by view 1
    peaks = {
        "A_walk_v1": [(2.0, 0.8)],
        "A_walk_v2": [(2.0, 0.97)],  # another view: calibrates nobody of view 1
        "A_sit_v1": [(2.0, 0.6)],
        "A_fall_v1": [(1.0, 0.7), (5.0, 0.99)],  # normal activity before the fall, then the fall
        "A_still_v1": [(1.0, 0.95)],  # a person on the floor is not used as normal activity
        "vtest": [(10.0, 0.55), (50.0, 0.9)],  # calibrated on its first 40 s only
    }
    replayed = {name: _replayed(name, p) for name, p in peaks.items()}

    got = rb.site_thresholds(items, replayed, floor=0.5)

    margin = rb.CALIBRATION_MARGIN
    assert got["A_walk_v1"] == pytest.approx(0.7 + margin), "sit and the fall's first 4 s"
    assert got["A_sit_v1"] == pytest.approx(0.8 + margin)
    assert got["A_fall_v1"] == pytest.approx(0.8 + margin), "never the fall clip itself"
    assert got["A_still_v1"] == pytest.approx(0.8 + margin)
    assert got["A_walk_v2"] == 0.5, "no other clip of view 2: the operating point"
    assert got["vtest"] == pytest.approx(0.55 + margin)
    assert rb.site_thresholds(items, replayed, floor=0.9)["A_sit_v1"] == 0.9, "never below floor"


def test_vtest_negatives_cover_only_the_part_never_scored(tmp_path: Path) -> None:
    """A row trained on vtest.avi's pedestrians takes only its first VTEST_CALIBRATION_S, in
    pieces labelled daily activity, and writes them into the three-state manifest as such."""
    pieces = rb.vtest_negatives(Path("vtest.avi"))
    assert len(pieces) == rb.VTEST_NEGATIVE_PIECES
    assert pieces[0].start_s == 0.0
    assert pieces[-1].end_s == pytest.approx(rb.VTEST_CALIBRATION_S)
    assert all(a.end_s == pytest.approx(b.start_s) for a, b in pairwise(pieces))
    manifest = rb.write_manifest(pieces, tmp_path / "m.csv", three_state=True)
    rows = manifest.read_text().splitlines()[1:]
    assert len(rows) == len(pieces)
    assert {r.split(",")[1] for r in rows} == {"adl"}
    assert rows[-1].split(",")[4:6] == ["35.0", "40.0"]


def test_rows_fall_into_plot_families_by_their_operating_point_suffixes() -> None:
    family = "lite0 T=3 ImageNet falling+down 160px, up before 2 s"
    assert rb.row_family(f"{family}, calibrated per site @0.4, confirm 1 s") == (
        family,
        "calibrated @0.4, 1 s",
    )
    assert rb.row_family(f"{rb.ENSEMBLE_ROW}, confirm 2 s") == (rb.ENSEMBLE_ROW, "@0.5, 2 s")
    assert rb.row_family("lite0 T=3 ImageNet @0.9") == ("lite0 T=3 ImageNet", "@0.9")
    assert rb.row_family("lite0 T=3 ImageNet falling+down 160px, confirm 2 s [fold models "
                         "retrained 2026-12-04]") == (
        "lite0 T=3 ImageNet falling+down 160px (retrained)", "@0.5, 2 s"
    )  # fmt: skip
    # Every row of a family replays the same fold models, so a family's rows share their `models`.
    by_family: dict[str, set[str]] = {}
    for name, v in rb.VARIANTS.items():
        by_family.setdefault(rb.row_family(name)[0], set()).add(v.models or name)
    assert all(len(models) == 1 for models in by_family.values()), by_family


def test_the_reverse_fold_tests_every_gmdcsa_clip_on_a_model_that_saw_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#30: trained on ASSIST-IoT and generated clips (falls labelled by their descent), tested
    on all of GMDCSA24; the leave-one-out folds stay as they were."""
    monkeypatch.setattr("experiments.realbench.items.SYNTH_CLIPS_PER_CLASS", 2)
    items = [
        rb.Item("S1", "a", Path("a.mp4"), "fall", 30.0, 2.0, 6.0, ""),
        rb.Item("S3", "b", Path("b.mp4"), "adl", 30.0, None, None, ""),
        rb.Item("A", "c", Path("c.mp4"), "fall", 30.0, 1.0, 1.8, "0,0,10,10"),
    ]
    synth = tmp_path / "synth"
    test, train = rb.split_fold(items, rb.REVERSE, tmp_path)
    assert [it.clip_id for it in test] == ["a", "b"]
    assert train[0].clip_id == "c" and {it.fold for it in train[1:]} == {"Y"}
    generated = train[1:]
    assert (synth / "manifest.csv").exists() and all(it.path.exists() for it in generated)
    falls = [it for it in generated if it.label == "fall"]
    assert falls and len(falls) * 4 == len(generated) - len(falls), "1 fall per 4 other clips"
    assert all(it.start_s is not None and it.end_s is not None for it in falls)
    rows = (rb.write_manifest(falls[:1], tmp_path / "m.csv", three_state=True)).read_text()
    lines = rows.splitlines()[1:]
    start, end = falls[0].start_s, falls[0].end_s
    assert any(f",falling,15.0,Y,{start},{end}," in line for line in lines), lines  # the descent
    assert rb.split_fold(items, "S1", tmp_path) == (items[:1], items[1:])


def test_the_cross_source_table_shows_fold_a_and_the_reverse_fold_on_their_own() -> None:
    def clip(fold: str, label: str, hit: bool) -> dict[str, Any]:
        return {"fold": fold, "label": label, "detected": hit and label == "fall",
                "false_events": int(hit and label == "adl")}  # fmt: skip

    loo = [
        [clip("A", "fall", True), clip("A", "fall", False), clip("A", "adl", True),
         clip("S1", "fall", True), clip("S1", "adl", True)],
        [clip("A", "fall", True), clip("A", "fall", True), clip("A", "adl", False),
         clip("S1", "fall", False), clip("S1", "adl", True)],
    ]  # fmt: skip
    runs = {f"r | seed {i}": {"variant": "r", "seed": i, "clips": c} for i, c in enumerate(loo)}
    runs["r | seed 0 | reverse"] = {
        "variant": "r", "seed": 0, "folds": "reverse", "falls_detected": 10, "falls": 14,
        "adl_clips_with_event": 1, "adl_clips": 9, "vtest_false_per_hour": 45.0, "clips": [],
    }  # fmt: skip
    row = rb.cross_source_table(runs, ["r", "other"]).splitlines()[2:]
    assert row == ["| r | 2 | 1.5 ± 0.7 / 2 | 0.5 ± 0.7 / 1 | 1 | 10.0 / 14 | 1.0 / 9 | 45 |"]
    assert [r["seed"] for r in rb.runs_of(runs, "r")] == [0, 1], "reverse runs kept apart"


@pytest.mark.skipif(not rb.ASSIST.is_dir(), reason="../shared/data/assist_iot absent")
def test_every_assist_iot_view_is_cut_where_that_camera_is() -> None:
    import cv2

    from edge_hf.training.data import parse_crop

    items = [it for it in rb.load_items(rb.GMDCSA, rb.ASSIST) if it.fold == "A"]
    assert len(items) == 44  # 22 clips, two views each
    swapped = sorted({it.clip_id[:2] for it in items if it.crop.startswith("427,")})
    assert swapped == ["06", "11", "12", "19"]
    for it in items:
        cap = cv2.VideoCapture(str(it.path))
        ok, frame = cap.read()
        cap.release()
        assert ok
        crop = parse_crop(it.crop)
        assert crop is not None
        x, y, w, h = crop
        view = frame[y : y + h, x : x + w]
        # a camera's picture, not the black corner beside the other camera: both of its bottom
        # corners hold a picture
        low = view[-h // 4 :]
        assert low[:, : w // 4].mean() > 5 and low[:, -w // 4 :].mean() > 5, (it.clip_id, it.crop)
