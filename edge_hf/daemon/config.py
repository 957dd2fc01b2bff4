"""The daemon's YAML configuration, validated once into one typed object.

Every section forbids unknown keys, so a typo is an error, not a silent default. Errors are one
line each: `file:line: key.path = value: what is wrong`. Secrets (the MQTT password) come from an
environment variable or a file (systemd credentials), never only from the YAML.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from edge_hf.core.errors import UserError, shown
from edge_hf.core.files import read_small_file

if TYPE_CHECKING:
    from edge_hf.core.zones import Zones

Provider = Literal["tensorrt", "cuda", "cpu"]
NAME = re.compile(r"[A-Za-z0-9_-]+")  # always fullmatch: "$" would let "box\n" through
TOPIC = re.compile(r"[^#+\x00]+")  # an MQTT topic level path without wildcards or NUL
MAX_NAME = 64  # characters of a device or camera name (a topic level)
MAX_MQTT_STRING = 65535  # bytes (UTF-8) of any string in an MQTT packet: a topic, a client id
# What the daemon adds to a topic prefix at most: "/<device>/<camera>/attributes" (141 bytes with
# 64-character names) and Home Assistant's "/binary_sensor/<device>/<camera>_acknowledge/config"
# (163 bytes); with room to spare.
TOPIC_ROOM = 256
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # errnos of a disk that is full, not of a mistake


def utf8_size(value: str) -> int:
    """Bytes of `value` in UTF-8; one past MQTT's limit for a string UTF-8 cannot encode (a lone
    surrogate), which no broker takes."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return MAX_MQTT_STRING + 1


def is_name(value: object) -> bool:
    """A device or camera name: letters, digits, '_' and '-', at most MAX_NAME characters."""
    return isinstance(value, str) and len(value) <= MAX_NAME and NAME.fullmatch(value) is not None


def is_topic(value: object) -> bool:
    """A topic MQTT can carry to a subscriber: not empty, no wildcards or NUL, at most
    MAX_MQTT_STRING in UTF-8 (paho raises on a longer one)."""
    return (
        isinstance(value, str) and TOPIC.fullmatch(value) is not None
        and utf8_size(value) <= MAX_MQTT_STRING
    )  # fmt: skip


class _Section(BaseModel):
    # No inf/nan anywhere: `open_timeout_s: .inf` or `1e400` is a typo, never a setting.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


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


def _ssl_reason(exc: ssl.SSLError) -> str:
    """OpenSSL's reason (`KEY_VALUES_MISMATCH`) as " (key values mismatch)", or nothing."""
    return f" ({exc.reason.lower().replace('_', ' ')})" if exc.reason else ""


class TlsConfig(_Section):
    """TLS to the broker: the CA bundle that signed its certificate, this client's own."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    insecure: bool = False  # skip hostname check (self-signed test brokers only)

    @model_validator(mode="after")
    def _key_with_cert(self) -> TlsConfig:
        if self.key is not None and self.cert is None:
            raise ValueError("key is the client certificate's key: give cert too")
        return self

    def load(self) -> None:
        """Load the files as TLS will (for `check` and at start): a file that is not what its
        key says is a one-line UserError naming the key, not an SSL traceback at connect."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        for key in ("ca", "cert"):  # a client certificate loads as a trust anchor too
            path = getattr(self, key)
            try:
                if path is not None:
                    ctx.load_verify_locations(cafile=str(path))
            except ssl.SSLError as exc:
                raise UserError(
                    f"mqtt.tls.{key}: {path} holds no PEM certificate{_ssl_reason(exc)}; give "
                    + ("the CA bundle that signed the broker's certificate" if key == "ca"
                       else "this client's certificate")
                ) from None  # fmt: skip
        if self.cert is None:
            return
        try:  # an encrypted key is refused here: no one can type its passphrase under systemd
            ctx.load_cert_chain(str(self.cert), self.key and str(self.key), password=lambda: "")
        except ssl.SSLError as exc:
            key, what = (
                ("key", f"{self.key} is not an unencrypted PEM key of mqtt.tls.cert")
                if self.key is not None
                else ("cert", f"{self.cert} holds no private key: give mqtt.tls.key")
            )
            raise UserError(f"mqtt.tls.{key}: {what}{_ssl_reason(exc)}") from None


class MqttConfig(_Section):
    """The broker that receives alerts: on when `enabled`, or when a `host` is given (unless
    `enabled: false`)."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = Field(1883, ge=1, le=65535)
    topic_prefix: str = "edge_hf"
    discovery_prefix: str = "homeassistant"
    username: str | None = None
    password_env: str | None = None
    password_file: Path | None = None
    tls: TlsConfig = TlsConfig()
    qos: Literal[0, 1, 2] = 1
    protocol: Literal["5", "3.1.1"] = "5"
    keepalive_s: int = Field(30, ge=5, le=65535)  # MQTT's own limit
    # Bound on the outbox file (besides its 100 000 rows); unset: no byte bound.
    outbox_max_mb: float | None = Field(None, gt=0, le=100_000)
    client_id: str | None = None

    @field_validator("topic_prefix", "discovery_prefix")
    @classmethod
    def _topic(cls, v: str) -> str:
        if not TOPIC.fullmatch(v) or v.startswith("/") or v.endswith("/") or "//" in v:
            raise ValueError(
                "a topic prefix such as edge_hf or homeassistant: no '+' or '#' wildcards, no "
                "empty levels"
            )
        most = MAX_MQTT_STRING - TOPIC_ROOM
        if utf8_size(v) > most:
            raise ValueError(
                f"MQTT carries topics of at most {MAX_MQTT_STRING} bytes (UTF-8) and the daemon "
                f"adds up to {TOPIC_ROOM} to this prefix: use a prefix of at most {most} bytes"
            )
        return v

    @field_validator("client_id", "username")
    @classmethod
    def _mqtt_string(cls, v: str | None) -> str | None:
        if v is not None and utf8_size(v) > MAX_MQTT_STRING:
            raise ValueError(f"MQTT carries strings of at most {MAX_MQTT_STRING} bytes (UTF-8)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _on_with_a_host(cls, data: Any) -> Any:
        if isinstance(data, dict) and "host" in data and "enabled" not in data:
            return {**data, "enabled": True}
        return data

    @model_validator(mode="after")
    def _one_secret(self) -> MqttConfig:
        if self.password_env and self.password_file:
            raise ValueError("give password_env or password_file, not both")
        return self

    def password(self) -> str | None:
        """The password from the environment or a file (e.g. $CREDENTIALS_DIRECTORY/mqtt)."""
        if self.password_env:
            value = os.environ.get(self.password_env)
            if value is None:
                raise UserError(
                    f"mqtt.password_env: environment variable {self.password_env} is not set"
                )
            return value
        if self.password_file:
            try:
                return self.password_file.read_text().rstrip("\n")
            except OSError as exc:
                raise UserError(
                    f"mqtt.password_file: cannot read {self.password_file} ({exc.strerror})"
                ) from None
        return None

    def check_files(self) -> None:
        """The secret and TLS files must be readable now (at `check`), not at the first alert."""
        if not self.enabled:
            return
        self.password()
        for key in ("ca", "cert", "key"):
            path = getattr(self.tls, key)
            if path is None:
                continue
            try:
                path.open("rb").close()
            except OSError as exc:
                raise UserError(f"mqtt.tls.{key}: cannot read {path} ({exc.strerror})") from None
        self.tls.load()


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
    `second_look`: where a small (far) person was seen in the last seconds, the pose model looks
    again at a square around them cut from the camera's frame (`edge_hf.core.pose.SecondLook`),
    so a person lying far away is still found; it costs a pose-model run per such person.
    """

    model: Path | None = None
    head: Path | None = None
    rate_hz: float = Field(5.0, ge=0.5, le=30)  # below 0.5 Hz a fall is over between frames
    side: int = Field(256, ge=128, le=1024, multiple_of=32)
    decision: Literal["combined", "pose", "either", "both", "cnn"] = "combined"
    confirm_s: float = Field(1.0, ge=0, le=60)  # pose rules: down this long after the descent
    max_descent_s: float = Field(2.0, gt=0, le=10)  # pose rules: upright -> down within this
    second_look: bool = False
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


MAX_CONFIG_BYTES = 1_000_000
MAX_CONFIG_VALUES = 100_000  # after alias expansion: a few cameras need hundreds
MAX_CONFIG_DEPTH = 20


def _check_shape(root: yaml.Node | None, source: str) -> None:
    """Refuse a document whose aliases expand past MAX_CONFIG_VALUES values (a "billion laughs"
    bomb) or that nests deeper than MAX_CONFIG_DEPTH, before anything expands it."""
    size: dict[int, int] = {}  # node id -> values it expands to (shared by its aliases)
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)] if root is not None else []
    while stack:
        node, depth, done = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            raise UserError(f"{source}: nested more than {MAX_CONFIG_DEPTH} levels deep")
        if id(node) in size:
            continue
        if isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node, source)
        children = (
            [v for kv in node.value for v in kv]
            if isinstance(node, yaml.MappingNode)
            else list(node.value)
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        if done or not children:
            size[id(node)] = 1 + sum(size[id(c)] for c in children)
            if size[id(node)] > MAX_CONFIG_VALUES:
                raise UserError(
                    f"{source}: its aliases expand to more than {MAX_CONFIG_VALUES} values; "
                    "write the settings out"
                )
            continue
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)


def _refuse_duplicate_keys(node: yaml.MappingNode, source: str) -> None:
    """YAML lets a later key silently replace an earlier one (a second `cameras:` drops the first
    list): refuse it, naming both lines."""
    seen: dict[Any, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise UserError(
                f"{source}:{line}: key {key.value!r} is already set on line {seen[key.value]}; "
                "a key may appear once per section: merge the two"
            )
        seen[key.value] = line


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets ([ and {) outside quotes and comments."""
    depth = deepest = 0
    quote = ""
    for line in text.splitlines():
        for ch in line:
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif ch == "#":
                break
            elif ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth = max(0, depth - 1)
        quote = "" if quote == "'" else quote
    return deepest


def _line_index(text: str) -> dict[tuple[Any, ...], int]:
    """Map each key path in the YAML document to its 1-based line number."""
    lines: dict[tuple[Any, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[Any, ...]) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, key.value)
                lines[sub] = key.start_mark.line + 1
                walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, (*path, i))

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if root is not None:
        walk(root, ())
    return lines


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_config(text: str, source: str = "<config>") -> Config:
    """Validate YAML text; the first problem becomes a one-line UserError naming file, line, key."""
    if len(text) > MAX_CONFIG_BYTES:
        raise UserError(f"{source}: {len(text)} bytes; a config is at most {MAX_CONFIG_BYTES}")
    if _flow_depth(text) > MAX_CONFIG_DEPTH:  # before the parser, which is slow on those
        raise UserError(f"{source}: nested more than {MAX_CONFIG_DEPTH} levels deep")
    try:
        _check_shape(yaml.compose(text, Loader=yaml.SafeLoader), source)
        data = yaml.safe_load(text)
    except RecursionError:
        raise UserError(f"{source}: nested more than {MAX_CONFIG_DEPTH} levels deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise UserError(f"{source}: expected a mapping of settings at the top level")
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        lines = _line_index(text)
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        # The nearest enclosing key that appears in the file gives the line.
        line = next((lines[loc[:i]] for i in range(len(loc), -1, -1) if loc[:i] in lines), 1)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see the README's configuration reference)"
        # A section-level problem (duplicate cameras, all disabled) would echo the whole section,
        # RTSP passwords included: only a single value is ever shown.
        raw = err.get("input")
        nested = isinstance(raw, dict) or (
            isinstance(raw, list) and any(isinstance(x, (dict, list)) for x in raw)
        )
        quiet = err["type"] in ("missing", "extra_forbidden") or nested
        if isinstance(raw, str):  # a camera URL's password or ?token=… never reaches a log
            from edge_hf.daemon.sources import redact

            raw = redact(raw)
        value = "" if quiet else f" = {shown(raw)}"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise UserError(f"{source}:{line}: {_dotted(loc)}{value}: {msg}{more}") from None
    check_zones(cfg, source, _line_index(text))
    return cfg


def check_zones(cfg: Config, source: str = "config", lines: dict[Any, int] | None = None) -> None:
    """Zones are judged on the people the pose model finds: a camera with zones while the person
    stage is off is refused (one line, with the line number when `lines` has it)."""
    if cfg.person.model is not None:
        return
    for i, cam in enumerate(cfg.cameras):
        if cam.zones:
            line = (lines or {}).get(("cameras", i, "zones"))
            names = ", ".join(z.name for z in cam.zones)
            raise UserError(
                f"{source}{f':{line}' if line else ''}: cameras[{i}].zones ({names}): zones need "
                "the person stage (where each person lies), and it is off: set person.model "
                "(models/person-movenet-multipose-lightning.onnx), or remove the zones"
            )


def check_against_model(cfg: Config, contract: Any, source: str = "config") -> None:
    """Refuse settings that contradict the model's metadata, and models the daemon cannot feed;
    and cameras that insist on a hardware decoder this machine does not have."""
    from edge_hf.core.contract import CHANNEL_ORDER
    from edge_hf.daemon.sources import hardware_decoder

    for i, cam in enumerate(cfg.cameras):
        if cam.enabled and cam.decoder == "hardware" and not hardware_decoder():
            raise UserError(
                f"{source}: cameras[{i}].decoder: hardware needs OpenCV with GStreamer and its "
                "nvv4l2decoder element (a Jetson with JetPack); this machine has not: use auto"
            )

    if contract.channel_order != CHANNEL_ORDER:
        raise UserError(
            f"{source}: {cfg.model.path} has channel order {contract.channel_order!r}; the "
            f"daemon stacks frames as {CHANNEL_ORDER!r}: re-export it with edge-hf export"
        )
    if cfg.model.window is not None and cfg.model.window != contract.window:
        raise UserError(
            f"{source}: model.window = {cfg.model.window} but {cfg.model.path} was trained with "
            f"T={contract.window}; remove the key or use the matching model"
        )
    if cfg.model.input_size is not None and tuple(cfg.model.input_size) != tuple(
        contract.input_size
    ):
        raise UserError(
            f"{source}: model.input_size = {list(cfg.model.input_size)} but {cfg.model.path} "
            f"expects {list(contract.input_size)}"
        )
    from edge_hf.core.personcrop import rule_of

    rule = rule_of(contract)
    if rule is not None:
        if cfg.person.model is None:
            raise UserError(
                f"{source}: {cfg.model.path} was trained on person-centred windows "
                "(edge_hf.crop: person) and needs the person stage: set person.model "
                "(models/person-movenet-multipose-lightning.onnx), or use a full-frame model"
            )
        rate = rule.rate_hz
        if abs(cfg.person.rate_hz - rate) > 1e-6:
            raise UserError(
                f"{source}: person.rate_hz = {cfg.person.rate_hz:g} but {cfg.model.path} was "
                f"trained with person boxes at {rate:g} Hz; set person.rate_hz: {rate:g}"
            )
    for i, cam in enumerate(cfg.cameras):
        if cam.interval_ms is not None and abs(cam.interval_ms - contract.interval_ms) > 1e-6:
            raise UserError(
                f"{source}: cameras[{i}].interval_ms = {cam.interval_ms:g} but {cfg.model.path} "
                f"was trained at {contract.interval_ms:g} ms; remove the key to use the model's"
            )


class StateFiles:
    """What the daemon keeps in `state_dir`, by name: the one table every part uses."""

    OUTBOX = "outbox.sqlite3"
    LOCK = "edge-hf.lock"
    SNAPSHOTS = "snapshots"
    TRT_CACHE = "trt-cache"
    WRITE_TEST = ".write-test"
    OPEN_EVENTS = "open-events.json"
    ANNOUNCED = "announced.json"
    CLIPS = "clips"


# None of these may be a link planted by someone else (with SQLite's and the atomic writes' side
# files).
STATE_ENTRIES = (
    StateFiles.OUTBOX, *(f"{StateFiles.OUTBOX}-{x}" for x in ("wal", "shm", "journal")),
    StateFiles.LOCK, StateFiles.SNAPSHOTS, StateFiles.TRT_CACHE, StateFiles.WRITE_TEST,
    StateFiles.OPEN_EVENTS, f"{StateFiles.OPEN_EVENTS}.tmp",
    StateFiles.ANNOUNCED, f"{StateFiles.ANNOUNCED}.tmp", StateFiles.CLIPS,
)  # fmt: skip


def _refuse_unsafe_state(state: Path) -> None:
    """A state_dir others can write to, or holding links where the daemon's files go: refused."""
    mode = state.stat().st_mode
    if mode & 0o022:
        raise UserError(
            f"state_dir: {state} is writable by other users (mode {mode & 0o7777:o}); use a "
            "folder only the service user can write, e.g. /var/lib/edge-hf (chmod 700)"
        )
    for name in STATE_ENTRIES:
        if (state / name).is_symlink():
            raise UserError(
                f"state_dir: {state / name} is a symbolic link; edge-hf does not follow links in "
                "its state_dir: remove it"
            )


def ensure_state_dir(cfg: Config) -> None:
    """Create `state_dir` (outbox, snapshots, TensorRT cache) or fail in one line.

    The daemon (often root) writes there, so a folder other users can write to is refused (they
    could plant `outbox.sqlite3 -> /etc/shadow`), and so is a link in place of any of its files.
    `state_dir` itself may be a link the administrator made.
    """
    state = cfg.state_dir
    try:
        state.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"state_dir: cannot create {state} ({exc.strerror}); set state_dir to a writable "
            "folder or run as the service user"
        ) from None
    _refuse_unsafe_state(state)
    try:
        probe = state / StateFiles.WRITE_TEST
        probe.touch()
        probe.unlink()
    except OSError as exc:
        if exc.errno in DISK_FULL:  # not a mistake in the set-up: the daemon runs degraded
            logging.getLogger(__name__).error(
                "state_dir: %s is full (%s): cameras are watched and alerts sent, but new "
                "alerts are kept in memory until it has room; free some space", state,
                exc.strerror,
            )  # fmt: skip
            return
        raise UserError(
            f"state_dir: cannot write to {state} ({exc.strerror}); set state_dir to a "
            "writable folder or run as the service user"
        ) from None


def check_state_dir(cfg: Config) -> None:
    """What `ensure_state_dir` would refuse, found without creating or writing anything (for
    `check`): an unsafe folder, one this user cannot write, or one that cannot be created."""
    state = cfg.state_dir
    if state.exists():
        if not state.is_dir():
            raise UserError(f"state_dir: {state} is not a folder; point state_dir at a folder")
        _refuse_unsafe_state(state)
        target = state
    else:
        target = next((p for p in state.parents if p.exists()), Path("/"))
    if not os.access(target, os.W_OK | os.X_OK):
        what = "write to" if target == state else f"create {state} in"
        raise UserError(
            f"state_dir: this user cannot {what} {target}; set state_dir to a writable folder "
            "or run check as the service user"
        )


def check_metrics_port(cfg: Config) -> None:
    """The metrics endpoint can listen (for `check`); a port in use is named in one line."""
    import socket

    m = cfg.metrics
    if not m.enabled:
        return
    family = socket.AF_INET6 if ":" in m.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((m.host, m.port))
        except OSError as exc:
            raise UserError(
                f"metrics.port {m.port}: cannot listen on {m.host} ({exc.strerror}); pick a "
                "free port or stop what holds it"
            ) from None


def load_config(path: Path) -> Config:
    """Read and validate a YAML config file (a regular file of at most MAX_CONFIG_BYTES)."""
    try:
        text = read_small_file(path, MAX_CONFIG_BYTES, str(path), "a config").decode("utf-8")
    except OSError as exc:
        raise UserError(f"{path}: cannot read the config ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8"
        ) from None
    return parse_config(text, str(path))
