"""The sections of the daemon's configuration and `Config`, the whole of it.

Every section forbids unknown keys, so a typo is an error, not a silent default.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from edge_hf.core.contract import POSE_RATE_HZ, POSE_SIDE
from edge_hf.daemon.config.base import NAME, _Section
from edge_hf.daemon.config.broker import MqttConfig

if TYPE_CHECKING:
    from edge_hf.core.zones import Zones

Provider = Literal["tensorrt", "cuda", "cpu"]
# What raises an event (`person.decision`; "cnn", the classifier alone, without the person stage).
DecisionRule = Literal["combined", "pose", "either", "both", "cnn"]


class ModelConfig(_Section):
    """The ONNX model and how to run it."""

    path: Path
    providers: list[Provider] = Field(["tensorrt", "cuda", "cpu"], min_length=1)
    # Unset: the model's own operating point (edge_hf.threshold in its metadata), else 0.5.
    threshold: float | None = Field(None, gt=0.0, lt=1.0)
    fp16: bool = True  # TensorRT fp16 engine
    # Optional expectations, checked against the model file's own metadata at start.
    window: int | None = Field(None, ge=1)
    input_size: tuple[int, int] | None = None

    @field_validator("providers")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("each provider may appear once")
        return v


class DetectionConfig(_Section):
    """How window scores become fall events."""

    smoothing: Literal["k_of_n", "median"] = "k_of_n"
    k: int = Field(2, ge=1)
    n: int = Field(3, ge=1)
    end_after: int = Field(20, ge=1)  # windows below threshold that end an event
    max_event_s: float = Field(120.0, gt=0, le=7 * 24 * 3600)
    cooldown_s: float = Field(10.0, ge=0)
    # With a model that has a `down` class: a fall is raised only once the person has stayed down
    # this long after the descent (0: at once, on the descent alone). Costs this much latency.
    confirm_s: float | None = Field(None, ge=0, le=60)  # unset: the model's, else 0
    # With confirm_s: a descent counts only if the person was up before it (mean P(up) >= 0.5
    # over the up_before_s seconds that end half a second before it; under a second of history
    # counts as up). A camera that reads "falling or down" while people walk about never alarms
    # on them. 0: off.
    up_before_s: float = Field(0.0, ge=0, le=60)
    # With confirm_s: what the person must be over it, on average >= 0.5: "not_up" (P(falling)
    # + P(down): a person still sinking counts) or "down" (P(down) alone: a camera that reads
    # "falling" while people walk about does not confirm itself).
    confirm_on: Literal["not_up", "down"] = "not_up"
    # JPEG of the window's centre frame at the camera's resolution, written under
    # state_dir/snapshots before the event is sent and published (MQTT `<camera>/snapshot`);
    # the oldest are deleted past snapshot_keep files or snapshot_max_mb.
    snapshot: bool = False
    snapshot_keep: int = Field(200, ge=1, le=100_000)
    snapshot_max_mb: float = Field(500.0, gt=0, le=1_000_000)
    # Latched (the care default): a fall stays on until someone acknowledges it (MQTT
    # `<camera>/ack`, the Home Assistant button) or for clear_after_s; the person lying still
    # does not clear it. Unlatched: it ends when the person is up again (end_after windows).
    latch: bool = True
    clear_after_s: float = Field(3600.0, gt=0, le=7 * 24 * 3600)
    # With the person stage: the fallen person seen up again (upright and as tall as before for
    # 2 s) ends the event, latched too, end_reason `got_up` with `down_s`. Off by default: a
    # latched alarm is cleared by a person, and a person sitting up on the floor is not up.
    end_when_up: bool = False
    # "Still on the floor": a fall whose person is still down this long after its start (the
    # pose rules see someone down or fallen; without the person stage, the model's P(falling or
    # down)) sends an `escalation` event (same event_id, `down_s`) once. 0 or null: never.
    escalate_after_s: float | None = Field(60.0, ge=0, le=7 * 24 * 3600)

    @model_validator(mode="after")
    def _k_le_n(self) -> DetectionConfig:
        if self.k > self.n:
            raise ValueError(f"k ({self.k}) must not exceed n ({self.n})")
        return self


class ZoneConfig(_Section):
    """A zone of a camera's picture (`edge_hf.core.zones`): `ignore` (lying inside raises no fall:
    a bed, a sofa) or `floor` (where there are any, only lying inside one counts)."""

    name: str = Field(min_length=1, max_length=64)
    kind: Literal["ignore", "floor"]
    # [x, y] corners in order around the zone, 0-1 of the camera's view (its crop, if set)
    points: list[tuple[float, float]] = Field(max_length=100)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.fullmatch(v):
            raise ValueError("use letters, digits, '_' and '-' only (events name the zone)")
        return v

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, v: Any) -> Any:
        if v not in ("ignore", "floor"):
            raise ValueError(
                "use ignore (lying inside raises no fall: a bed, a sofa) or floor (where there "
                "are floor zones, only lying inside one counts)"
            )
        return v

    @field_validator("points")
    @classmethod
    def _polygon(cls, v: list[tuple[float, float]]) -> list[tuple[float, float]]:
        from edge_hf.core.zones import polygon_problem

        problem = polygon_problem(v)
        if problem is not None:
            raise ValueError(f"{problem} (`edge-hf zones` draws a camera's zones to check them)")
        return v


class CameraConfig(_Section):
    """One camera: a file, /dev/videoN or index, rtsp/http URL, or a GStreamer pipeline."""

    name: str = Field(min_length=1, max_length=64)
    source: str = Field(min_length=1)
    interval_ms: float | None = Field(None, gt=0)  # default: the model's
    enabled: bool = True
    realtime: bool = True  # files: play at their own frame rate (False: as fast as possible)
    loop: bool = False  # files: start again at the end
    stall_timeout_s: float = Field(5.0, gt=0, le=3600)
    open_timeout_s: float = Field(10.0, gt=0, le=3600)
    # A picture that stays black or does not change at all this long (lens covered, sensor dead,
    # a frozen stream) makes the camera's status `blind`; 0: never.
    blind_after_s: float = Field(60.0, ge=0, le=7 * 24 * 3600)
    # rtsp:// sources: "auto" decodes on the Jetson's hardware decoder (GStreamer nvv4l2decoder)
    # when OpenCV has GStreamer and the element exists, else in software (FFmpeg); "hardware"
    # insists (an error if unavailable), "software" never tries it.
    decoder: Literal["auto", "hardware", "software"] = "auto"
    # [x, y, w, h] in pixels: the part of each frame the model sees (one view of a frame that
    # joins several, or the room without a window); default the whole frame.
    crop: tuple[int, int, int, int] | None = None
    # This camera's fall threshold (e.g. from `edge-hf calibrate`); default model.threshold.
    threshold: float | None = Field(None, gt=0.0, lt=1.0)
    # This camera's detection settings: the keys given here override the top-level `detection`
    # (merged by Config before validation, so errors name cameras[i].detection.<key>).
    detection: DetectionConfig | None = None
    # Zones of this camera's picture (`ZoneConfig`); they need the person stage (person.model).
    zones: list[ZoneConfig] = Field([], max_length=50)

    @field_validator("zones")
    @classmethod
    def _zone_names(cls, v: list[ZoneConfig]) -> list[ZoneConfig]:
        names = [z.name for z in v]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"zone names are unique per camera (repeated: {', '.join(dupes)})")
        return v

    def zone_rules(self) -> Zones:
        """The camera's zones as the detector applies them."""
        from edge_hf.core.zones import Zone, Zones

        return Zones(tuple(Zone(z.name, z.kind, tuple(z.points)) for z in self.zones))

    @field_validator("crop")
    @classmethod
    def _crop(cls, v: tuple[int, int, int, int] | None) -> tuple[int, int, int, int] | None:
        from edge_hf.core.video import check_crop  # (cv2 only when a crop is given)

        return v if v is None else check_crop(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.fullmatch(v):
            raise ValueError("use letters, digits, '_' and '-' only (it becomes an MQTT topic)")
        return v


class PersonConfig(_Section):
    """The person/pose stage (MoveNet MultiPose): off unless `model` is set.

    At `rate_hz` per camera (its own rate, below the classifier's) the newest frame, scaled so its
    long side is `side`, goes through the pose model; the pose rules (`edge_hf.core.posefall`)
    say whether someone is down and whether a fall happened. `decision` says what raises an
    event: `combined` (the pose rules, or the classifier while the pose rules see someone down),
    `pose` (the pose rules alone), `either` (the classifier or the pose rules), `both` (the
    classifier, only while the pose rules see someone down), `cnn` (the classifier alone; the
    pose stage only logs). `head`: a learned pose head file (`edge_hf.core.posehead`, made by
    experiments/pose_head.py) decides "down after a fall" instead of the rules' thresholds.
    `sequence`: a pose-sequence model (`edge_hf.core.poseseq`, made by experiments/pose_seq.py)
    reads each tracked person's last seconds of poses; `sequence_mode` `join` (its P(falling)
    also confirms a fall the rules miss, e.g. from a camera the person fell towards) or
    `decide` (it alone says fallen and up again).
    `second_look`: where a small (far) person was seen in the last seconds, the pose model looks
    again at a square around them cut from the camera's frame
    (`edge_hf.core.secondlook.SecondLook`), so a person lying far away is still found; it costs
    a pose-model run per such person, live only from the stage's spare time (`LookBudget`).
    """

    model: Path | None = None
    head: Path | None = None
    sequence: Path | None = None
    sequence_mode: Literal["join", "decide"] = "join"
    rate_hz: float = Field(POSE_RATE_HZ, ge=0.5, le=30)  # < 0.5 Hz: a fall over between frames
    side: int = Field(POSE_SIDE, ge=128, le=1024, multiple_of=32)
    decision: DecisionRule = "combined"
    confirm_s: float = Field(1.0, ge=0, le=60)  # pose rules: down this long after the descent
    max_descent_s: float = Field(2.0, gt=0, le=10)  # pose rules: upright -> down within this
    second_look: bool = False
    # With decision `combined`/`both` and confirm_s: a descent the gate refuses still raises the
    # alarm once confirmed if the pose stage lost the person at it, finding nobody this long since
    # (a person who falls out of its sight: in the dark, behind furniture); and with `combined`,
    # `pose` or `either`, a person the pose rules saw go down (a sudden descent) whom the stage
    # lost right after, finding nobody this long and at least FELL_OUT_S (3 s), is a pose fall
    # (with a model that says "down" and read them up before). The conditions are in seen.py
    # (`PeopleSeen.lost_at`, `PeopleSeen.fell_out`) and the README. 0: off.
    lost_s: float = Field(1.0, ge=0, le=30)
    # Another person upright in view when a fall is raised (the event's `others_present`):
    # `alert` raises it as always, `flag` raises it marked (`flag: others_present`), `suppress`
    # raises nothing (a carer is there).
    when_others_present: Literal["alert", "flag", "suppress"] = "alert"


class SnapshotsConfig(_Section):
    """What a fall's snapshot (`detection.snapshot`) shows: `skeleton` (the default) the person
    stage's people as stick figures on a plain background at the camera's resolution (PNG: no
    image of anyone leaves the box), or `image` the camera's picture (JPEG)."""

    mode: Literal["skeleton", "image"] = "skeleton"


class ClipsConfig(_Section):
    """An event clip around each fall's start (`pre_s` before, `post_s` after): `skeleton` an
    animated GIF of the person stage's people (needs `person.model`), `image` an MP4 of the
    frames the camera's ring holds (as the model sees them). Written under state_dir/clips by
    the alert sinks, the oldest deleted past `keep` files or `max_mb`, announced on MQTT."""

    enabled: bool = False
    pre_s: float = Field(5.0, ge=0, le=30)
    post_s: float = Field(10.0, ge=0, le=60)
    mode: Literal["skeleton", "image"] = "skeleton"
    keep: int = Field(50, ge=1, le=100_000)
    max_mb: float = Field(500.0, gt=0, le=1_000_000)


class MetricsConfig(_Section):
    """The Prometheus endpoint (loopback by default: scores reveal activity in a room)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(9108, ge=1, le=65535)


class Config(_Section):
    """The whole daemon configuration."""

    device_id: str = Field(min_length=1, max_length=64)
    model: ModelConfig
    cameras: list[CameraConfig] = Field(min_length=1)
    detection: DetectionConfig = DetectionConfig()
    mqtt: MqttConfig = MqttConfig()
    metrics: MetricsConfig = MetricsConfig()
    person: PersonConfig = PersonConfig()
    snapshots: SnapshotsConfig = SnapshotsConfig()
    clips: ClipsConfig = ClipsConfig()
    stats_interval_s: float = Field(60.0, gt=0)  # retained MQTT stats topic
    state_dir: Path = Path("/var/lib/edge-hf")
    max_batch: int = Field(16, ge=1)

    @field_validator("device_id")
    @classmethod
    def _device(cls, v: str) -> str:
        if not NAME.fullmatch(v):
            raise ValueError("use letters, digits, '_' and '-' only (it becomes an MQTT topic)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _camera_detection(cls, data: Any) -> Any:
        """A camera's `detection` keys override the top-level ones (merged, then validated)."""
        if not isinstance(data, dict) or not isinstance(data.get("cameras"), list):
            return data
        top = data.get("detection") or {}
        if not isinstance(top, dict):
            return data
        cams = []
        for cam in data["cameras"]:
            if isinstance(cam, dict) and isinstance(cam.get("detection"), dict):
                cam = {**cam, "detection": {**top, **cam["detection"]}}
            cams.append(cam)
        return {**data, "cameras": cams}

    def detection_for(self, camera: CameraConfig) -> DetectionConfig:
        """The detection settings that apply to `camera`."""
        return camera.detection or self.detection

    @model_validator(mode="after")
    def _unique_cameras(self) -> Config:
        names = [c.name for c in self.cameras]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"camera names must be unique (repeated: {', '.join(dupes)})")
        if not any(c.enabled for c in self.cameras):
            raise ValueError("every camera is disabled: enable at least one")
        return self

    def enabled_cameras(self) -> list[CameraConfig]:
        return [c for c in self.cameras if c.enabled]
