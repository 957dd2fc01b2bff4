"""The daemon's YAML configuration, validated once into one typed object.

Every section forbids unknown keys, so a typo is an error, not a silent default. Errors are one
line each: `file:line: key.path = value: what is wrong`. Secrets (the MQTT password) come from an
environment variable or a file (systemd credentials), never only from the YAML.

One idea a module, each importing only those above it in this list:
- `base`: the strict section model; the rules for names and topics (MQTT topic levels);
- `broker`: the `mqtt` section (TLS files, the password);
- `schema`: the other sections and `Config`;
- `parse`: reading the YAML (size, depth, aliases, repeated keys) and errors with their line;
- `modelcheck`: the config against the model's contract;
- `state`: state_dir, its files and why it is safe;
- `ports`: the metrics port probe of `check`.
Everything is imported from here, as before the split (the private helpers too, by
explicit re-export; `__all__` lists the public names).
"""

from edge_hf.daemon.config.base import (
    MAX_MQTT_STRING,
    MAX_NAME,
    NAME,
    TOPIC,
    TOPIC_ROOM,
    is_name,
    is_topic,
    utf8_size,
)
from edge_hf.daemon.config.base import _Section as _Section
from edge_hf.daemon.config.broker import MqttConfig, TlsConfig
from edge_hf.daemon.config.broker import _ssl_reason as _ssl_reason
from edge_hf.daemon.config.modelcheck import check_against_model
from edge_hf.daemon.config.parse import (
    MAX_CONFIG_BYTES,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_VALUES,
    check_zones,
    load_config,
    parse_config,
)
from edge_hf.daemon.config.parse import _check_shape as _check_shape
from edge_hf.daemon.config.parse import _dotted as _dotted
from edge_hf.daemon.config.parse import _flow_depth as _flow_depth
from edge_hf.daemon.config.parse import _line_index as _line_index
from edge_hf.daemon.config.parse import _refuse_duplicate_keys as _refuse_duplicate_keys
from edge_hf.daemon.config.ports import check_metrics_port
from edge_hf.daemon.config.schema import (
    CameraConfig,
    ClipsConfig,
    Config,
    DecisionRule,
    DetectionConfig,
    MetricsConfig,
    ModelConfig,
    PersonConfig,
    Provider,
    SnapshotsConfig,
    ZoneConfig,
)
from edge_hf.daemon.config.state import (
    DISK_FULL,
    STATE_ENTRIES,
    StateFiles,
    check_state_dir,
    ensure_state_dir,
)
from edge_hf.daemon.config.state import _refuse_unsafe_state as _refuse_unsafe_state

__all__ = [
    "DISK_FULL",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MAX_CONFIG_VALUES",
    "MAX_MQTT_STRING",
    "MAX_NAME",
    "NAME",
    "STATE_ENTRIES",
    "TOPIC",
    "TOPIC_ROOM",
    "CameraConfig",
    "ClipsConfig",
    "Config",
    "DecisionRule",
    "DetectionConfig",
    "MetricsConfig",
    "ModelConfig",
    "MqttConfig",
    "PersonConfig",
    "Provider",
    "SnapshotsConfig",
    "StateFiles",
    "TlsConfig",
    "ZoneConfig",
    "check_against_model",
    "check_metrics_port",
    "check_state_dir",
    "check_zones",
    "ensure_state_dir",
    "is_name",
    "is_topic",
    "load_config",
    "parse_config",
    "utf8_size",
]
