"""Home Assistant MQTT discovery: pure functions from the daemon's settings to the payloads.

`MqttSink` publishes what `discovery` returns (retained, on every connect) and an empty payload
on each of `discovery_topics` of a camera that left the config; nothing here touches a broker or
a file, so the payloads are tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edge_hf import __version__

# online; slow: frames too seldom for the model's interval; overloaded: the machine skips this
# camera's windows (it does not keep up with all cameras); degraded: the person stage fails on
# this camera (the classifier decides alone); blind: the picture black or frozen; stalled: no
# frames; offline: not running.
CAMERA_STATUSES = ("online", "slow", "overloaded", "degraded", "blind", "stalled", "offline")

# Home Assistant entities per camera: (component, object id suffix); the image only for cameras
# with snapshots on. New entities go last: ids and topics of the others never change.
ENTITIES = (
    ("binary_sensor", "fall"), ("sensor", "status"), ("event", "fall_event"),
    ("button", "acknowledge"), ("image", "snapshot"), ("sensor", "down_since"),
    ("sensor", "others_present"),
)  # fmt: skip


@dataclass(frozen=True)
class Discovery:
    """What the payloads depend on: the box, its topics, its cameras."""

    device_id: str
    topic_prefix: str = "edge_hf"
    discovery_prefix: str = "homeassistant"
    cameras: tuple[str, ...] = ()
    snapshot_cameras: frozenset[str] = field(default_factory=frozenset)
    model_name: str = ""
    snapshot_type: str = "image/png"  # snapshots.mode skeleton; image/jpeg with mode image

    @property
    def base(self) -> str:
        return f"{self.topic_prefix}/{self.device_id}"


def entities(d: Discovery, camera: str, every: bool = False) -> list[tuple[str, str]]:
    """(component, discovery topic) of a camera's entities (`every`: whether used or not)."""
    return [
        (c, f"{d.discovery_prefix}/{c}/{d.device_id}/{camera}_{o}/config")
        for c, o in (ENTITIES if every else _used(d, camera))
    ]


def _used(d: Discovery, camera: str) -> list[tuple[str, str]]:
    """(component, object id suffix) of the camera's entities: the image only with snapshots."""
    return [(c, o) for c, o in ENTITIES if c != "image" or camera in d.snapshot_cameras]


def discovery_topics(d: Discovery, camera: str) -> list[str]:
    """Every discovery topic a camera may have used (emptied when it leaves the config)."""
    return [topic for _, topic in entities(d, camera, every=True)]


def discovery(d: Discovery) -> dict[str, dict[str, Any]]:
    """Every Home Assistant discovery payload, by topic: the box, then each camera's."""
    out = {f"{d.discovery_prefix}/binary_sensor/{d.device_id}/running/config": box_config(d)}
    for cam in d.cameras:
        for (component, suffix), (_, topic) in zip(_used(d, cam), entities(d, cam), strict=True):
            out[topic] = camera_config(d, cam, component, suffix)
    return out


def _origin() -> dict[str, str]:
    return {"name": "edge_hf", "sw_version": __version__}


def box_config(d: Discovery) -> dict[str, Any]:
    """The box itself: a device the cameras hang under (`via_device`), with one entity. Entity
    names are chosen so that Home Assistant's own ids (device name + entity name) equal
    `default_entity_id`, which versions before 2025.10 ignore."""
    return {
        "name": "Running",
        "unique_id": f"edge_hf_{d.device_id}_running",
        "device_class": "running",
        "state_topic": f"{d.base}/availability",
        "payload_on": "online",
        "payload_off": "offline",
        "qos": 1,
        "device": {
            "identifiers": [f"edge_hf_{d.device_id}"],
            "name": f"edge_hf {d.device_id}",
            "manufacturer": "edge_hf",
            "model": "fall detector",
            "sw_version": __version__,
        },
        "origin": _origin(),
    }


def camera_config(
    d: Discovery, camera: str, component: str = "binary_sensor", suffix: str | None = None
) -> dict[str, Any]:
    """The discovery payload of one of a camera's entities (`suffix`: which, where a component
    has several; default its first)."""
    base = f"{d.base}/{camera}"
    common: dict[str, Any] = {
        "qos": 1,
        "device": {
            "identifiers": [f"edge_hf_{d.device_id}_{camera}"],
            "name": f"{d.device_id} {camera}",
            "manufacturer": "edge_hf",
            "model": d.model_name or "hyperframe fall detector",
            "sw_version": __version__,
            "via_device": f"edge_hf_{d.device_id}",
        },
        "origin": _origin(),
    }
    box_up = {"topic": f"{d.base}/availability"}
    camera_up = {
        "topic": f"{base}/status",
        "value_template": (
            "{{ 'online' if value in ('online', 'slow', 'overloaded', 'degraded') else 'offline' }}"
        ),
    }
    # Per entity (object id suffix): its name and its own keys. Availability is the box's alone
    # unless given: a fall stays visible while its camera is stalled.
    own: dict[str, tuple[str, dict[str, Any]]] = {
        "fall": ("Fall", {
            "device_class": "safety", "state_topic": f"{base}/fall",
            "payload_on": "ON", "payload_off": "OFF",
            "json_attributes_topic": f"{base}/attributes",
        }),
        "status": ("Status", {
            "device_class": "enum", "options": list(CAMERA_STATUSES),
            "state_topic": f"{base}/status",
        }),
        "fall_event": ("Fall event", {
            "event_types": ["start", "escalation", "end"], "state_topic": f"{base}/event",
            "value_template": (
                "{{ {'event_type': value_json.type, 'event_id': value_json.event_id,"
                " 'peak_score': value_json.peak_score,"
                " 'down_s': value_json.down_s | default(none),"
                " 'end_reason': value_json.end_reason | default(none)} | to_json }}"
            ),
            "availability": [box_up, camera_up], "availability_mode": "all",
        }),
        "acknowledge": ("Acknowledge", {"command_topic": f"{base}/ack", "payload_press": "ACK"}),
        "snapshot": ("Snapshot", {
            "image_topic": f"{base}/snapshot", "content_type": d.snapshot_type,
        }),
        # "Still on the floor": since when, from the camera's last event (an escalation);
        # unknown otherwise. Home Assistant shows a timestamp as "3 minutes ago", counting.
        "down_since": ("Down since", {
            "device_class": "timestamp", "state_topic": f"{base}/attributes",
            "value_template": (
                "{{ value_json.started_at if value_json.type == 'escalation' else none }}"
            ),
        }),
        # Others upright in view when the open fall was raised (its `start`; the person stage's
        # count), kept through its escalation (which does not repeat it: `this` is the entity's
        # own state); unknown once it ended, and without the person stage. Numeric (a display
        # precision), so that Home Assistant takes "None" as unknown, not as a word.
        "others_present": ("Others present", {
            "state_topic": f"{base}/attributes", "suggested_display_precision": 0,
            "value_template": (
                "{% if value_json.type != 'end' and value_json.others_present is defined %}"
                "{{ value_json.others_present }}"
                "{% elif value_json.type == 'escalation' and this.state | is_number %}"
                "{{ this.state }}{% else %}{{ none }}{% endif %}"
            ),
        }),
    }  # fmt: skip
    suffix = suffix or next((o for c, o in ENTITIES if c == component), None)
    if (component, suffix) not in ENTITIES or suffix is None:
        raise ValueError(f"no Home Assistant entity for component {component!r} {suffix!r}")
    name, keys = own[suffix]
    return {
        "name": name,
        "unique_id": f"edge_hf_{d.device_id}_{camera}_{suffix}",
        "default_entity_id": f"{component}.{d.device_id}_{camera}_{suffix}",
        "availability": [box_up],
        **keys,
        **common,
    }
