"""The fall-detection daemon: config, frame sources, capture threads and rings, the pipeline, the
per-camera detectors, alert sinks (JSON lines, MQTT with its durable outbox), Prometheus, systemd.

`app` is the composition root: it reads the model contract once, checks the config against it,
builds every part in dependency order and stops them in reverse. Never imports `edge_hf.training`.
"""
