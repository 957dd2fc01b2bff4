"""The training configuration: every option of `edge-hf train`, resolved and checked.

Kept apart from the training loop (and free of torch) so that the command line can offer the
options without loading torch: `edge-hf run` and `check` never import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_hf.core.contract import POSE_MODEL, RESIZE, RESIZES, ModelContract, PersonCropRule
from edge_hf.core.errors import UserError

if TYPE_CHECKING:
    from edge_hf.training.data import WindowSpec


@dataclass
class TrainConfig:
    """Everything that defines a training run; saved, resolved, in every checkpoint."""

    data: str
    out: str = "runs/exp"
    val_data: str | None = None
    val_fraction: float = 0.2
    val_subjects: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)  # empty: sorted labels found in the data
    fall_class: str = "fall"
    down_class: str | None = None  # "on the floor after a fall", e.g. with classes adl/falling/down
    backbone: str = "resnet18"
    window: int = 3
    interval_ms: float = 100.0
    input_size: int = 112
    volumes: int = 1
    epochs: int = 10
    batch_size: int = 32
    lr: float = 1e-3
    # The pretrained layers' learning rate as a share of lr (the new head always learns at lr):
    # below 1 keeps more of what ImageNet taught them; 0 trains the head alone.
    backbone_lr: float = 1.0
    weight_decay: float = 1e-4
    label_smoothing: float = 0.05
    samples_per_clip: int = 4
    max_offset_steps: int = 2
    crop_scale_min: float = 0.7
    camera_aug: float = 0.0  # probability of each other-camera augmentation (scale, warp, ...)
    # probability of each home-condition augmentation: an infrared night picture, something
    # hiding part of the scene (`edge_hf.training.augment.condition_augment`)
    condition_aug: float = 0.0
    # Share of each epoch's samples (from the second epoch on) drawn from the windows of
    # non-fall clips that the model scored highest as a fall after the epoch before.
    hard_negatives: float = 0.0
    seed: int = 0
    pretrained: str | None = None
    weights: str | None = None
    inflate_noise: float = 0.0
    stem_kernel: int = 0  # 0: the backbone's own first-conv size
    temporal_init: float = 0.0  # fraction of conv1 filters started as temporal derivatives
    motion_init: float = 0.0  # fraction of conv1 filters started as moving-edge detectors
    freeze_bn: bool = False
    shuffle_time: bool = False
    # "a:b": a clip of a played backwards is a clip of b, and the other way round. Training then
    # shows half of those samples reversed with the label swapped: each window meets its exact
    # twin with the other label, so only the direction of the motion can separate them.
    reverse_pairs: list[str] = field(default_factory=list)
    workers: int = 0
    cache_dir: str | None = None
    background_label: str | None = None  # label for the time before each labelled segment
    init_from: str | None = None  # an edge_hf checkpoint to start from (its head is replaced)
    select: str = "best"  # "best": best.pt is the best validation epoch; "last": the last epoch
    resize: str = RESIZE  # how frames reach input_size (recorded in the model; see core.video)
    # "person": windows cut around the people the pose model finds (edge_hf.core.personcrop;
    # recorded in the model, the daemon then needs its person stage); "full": the whole frame.
    crop: str = "full"
    # Distillation: an exported model (e.g. an ensemble, `export` of several checkpoints) whose
    # probabilities on each training window are a second target, with this weight against the
    # labels' (1 - weight), both softened by the temperature. Its contract must match.
    teacher: str | None = None
    distill_weight: float = 0.5
    distill_temperature: float = 2.0
    pose_model: str = str(POSE_MODEL)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        d = {"resize": "area", **d}  # checkpoints from before the key trained with INTER_AREA
        return cls(**{k: v for k, v in d.items() if k in known})

    def validate(self) -> None:
        """Refuse values that cannot train, naming the option."""
        from edge_hf.training.models import BACKBONES

        if self.window < 1 or self.window % 2 == 0:
            raise UserError(f"--window {self.window}: T must be odd and >= 1")
        if self.interval_ms <= 0:
            raise UserError(f"--interval-ms {self.interval_ms}: must be > 0")
        if self.input_size < 32:
            raise UserError(f"--input-size {self.input_size}: must be >= 32")
        if self.epochs < 1 or self.batch_size < 1 or self.samples_per_clip < 1:
            raise UserError("--epochs, --batch-size and --samples-per-clip must be >= 1")
        if self.volumes < 1:
            raise UserError(f"--volumes {self.volumes}: must be >= 1")
        if self.backbone not in BACKBONES:
            raise UserError(f"--backbone {self.backbone!r}: choose from {', '.join(BACKBONES)}")
        if self.resize not in RESIZES:
            raise UserError(f"--resize {self.resize!r}: choose from {', '.join(RESIZES)}")
        if not 0.0 <= self.distill_weight <= 1.0 or self.distill_temperature <= 0:
            raise UserError(
                f"--distill-weight {self.distill_weight} (in [0, 1]) / --distill-temperature "
                f"{self.distill_temperature} (> 0)"
            )
        if self.teacher is not None and not Path(self.teacher).is_file():
            raise UserError(f"--teacher {self.teacher}: no such model file (an exported .onnx)")
        if self.crop not in ("full", "person"):
            raise UserError(f"--crop {self.crop!r}: choose full or person")
        if self.select not in ("best", "last"):
            raise UserError(f"--select {self.select!r}: choose best or last")
        if not 0.0 <= self.camera_aug <= 1.0:
            raise UserError(f"--camera-aug {self.camera_aug}: a probability in [0, 1]")
        if not 0.0 <= self.condition_aug <= 1.0:
            raise UserError(f"--condition-aug {self.condition_aug}: a probability in [0, 1]")
        if not 0.0 <= self.backbone_lr <= 1.0:
            raise UserError(f"--backbone-lr {self.backbone_lr}: a share of --lr in [0, 1]")
        if not 0.0 <= self.hard_negatives < 1.0:
            raise UserError(f"--hard-negatives {self.hard_negatives}: a share of samples in [0, 1)")
        if not 0.0 < self.crop_scale_min <= 1.0:
            raise UserError(f"--crop-scale-min {self.crop_scale_min}: must be in (0, 1]")
        for flag, value in (
            ("--temporal-init", self.temporal_init),
            ("--motion-init", self.motion_init),
        ):
            if not 0.0 <= value <= 1.0:
                raise UserError(f"{flag} {value}: a fraction of conv1's filters, in [0, 1]")
        if self.temporal_init + self.motion_init > 1.0:
            raise UserError(
                f"--temporal-init {self.temporal_init} + --motion-init {self.motion_init}: "
                "together at most 1 (they start different filters)"
            )
        if self.stem_kernel < 0 or (self.stem_kernel and self.stem_kernel % 2 == 0):
            raise UserError(f"--stem-kernel {self.stem_kernel}: an odd size such as 7 (0: default)")
        self.reverse_map()

    def reverse_map(self) -> dict[str, str]:
        """`reverse_pairs` as label -> label of the same clip played backwards (both ways)."""
        out: dict[str, str] = {}
        for pair in self.reverse_pairs:
            a, sep, b = pair.partition(":")
            if not sep or not a or not b or a == b or a in out or b in out:
                raise UserError(
                    f"--reverse-pairs {pair!r}: write two different labels as A:B "
                    "(each label in one pair at most)"
                )
            out[a], out[b] = b, a
        return out

    def spec(self) -> WindowSpec:
        from edge_hf.training.data import WindowSpec

        return WindowSpec(
            self.window, self.interval_ms / 1000.0, (self.input_size, self.input_size),
            self.volumes, resize=self.resize,
            person_crop=PersonCropRule() if self.crop == "person" else None,
        )  # fmt: skip


def contract_from_config(cfg: TrainConfig, classes: list[str]) -> ModelContract:
    """The contract of a model trained with `cfg`."""
    spec = cfg.spec()
    return ModelContract(
        window=cfg.window,
        interval_ms=cfg.interval_ms,
        input_size=spec.size,
        mean=spec.mean,
        std=spec.std,
        classes=tuple(classes),
        fall_class=cfg.fall_class,
        down_class=cfg.down_class,
        backbone=cfg.backbone,
        volumes=cfg.volumes,
        resize=cfg.resize,
        crop=cfg.crop,
        crop_rule=spec.person_crop.to_json() if spec.person_crop is not None else "",
    )
