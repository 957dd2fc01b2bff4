"""Cameras at 10 Hz that the shipped real pipeline sustains on this machine, with the person stage
in its own thread and in the inference loop, side by side in one run (the capacity section of
`make bench` without its demo-model levels, for a quick check).

    python benchmarks/person_capacity.py --out benchmarks/results/capacity_real/person_thread.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from edge_hf.bench.runner import POSE_MODEL, REAL_MODEL, real_pipeline_capacity


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--video", default="../shared/data/capture/vtest.avi")
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--out", required=True, help="JSON results")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = real_pipeline_capacity(
            REAL_MODEL, Path(a.video), a.seconds, Path(tmp), POSE_MODEL, print
        )
    for r in results:
        at = [x for x in r["runs"] if x["cameras"] == r["max_cameras"] and x["sustained"]]
        print(f"{r['pipeline']}: {r['max_cameras']} cameras (first failure {r['first_failure']}), "
              f"p99 {at[-1]['latency_p99_ms'] if at else '-'} ms", flush=True)  # fmt: skip
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
