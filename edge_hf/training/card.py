"""Model cards: what a shipped model was trained on, how it scored, and how fast it runs here."""

from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.contract import INPUT_NAME
from edge_hf.core.runtime import contract_of, open_session, read_contract


def cpu_latency_ms(
    model: Path, batch: int = 1, runs: int = 50, threads: int = 0
) -> dict[str, float]:
    """Median and p90 of ONNX Runtime CPU inference time for one batch, after warm-up."""
    session = open_session(model, threads=threads)
    contract = contract_of(session, model)
    h, w = contract.input_size
    x = np.random.default_rng(0).standard_normal(
        (batch, 3 * contract.window * contract.volumes, h, w), dtype=np.float32
    )
    for _ in range(5):
        session.run(None, {INPUT_NAME: x})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(None, {INPUT_NAME: x})
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"p50_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))]}


def _pct(v: float) -> str:
    return f"{v:.3f}"


def write_card(
    model: Path,
    out: Path,
    train_command: str,
    data_note: str,
    test_report: dict[str, Any] | None,
    test_note: str,
    diagnose_md: str | None = None,
    diagnose_title: str = "Diagnose (same data and budget)",
) -> str:
    """Write the Markdown model card for `model`; returns its text."""
    c = read_contract(model)
    lat = cpu_latency_ms(model)
    size_mb = model.stat().st_size / 1e6
    crop_note = (
        [f"- person-centred windows (`edge_hf.crop: person`, rule {c.crop_rule}): the daemon "
         "needs its person stage (`person.model`) to run it"]
        if c.crop == "person" else []
    )  # fmt: skip
    lines = [
        f"# {model.name}",
        "",
        f"- backbone: {c.backbone}{c.members_note}, window T={c.window}, "
        f"interval {c.interval_ms:g} ms "
        f"(span {(c.window - 1) * c.interval_ms:g} ms), input {c.input_size[0]}x{c.input_size[1]}",
        f"- classes: {', '.join(c.classes)} (fall class: `{c.fall_class}`"
        + (f", down class: `{c.down_class}`)" if c.down_class else ")"),
        f"- normalisation: mean {list(c.mean)}, std {list(c.std)} (0-1 scale), channel order "
        f"`{c.channel_order}`; frames resized by the `{c.resize}` rule (the daemon uses the same)",
        *crop_note,
        f"- file: {size_mb:.1f} MB ONNX (opset 17, dynamic batch, input `hyperframe` "
        "[N, 3T, H, W], output `logits` [N, C])",
        "",
        "## Training",
        "",
        data_note,
        "",
        "```sh",
        train_command,
        "```",
        "",
        "## Held-out results",
        "",
        test_note,
    ]
    if test_report is not None:
        lines += _report_lines(test_report)
    if diagnose_md:
        lines += ["", f"## {diagnose_title}", "", diagnose_md.strip()]
    lines += [
        "",
        "## CPU latency",
        "",
        f"ONNX Runtime CPU, batch 1: median {lat['p50_ms']:.1f} ms, p90 {lat['p90_ms']:.1f} ms "
        f"({platform.machine()}, {_cpu_count()} cores, measured by `edge-hf card`).",
        "",
    ]
    text = "\n".join(lines)
    out.write_text(text)
    return text


def _report_lines(r: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"- clips: {r['clips']}, accuracy {_pct(r['accuracy'])}, macro F1 {_pct(r['macro_f1'])}",
        f"- fall precision / recall / F1: {_pct(r['fall_precision'])} / "
        f"{_pct(r['fall_recall'])} / {_pct(r['fall_f1'])}",
    ]
    for pair, s in r.get("pairs", {}).items():
        lines.append(
            f"- ambiguous pair {pair}: two-way F1 {_pct(s['macro_f1'])} ({s['clips']} clips)"
        )
    lines += ["", "| class | precision | recall | F1 | clips |", "| --- | --- | --- | --- | --- |"]
    for name, s in r["per_class"].items():
        lines.append(
            f"| {name} | {_pct(s['precision'])} | {_pct(s['recall'])} | {_pct(s['f1'])} | "
            f"{s['support']} |"
        )
    return lines


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
