"""The port probe of `check`: the metrics endpoint can listen."""

from __future__ import annotations

import socket

from edge_hf.core.errors import UserError
from edge_hf.daemon.config.schema import Config


def check_metrics_port(cfg: Config) -> None:
    """The metrics endpoint can listen (for `check`); a port in use is named in one line."""
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
