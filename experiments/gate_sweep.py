"""#40: which decision settings catch the falls the pose stage loses (at night, half hidden, on a
portrait phone, beside a second person) without more events on daily life and the negatives?

    python -m experiments.real_benchmark --out benchmarks/results/real --seeds 0 1 2 --traces \
        --conditions "as recorded" night partial portrait "second person" far
    python -m experiments.gate_sweep --gate unseen_s=0 --gate unseen_s=2

The first command replays the conditions benchmark and keeps, per fold and camera, every window
score and pose verdict its detector was fed (`realbench.scoring.Calls`, under
`<out>/work/traces`). This one feeds the same streams to a fresh `FallDetector` at each `--gate`
(its keyword arguments and `DetectionConfig` fields, 'name=value,...'; none named: the traced
settings) and counts events as the benchmark does: no model runs, so a setting costs seconds.
It first checks that the traced settings give back the traced events (they must: the detector is
the daemon's). Prints a markdown table per condition and seed and writes `<out>/gate_sweep.md`.
"""

from __future__ import annotations

import argparse
import inspect
import pickle
import statistics
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from edge_hf.daemon.config import DetectionConfig
from edge_hf.daemon.events import FallDetector
from experiments.realbench.scoring import redecide, score_fold, summarise

KWARGS = {p for p in inspect.signature(FallDetector.__init__).parameters if p != "self"}


def gate_of(spec: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(FallDetector keyword arguments, DetectionConfig fields) from 'name=value,...'."""
    kw: dict[str, Any] = {}
    det: dict[str, Any] = {}
    for part in filter(None, spec.split(",")):
        name, _, value = part.partition("=")
        try:
            v: Any = float(value)
        except ValueError:
            raise SystemExit(f"--gate {spec!r}: {name} = {value!r} is not a number") from None
        if name in KWARGS:
            kw[name] = v
        elif name in DetectionConfig.model_fields:
            det[name] = v
        else:
            known = sorted(KWARGS | set(DetectionConfig.model_fields))
            raise SystemExit(f"--gate {spec!r}: no setting {name!r}; known: {known}")
    return kw, det


def load(traces: Path) -> dict[str, list[dict[str, Any]]]:
    """Trace files by row ('<condition>_s<seed>'), each a list of its folds' traces."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for f in sorted(traces.glob("*.pkl")):
        row = f.stem.rsplit("_", 1)[0]
        with open(f, "rb") as fh:
            rows.setdefault(row, []).append(pickle.load(fh))
    return rows


def detectors(
    st: dict[str, Any], kw: dict[str, Any] | None = None, det: dict[str, Any] | None = None
) -> Callable[[str], FallDetector]:
    """Fresh detectors set up as a trace's (`st`: its settings), with FallDetector keyword
    arguments `kw` and DetectionConfig fields `det` changed."""
    cfg = st["cfg"].model_copy(update=det or {})
    args = {"decision": st["decision"], "when_others": st["when_others"],
            "lost_s": st.get("lost_s", 0.0), **(kw or {})}  # fmt: skip
    return lambda name: FallDetector(name, "bench", cfg, st["threshold"], st["model"], **args)


def spans_of(tr: dict[str, Any], kw: dict[str, Any] | None = None,
             det: dict[str, Any] | None = None) -> dict[str, list[list[float]]]:  # fmt: skip
    """Each camera's event spans, its trace fed again (`detectors`)."""
    calls = {n: c["calls"] for n, c in tr["cameras"].items()}
    return {
        n: spans for n, (spans, _) in redecide(calls, detectors(tr["settings"], kw, det)).items()
    }


def decide(folds: list[dict[str, Any]], spec: str) -> dict[str, Any]:
    """One row's figures (`summarise`) with the streams fed again at `spec`."""
    kw, det = gate_of(spec)
    clips: list[dict[str, Any]] = []
    neg_events = 0
    hours = 0.0
    for tr in folds:
        cams = tr["cameras"]
        spans = spans_of(tr, kw, det)
        replayed = {n: {**c, "events": spans[n]} for n, c in cams.items()}
        if tr["test"]:
            clips += score_fold(tr["test"], replayed)
        for n in tr["negatives"]:
            neg_events += len(spans[n])
            hours += len(cams[n]["scores"]) * cams[n]["interval_s"] / 3600
    out = summarise(clips, neg_events, hours or float("nan"))
    out["missed"] = [c["clip"] for c in clips if c["label"] == "fall" and not c["detected"]]
    out["false"] = [c["clip"] for c in clips if c["label"] != "fall" and c["false_events"]]
    return out


def check(folds: list[dict[str, Any]]) -> None:
    """The traced settings must give back the traced events, camera by camera."""
    for tr in folds:
        spans = spans_of(tr)
        for n, c in tr["cameras"].items():
            got = [[round(x, 3) for x in s] for s in spans[n]]
            want = [[round(x, 3) for x in s] for s in c["events"]]
            if got != want:
                raise SystemExit(f"{n}: fed again, the traced settings give {got}, traced {want}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="benchmarks/results/real")
    p.add_argument("--gate", action="append", default=[], help="'name=value,...' (repeatable)")
    p.add_argument("--rows", nargs="*", default=[], help="only these rows (e.g. night_s0)")
    a = p.parse_args()
    rows = load(Path(a.out) / "work" / "traces")
    if a.rows:
        rows = {r: f for r, f in rows.items() if r in a.rows}
    if not rows:
        raise SystemExit(f"no traces under {a.out}/work/traces: run the first command of "
                         "python -m experiments.gate_sweep --help")  # fmt: skip
    gates = a.gate or [""]
    for folds in rows.values():
        check(folds)
    head = ("condition", "gate", "seeds", "falls /16", "activity clips with an event /27",
            "lying-still clips with an event /2", "events on the negatives",
            "falls missed (first seed)")  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    conditions = sorted({r.rsplit("_s", 1)[0] for r in rows})
    for cond in conditions:
        seeds = sorted(r for r in rows if r.rsplit("_s", 1)[0] == cond)
        for g in gates:
            res = [decide(rows[r], g) for r in seeds]

            def cell(k: str, res: list[dict[str, Any]] = res) -> str:
                v = [r[k] for r in res]
                sd = statistics.stdev(v) if len(v) > 1 else 0.0
                return f"{statistics.mean(v):.1f} ± {sd:.1f}"

            lines.append(f"| {cond} | {g or 'as traced'} | {len(res)} | {cell('falls_detected')} | "
                         f"{cell('adl_clips_with_event')} | {cell('still_clips_with_event')} | "
                         f"{cell('vtest_events')} | {', '.join(res[0]['missed'])} |")  # fmt: skip
            print(lines[-1], flush=True)
    command = "python -m experiments.gate_sweep " + " ".join(f"--gate '{g}'" for g in a.gate)
    title = (f"# Decision settings on the traced conditions benchmark (#40)\n\n`{command}` "
             f"({date.today()}; {len(rows)} traced rows, every fold; no model runs: the traced "
             "settings gave back the traced events on every camera)\n\n")  # fmt: skip
    (Path(a.out) / "gate_sweep.md").write_text(title + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
