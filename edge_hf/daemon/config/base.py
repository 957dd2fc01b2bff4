"""What every section is built on: the strict model (no unknown keys, no inf or nan), and the
rules for the names and topics that become MQTT topic levels."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

NAME = re.compile(r"[A-Za-z0-9_-]+")  # always fullmatch: "$" would let "box\n" through
TOPIC = re.compile(r"[^#+\x00]+")  # an MQTT topic level path without wildcards or NUL
MAX_NAME = 64  # characters of a device or camera name (a topic level)
MAX_MQTT_STRING = 65535  # bytes (UTF-8) of any string in an MQTT packet: a topic, a client id
# What the daemon adds to a topic prefix at most: "/<device>/<camera>/attributes" (141 bytes with
# 64-character names) and Home Assistant's "/binary_sensor/<device>/<camera>_acknowledge/config"
# (163 bytes); with room to spare.
TOPIC_ROOM = 256


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
