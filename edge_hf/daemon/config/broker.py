"""The `mqtt` section: the broker that receives alerts, the TLS files that reach it, and its
password (from an environment variable or a file, never only from the YAML)."""

from __future__ import annotations

import os
import ssl
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from edge_hf.core.errors import UserError
from edge_hf.daemon.config.base import MAX_MQTT_STRING, TOPIC, TOPIC_ROOM, _Section, utf8_size


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
