"""`edge-hf bench`: window preparation and inference against the naive way and the floor (`prep`),
cameras per machine and alert latency through a real broker (`live`), the runner (`runner`) and
the tables of bench.md (`report`).

Nothing but the CLI imports this package; it may use the daemon, the toolkit and core.
"""
