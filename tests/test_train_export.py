"""A small real training run, then eval, diagnose and a verified ONNX export of its checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from edge_hf.cli import main
from edge_hf.core.contract import ModelContract
from edge_hf.core.errors import UserError
from edge_hf.training.data import Clip
from edge_hf.training.diagnose import diagnose
from edge_hf.training.evaluate import evaluate
from edge_hf.training.export import ExportError, check_parity, export_onnx
from edge_hf.training.models import build_model, stem_conv
from edge_hf.training.synth import CLASSES
from edge_hf.training.train import TrainConfig, load_checkpoint, save_checkpoint, split_clips, train


def _tiny(data: Path, out: Path, **kw: object) -> TrainConfig:
    base = TrainConfig(
        data=str(data),
        out=str(out),
        backbone="efficientnet_lite0",  # the shipped backbone; it tells windows apart
        input_size=64,
        epochs=2,
        batch_size=8,
        samples_per_clip=2,
        val_fraction=0.5,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def trained(synth_small: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run")
    result = train(_tiny(synth_small, out))
    # Parity tests below (ONNX vs PyTorch, ensembles, int8) mean something only if the model
    # answers differently to different windows (a tiny MobileNetV3 run did not: its pooled
    # features vanish in eval mode and every window got the same logits).
    model, _, _ = load_checkpoint(result.best_checkpoint)
    with torch.no_grad():
        logits = model(torch.randn(8, 9, 64, 64, generator=torch.Generator().manual_seed(0)))
    assert float(logits.std(dim=0).mean()) > 1e-3, "fixture model is input-independent"
    return result.best_checkpoint


def test_training_writes_checkpoint_metrics_and_plots(trained: Path) -> None:
    run = trained.parent
    for name in (
        "best.pt",
        "last.pt",
        "metrics.csv",
        "metrics.json",
        "curves.png",
        "confusion.png",
    ):
        assert (run / name).stat().st_size > 0, name
    history = json.loads((run / "metrics.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2]
    assert all(np.isfinite(h["train_loss"]) and 0 <= h["val_fall_f1"] <= 1 for h in history)
    model, cfg, classes = load_checkpoint(trained)
    assert cfg.backbone == "efficientnet_lite0" and cfg.input_size == 64
    assert classes == sorted(CLASSES)
    with torch.no_grad():
        assert model(torch.randn(1, 9, 64, 64)).shape == (1, len(CLASSES))


def test_eval_json_has_the_promised_keys(trained: Path, synth_small: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "eval", "--model", str(trained), "--data",
         str(synth_small), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    for key in ("accuracy", "fall_precision", "fall_recall", "fall_f1", "per_class"):
        assert key in report
    assert set(report["per_class"]) == set(CLASSES)
    assert sum(v["support"] for v in report["per_class"].values()) == report["clips"] == 12
    assert set(report["pairs"]) == {"fall/lie_down", "sit_down/stand_up"}


def test_export_carries_the_contract_and_matches_pytorch(trained: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    contract = export_onnx(trained, path)
    proto = onnx.load(str(path))
    meta = {p.key: p.value for p in proto.metadata_props}
    assert meta["edge_hf.window"] == "3" and meta["edge_hf.input_size"] == "64,64"
    assert meta["edge_hf.channel_order"] == "time-major-rgb"
    assert json.loads(meta["edge_hf.classes"]) == sorted(CLASSES)
    assert json.loads(meta["edge_hf.mean"]) == pytest.approx([0.485, 0.456, 0.406])
    assert ModelContract.from_metadata(meta) == contract
    assert meta["edge_hf.resize"] == "linear2x-area", "the rule the model was trained with"
    old = {k: v for k, v in meta.items() if k != "edge_hf.resize"}
    assert ModelContract.from_metadata(old).resize == "area", "models from before the key"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, out.name) == ("hyperframe", "logits")
    model, _, _ = load_checkpoint(trained)
    for batch in (1, 5):  # dynamic batch
        x = torch.randn(batch, 9, 64, 64)
        got = session.run(None, {"hyperframe": x.numpy()})[0]
        with torch.no_grad():
            np.testing.assert_allclose(got, model(x).numpy(), atol=1e-3)


def test_parity_check_fails_loudly_on_a_different_model(trained: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    export_onnx(trained, path)
    other, _, _ = load_checkpoint(trained)
    head = [m for m in other.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        head.bias.add_(0.01)  # a small drift, as a broken export would show
    with pytest.raises(ExportError, match="disagree"):
        check_parity(other, path, torch.randn(2, 9, 64, 64), atol=1e-3)


def test_export_cli_and_eval_of_the_onnx_model(
    trained: Path, synth_small: Path, tmp_path: Path
) -> None:
    path = tmp_path / "cli.onnx"
    assert main(["export", "--checkpoint", str(trained), "--out", str(path)]) == 0
    from_onnx = evaluate(path, synth_small)
    from_pt = evaluate(trained, synth_small)
    assert from_onnx["confusion"] == from_pt["confusion"]


def _other_seed(trained: Path, path: Path, **cfg_changes: object) -> Path:
    """A second member for an ensemble: the trained model with other weights (as another seed's
    run would have), saved as a checkpoint of the same recipe unless `cfg_changes`."""
    model, cfg, classes = load_checkpoint(trained)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * p.std().nan_to_num() * torch.randn(p.shape, generator=g))
        head = [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1]
        head.bias.add_(torch.randn(head.bias.shape, generator=g))  # (the tiny run is near uniform)
    save_checkpoint(path, model, replace(cfg, **cfg_changes), classes)  # type: ignore[arg-type]
    return path


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_an_ensemble_gives_the_mean_of_its_members_probabilities(
    trained: Path, tmp_path: Path
) -> None:
    other = _other_seed(trained, tmp_path / "other.pt")
    members = [tmp_path / "a.onnx", tmp_path / "b.onnx"]
    export_onnx(trained, members[0])
    export_onnx(other, members[1])
    path = tmp_path / "ens.onnx"
    contract = export_onnx([trained, other], path)
    assert contract.members == 2
    meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    assert meta["edge_hf.members"] == "2" and ModelContract.from_metadata(meta) == contract
    x = torch.randn(6, 9, 64, 64).numpy()

    def probs(p: Path) -> np.ndarray:
        session = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        return _softmax(session.run(None, {"hyperframe": x})[0])

    each = [probs(p) for p in members]
    assert np.abs(each[0] - each[1]).max() > 1e-3, "the two members must differ for this test"
    # The daemon's softmax of the ensemble's output is the members' mean probability.
    np.testing.assert_allclose(probs(path), (each[0] + each[1]) / 2, atol=1e-5)
    from edge_hf.training.card import write_card

    card = write_card(path, tmp_path / "ens.md", "edge-hf export ...", "tiny data", None, "")
    assert "x2 (an ensemble: the mean of 2 models' probabilities)" in card
    # Through the CLI: one model, the same numbers.
    cli = tmp_path / "cli.onnx"
    assert main(["export", "--checkpoint", str(trained), str(other), "--out", str(cli)]) == 0
    np.testing.assert_allclose(probs(cli), probs(path), atol=1e-6)


def test_a_mirrored_export_averages_each_window_and_its_mirror_image(
    trained: Path, tmp_path: Path
) -> None:
    # A random ResNet-18 of the same recipe: a test of mirroring needs a model that tells left
    # from right clearly (the tiny trained run's logits move by hundredths between windows).
    _, cfg, classes = load_checkpoint(trained)
    torch.manual_seed(0)
    net = build_model("resnet18", cfg.window, len(classes), pretrained=None)
    model = tmp_path / "resnet.pt"
    save_checkpoint(model, net, replace(cfg, backbone="resnet18"), classes)
    plain, mirrored = tmp_path / "plain.onnx", tmp_path / "mirrored.onnx"
    assert not export_onnx(model, plain).mirrored
    contract = export_onnx(model, mirrored, mirrored=True)
    meta = {p.key: p.value for p in onnx.load(str(mirrored)).metadata_props}
    assert meta["edge_hf.mirrored"] == "1" and ModelContract.from_metadata(meta) == contract
    assert contract.members_note == ", each window also seen mirrored"
    x = torch.randn(4, 9, 64, 64).numpy()
    x[..., :20] += 2.0  # a bright left edge: its mirror image is another window

    def probs(p: Path, v: np.ndarray) -> np.ndarray:
        session = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
        return _softmax(session.run(None, {"hyperframe": v})[0])

    one, flipped = probs(plain, x), probs(plain, np.ascontiguousarray(x[..., ::-1]))
    assert np.abs(one - flipped).max() > 1e-3, "the model must see a mirrored window differently"
    np.testing.assert_allclose(probs(mirrored, x), (one + flipped) / 2, atol=1e-5)
    # A mirror-symmetric answer: the window and its mirror image score the same.
    np.testing.assert_allclose(
        probs(mirrored, x), probs(mirrored, np.ascontiguousarray(x[..., ::-1])), atol=1e-5
    )
    cli = tmp_path / "cli.onnx"
    assert main(["export", "--checkpoint", str(model), "--mirrored", "--out", str(cli)]) == 0
    np.testing.assert_allclose(probs(cli, x), probs(mirrored, x), atol=1e-6)
    meta["edge_hf.mirrored"] = "yes"
    with pytest.raises(ValueError, match="mirrored 'yes' \\(0 or 1\\)"):
        ModelContract.from_metadata(meta)


def test_an_ensemble_refuses_members_built_for_other_windows(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slower = _other_seed(trained, tmp_path / "slow.pt", interval_ms=200.0)
    with pytest.raises(ExportError, match=r"interval_ms: 100\.0 vs 200\.0"):
        export_onnx([trained, slower], tmp_path / "ens.onnx")
    with pytest.raises(ExportError, match="no checkpoint"):
        export_onnx([], tmp_path / "ens.onnx")
    bad = ["export", "--checkpoint", str(trained), str(tmp_path / "x.onnx"), "--out", "y.onnx"]
    assert main(bad) == 2
    assert "not exported .onnx" in capsys.readouterr().err


def test_user_mistakes_are_one_line_errors(
    trained: Path, synth_small: Path, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match="T must be odd"):
        train(_tiny(synth_small, tmp_path, window=4))
    with pytest.raises(UserError, match="no such model"):
        evaluate(tmp_path / "missing.pt", synth_small)
    assert main(["train", "--data", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    with pytest.raises(UserError, match=r"--motion-init 2\.0"):
        train(_tiny(synth_small, tmp_path, motion_init=2.0))
    with pytest.raises(UserError, match=r"--hard-negatives 1\.0"):
        train(_tiny(synth_small, tmp_path, hard_negatives=1.0))
    with pytest.raises(UserError, match="--stem-kernel 6"):
        train(_tiny(synth_small, tmp_path, stem_kernel=6))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match=r"junk\.pt"):
        train(_tiny(synth_small, tmp_path, init_from=str(tmp_path / "junk.pt")))


def test_diagnose_trains_three_variants_on_the_same_budget(
    synth_small: Path, tmp_path: Path
) -> None:
    cfg = _tiny(synth_small, tmp_path, epochs=1)
    results = diagnose(cfg, synth_small, tmp_path)
    names = list(results["variants"])
    assert names == ["hyperframe T=3", "single frame T=1", "time-shuffled T=3"]
    _, cfg1, _ = load_checkpoint(Path(results["variants"]["single frame T=1"]["checkpoint"]))
    _, cfgs, _ = load_checkpoint(Path(results["variants"]["time-shuffled T=3"]["checkpoint"]))
    assert cfg1.window == 1 and cfgs.shuffle_time and cfgs.epochs == cfg1.epochs == 1
    assert results["static_blocks_identical"] is True
    table = (tmp_path / "diagnose.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 4 and "sit_down/stand_up" in rows[0]  # header + one row per variant


def test_model_card_reports_metrics_and_latency(
    trained: Path, synth_small: Path, tmp_path: Path
) -> None:
    from edge_hf.training.card import write_card

    path = tmp_path / "m.onnx"
    export_onnx(trained, path)
    report = evaluate(path, synth_small)
    text = write_card(
        path, tmp_path / "m.md", "edge-hf train ...", "tiny data", report, "same data"
    )
    assert (tmp_path / "m.md").read_text() == text
    assert "window T=3" in text and "input 64x64" in text
    assert "resized by the `linear2x-area` rule" in text
    assert f"accuracy {report['accuracy']:.3f}" in text
    assert "fall/lie_down" in text and "median" in text


def test_init_from_a_checkpoint_copies_all_but_a_resized_head(
    trained: Path, synth_small: Path, tmp_path: Path
) -> None:
    cfg = _tiny(synth_small, tmp_path, epochs=1, lr=1e-9, classes=[*CLASSES, "extra"])
    cfg = replace(cfg, init_from=str(trained))
    result = train(cfg)
    new, _, classes = load_checkpoint(result.best_checkpoint)
    old, _, _ = load_checkpoint(trained)
    assert classes[-1] == "extra"
    first_new = stem_conv(new, "efficientnet_lite0").weight
    first_old = stem_conv(old, "efficientnet_lite0").weight
    torch.testing.assert_close(first_new, first_old, atol=1e-4, rtol=0)
    with pytest.raises(UserError, match="T=1"):
        train(replace(cfg, window=1, out=str(tmp_path / "w1")))


def test_init_from_carries_a_wider_stem_over(synth_small: Path, tmp_path: Path) -> None:
    """A synthetic start with a 7x7 moving-edge stem must not lose it to a shape mismatch."""
    src_cfg = _tiny(synth_small, tmp_path / "src", stem_kernel=7, motion_init=1.0)
    torch.manual_seed(0)
    src = build_model(src_cfg.backbone, 3, len(CLASSES), stem_kernel=7, motion_init=1.0)
    (tmp_path / "src").mkdir()
    save_checkpoint(tmp_path / "src" / "best.pt", src, src_cfg, list(CLASSES))
    cfg = _tiny(synth_small, tmp_path / "dst", epochs=1, lr=1e-9)
    result = train(replace(cfg, init_from=str(tmp_path / "src" / "best.pt")))
    new, new_cfg, _ = load_checkpoint(result.best_checkpoint)
    assert new_cfg.stem_kernel == 7
    torch.testing.assert_close(
        stem_conv(new, new_cfg.backbone).weight,
        stem_conv(src, src_cfg.backbone).weight,
        atol=1e-4,
        rtol=0,
    )


def test_validation_split_keeps_each_subject_on_one_side() -> None:
    """A scene (or person) seen in training would flatter validation, and the synthetic
    sit_down/stand_up twins of one scene on both sides even reward memorising it."""
    clips = [
        Clip(Path(f"{s}_{label}.mp4"), label, subject=s)
        for s in ("a", "b", "c", "d", "e")
        for label in ("fall", "sit_down", "stand_up")
    ]
    train_clips, val_clips = split_clips(clips, TrainConfig(data="x", fall_class="fall"))
    val_subjects = {c.subject for c in val_clips}
    assert len(val_subjects) == 1 and len(val_clips) == 3
    assert not val_subjects & {c.subject for c in train_clips}
    chosen = TrainConfig(data="x", val_subjects=["b", "d"])
    _, val_clips = split_clips(clips, chosen)
    assert {c.subject for c in val_clips} == {"b", "d"}
    anonymous = [replace(c, subject=None) for c in clips]
    train_clips, val_clips = split_clips(anonymous, TrainConfig(data="x"))
    assert sorted(c.label for c in val_clips) == ["fall", "sit_down", "stand_up"]
    assert len(train_clips) == 12


class _Brightness(torch.nn.Module):
    """Scores a window as a fall in proportion to its mean pixel value (class 0 is the fall)."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.classes = classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(len(x), self.classes)
        logits[:, 0] = 50 * x.mean(dim=(1, 2, 3))
        return logits


def test_hard_negatives_are_the_non_fall_windows_scored_most_like_a_fall(
    synth_small: Path,
) -> None:
    from edge_hf.training.data import HyperframeDataset, WindowSpec, decode_clips, load_clips
    from edge_hf.training.train import mine_hard_negatives

    spec = WindowSpec(3, 0.1, (48, 48))
    clips = decode_clips(load_clips(synth_small), spec.size)
    classes = ["fall", *sorted({c.label for c in clips} - {"fall"})]
    ds = HyperframeDataset(clips, classes, spec, train=True, samples_per_clip=4)
    stride = 3 * 0.1
    brightness = {
        (ci, c): ds.plain(ci, c).mean().item()
        for ci in range(len(clips))
        for c in ds.grid(ci, stride)
    }
    falls = {ci for ci in range(len(clips)) if clips[ci].label == "fall"}
    assert falls and len(falls) < len(clips)
    mined = mine_hard_negatives(_Brightness(len(classes)), ds, [0], 6, torch.device("cpu"), 5)
    assert len(mined) == 6 and len(set(mined)) == 6
    assert not {ci for ci, _ in mined} & falls, "no window of a fall clip is a negative"
    others = [b for w, b in brightness.items() if w not in mined and w[0] not in falls]
    assert min(brightness[w] for w in mined) >= max(others), "the six most fall-like windows"
    ds.set_hard(mined)
    n = len(ds)
    for slot, (ci, centre) in enumerate(mined):  # the last slots are the mined windows
        x, label, clip_index = ds[n - len(mined) + slot]
        assert clip_index == ci and label == classes.index(clips[ci].label)
        assert x.shape == ds.plain(ci, centre).shape
    assert {ds[i][2] for i in range(len(clips))} == set(range(len(clips))), "the rest stay random"
    with pytest.raises(ValueError, match="no random sample"):
        ds.set_hard(mined * n)


def test_training_with_hard_negatives_mines_after_each_epoch_but_the_last(
    synth_small: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="edge_hf.training.train")
    result = train(_tiny(synth_small, tmp_path, epochs=2, hard_negatives=0.25))
    mined = [r.getMessage() for r in caplog.records if r.getMessage().startswith("hard negatives")]
    assert len(mined) == 1, mined
    assert result.best_checkpoint.exists()
    _, cfg, _ = load_checkpoint(result.best_checkpoint)
    assert cfg.hard_negatives == 0.25, "the recipe is saved with the model"


def test_backbone_lr_share_zero_trains_the_head_and_inflated_stem_alone(
    synth_small: Path, tmp_path: Path
) -> None:
    from edge_hf.training.train import param_groups

    model = build_model("mobilenet_v3_small", 3, 4, pretrained=None)
    groups = param_groups(model, "mobilenet_v3_small", 4, 1e-3, 0.0)
    assert [g["lr"] for g in groups] == [1e-3, 0.0]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    new = [*model.classifier[-1].parameters(), *model.features[0][0].parameters()]
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in new}
    # T=1: the stem is the RGB prior's own, trained at the backbone's rate.
    rgb = build_model("mobilenet_v3_small", 1, 4, pretrained=None)
    first = param_groups(rgb, "mobilenet_v3_small", 4, 1e-3, 0.0)[0]["params"]
    assert {id(p) for p in first} == {id(p) for p in rgb.classifier[-1].parameters()}
    before = {k: v.clone() for k, v in model.named_parameters()}
    opt = torch.optim.AdamW(groups, weight_decay=0.1)
    model.train()
    loss = model(torch.randn(4, 9, 64, 64)).logsumexp(1).mean()
    loss.backward()
    opt.step()
    moved = {k for k, v in model.named_parameters() if not torch.equal(v, before[k])}
    assert moved == {"classifier.3.weight", "classifier.3.bias", "features.0.0.weight"}, moved
    # A hyper-volume: the shared backbone's inflated stem, the 1-D fusion and the head are new.
    vol = build_model("mobilenet_v3_small", 3, 4, volumes=2, pretrained=None)
    assert stem_conv(vol, "mobilenet_v3_small") is vol.backbone.features[0][0]
    fresh = param_groups(vol, "mobilenet_v3_small", 4, 1e-3, 0.1)[0]["params"]
    new = [
        *vol.head.parameters(),
        *vol.fuse.parameters(),
        *vol.backbone.features[0][0].parameters(),
    ]
    assert {id(p) for p in fresh} == {id(p) for p in new}
    run = train(_tiny(synth_small, tmp_path, epochs=1, backbone_lr=0.5))
    _, cfg, _ = load_checkpoint(run.best_checkpoint)
    assert cfg.backbone_lr == 0.5
    with pytest.raises(UserError, match=r"--backbone-lr 2\.0"):
        train(_tiny(synth_small, tmp_path, backbone_lr=2.0))
    # ... and it trains (the recipe of real-bench's hyper-volume row, tiny).
    vol_run = train(_tiny(synth_small, tmp_path / "vol", epochs=1, volumes=2, backbone_lr=0.1))
    _, vol_cfg, _ = load_checkpoint(vol_run.best_checkpoint)
    assert vol_cfg.volumes == 2


def test_static_padding_gives_the_same_model_with_a_simpler_graph(tmp_path: Path) -> None:
    """#33: EfficientNet-Lite0's TensorFlow "same" padding exported for the model's fixed size:
    no Shape/Ceil arithmetic left, the same outputs as the dynamic graph."""
    import collections

    import onnx
    import onnxruntime as ort

    from edge_hf.training.models import build_model
    from edge_hf.training.train import TrainConfig, save_checkpoint

    cfg = TrainConfig(data="none", backbone="efficientnet_lite0", input_size=64)
    with torch.random.fork_rng():
        torch.manual_seed(3)
        save_checkpoint(tmp_path / "m.pt", build_model(cfg.backbone, 3, 2), cfg, ["adl", "fall"])
    ops = {}
    for static in (False, True):
        out = tmp_path / f"static_{static}.onnx"
        export_onnx(tmp_path / "m.pt", out, static_padding=static)
        ops[static] = collections.Counter(n.op_type for n in onnx.load(str(out)).graph.node)
    assert ops[False]["Shape"] > 0 and ops[False]["Ceil"] > 0, "the dynamic graph computes pads"
    assert ops[True]["Shape"] == 0 and ops[True]["Ceil"] == 0
    assert sum(ops[True].values()) < sum(ops[False].values()) / 2
    assert ops[True]["Conv"] == ops[False]["Conv"]
    x = np.random.default_rng(0).standard_normal((3, 9, 64, 64)).astype(np.float32)
    a, b = (
        ort.InferenceSession(str(tmp_path / f"static_{s}.onnx")).run(None, {"hyperframe": x})[0]
        for s in (False, True)
    )
    np.testing.assert_allclose(a, b, atol=1e-5)
    assert np.abs(a - a.mean(axis=0)).max() > 1e-4, "the model tells the windows apart"


def test_distillation_trains_on_the_teachers_probabilities_and_checks_its_contract(
    trained: Path, synth_small: Path, tmp_path: Path
) -> None:
    from edge_hf.training.train import DistillLoss

    teacher = tmp_path / "teacher.onnx"
    export_onnx([trained, trained], teacher)  # an ensemble, as the shipped one was
    cfg = _tiny(synth_small, tmp_path / "student", epochs=1, teacher=str(teacher))
    _, _, classes = load_checkpoint(trained)
    loss = DistillLoss(replace(cfg, classes=classes), classes, torch.nn.CrossEntropyLoss())
    x = torch.randn(4, 9, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        teacher_logits = loss.teacher(x)
    y = teacher_logits.argmax(1)
    # The teacher's term is zero for a student that is the teacher, and large for one sure of
    # another class; the labels' term is the usual cross-entropy (weight 1 - 0.5).
    ce = torch.nn.CrossEntropyLoss()

    def teacher_term(logits: torch.Tensor) -> float:
        return float(loss(logits, y, x)) - 0.5 * float(ce(logits, y))

    wrong = 8.0 * torch.nn.functional.one_hot((y + 1) % len(classes), len(classes)).float()
    assert teacher_term(teacher_logits) == pytest.approx(0.0, abs=1e-5)
    assert teacher_term(wrong) > 1.0
    result = train(cfg)
    _, saved, _ = load_checkpoint(result.best_checkpoint)
    assert saved.teacher == str(teacher), "the card can say what the student was distilled from"
    with pytest.raises(UserError, match="its input_size"):
        train(_tiny(synth_small, tmp_path / "bad", epochs=1, input_size=96, teacher=str(teacher)))
