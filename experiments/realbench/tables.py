"""results.md and tradeoff.png from runs.json: mean ± sd over seeds per row, the cross-source
folds on their own.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from .variants import SHIPPED_ROW, VARIANTS


def _mean_sd(values: list[float], fmt: str = "{:.2f}") -> str:
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.mean(values))} ± {fmt.format(statistics.stdev(values))}"


def runs_of(runs: dict[str, Any], name: str, reverse: bool = False) -> list[dict[str, Any]]:
    """A row's runs over the five leave-one-out folds, or (`reverse`) over the reverse fold."""
    return [
        r for r in runs.values()
        if r["variant"] == name and (r.get("folds") == "reverse") == reverse
    ]  # fmt: skip


def _fold_a(r: dict[str, Any]) -> tuple[int, int, int, int]:
    """(falls detected, falls, activity clips with an event, activity clips) of fold A alone."""
    clips = [c for c in r["clips"] if c["fold"] == "A"]
    falls = [c for c in clips if c["label"] == "fall"]
    adl = [c for c in clips if c["label"] == "adl"]
    return (sum(c["detected"] for c in falls), len(falls),
            sum(c["false_events"] > 0 for c in adl), len(adl))  # fmt: skip


def cross_source_table(runs: dict[str, Any], rows: list[str]) -> str:
    """The two folds whose room and camera style no training clip shares, on their own: fold A
    (trained on GMDCSA24, tested on ASSIST-IoT's two views; from the leave-one-out runs) and the
    reverse fold (trained on ASSIST-IoT + generated clips, tested on all of GMDCSA24)."""
    lines = [
        "| variant | seeds | fold A: falls detected | fold A: activity clips with an event | "
        "reverse: seeds | reverse: falls detected | reverse: activity clips with an event | "
        "reverse: false events / h (vtest.avi) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in rows:
        loo, rev = runs_of(runs, name), runs_of(runs, name, reverse=True)
        if not loo and not rev:
            continue
        cells = [str(len(loo)) if loo else "-"]
        if loo:
            fa = [_fold_a(r) for r in loo]
            cells += [
                _mean_sd([f[0] for f in fa], "{:.1f}") + f" / {fa[0][1]}",
                _mean_sd([f[2] for f in fa], "{:.1f}") + f" / {fa[0][3]}",
            ]
        else:
            cells += ["-", "-"]
        cells.append(str(len(rev)) if rev else "-")
        if rev:
            cells += [
                _mean_sd([r["falls_detected"] for r in rev], "{:.1f}") + f" / {rev[0]['falls']}",
                _mean_sd([r["adl_clips_with_event"] for r in rev], "{:.1f}")
                + f" / {rev[0]['adl_clips']}",
                _mean_sd([r["vtest_false_per_hour"] for r in rev], "{:.0f}"),
            ]
        else:
            cells += ["-", "-", "-"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table(runs: dict[str, Any], rows: list[str]) -> str:
    """Mean ± sd over seeds of each row."""
    lines = [
        "| variant | seeds | falls detected | false events on daily-activity clips | "
        "false events / h (vtest.avi) | clip AUC | lying-still clips with an event | "
        "alarm delay after the fall began (median s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in rows:
        rs = runs_of(runs, name)
        if not rs:
            continue
        n_falls, n_adl, n_still = rs[0]["falls"], rs[0]["adl_clips"], rs[0]["still_clips"]
        cells = [
            _mean_sd([r["falls_detected"] for r in rs], "{:.1f}") + f" / {n_falls}",
            _mean_sd([r["adl_clips_with_event"] for r in rs], "{:.1f}") + f" / {n_adl}",
            _mean_sd([r["vtest_false_per_hour"] for r in rs], "{:.0f}"),
            _mean_sd([r["auc"] for r in rs], "{:.3f}"),
            _mean_sd([r["still_clips_with_event"] for r in rs], "{:.1f}") + f" / {n_still}",
            _mean_sd([r["delay_s_median"] for r in rs if r.get("delay_s_median") is not None])
            if any(r.get("delay_s_median") is not None for r in rs) else "-",
        ]  # fmt: skip
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table_rows(runs: dict[str, Any]) -> list[str]:
    """The rows to show: the shipped model's, every variant's, then any other in the runs (e.g.
    a recipe retrained under another name)."""
    known = [SHIPPED_ROW, *VARIANTS]
    return known + sorted({r["variant"] for r in runs.values()} - set(known))


def results_md(runs: dict[str, Any], rows: list[str]) -> str:
    """results.md: every row over the five folds, then the cross-source folds on their own."""
    return (
        table(runs, rows)
        + "\n## Cross-source folds\n\n"
        + "Fold A: trained on GMDCSA24's four subjects, tested on ASSIST-IoT's room (2 falls, 18 "
        "look-alike daily activities, two views), from the runs above. Reverse: trained on "
        "ASSIST-IoT and generated clips (`synth_items`), tested on all of GMDCSA24 "
        "(`--reverse`).\n\n" + cross_source_table(runs, rows)
    )


_ROW_NAME = re.compile(
    r"(?P<family>.*?)(?P<cal>, calibrated per site)?(?: @(?P<thr>[\d.]+))?"
    r"(?:, confirm (?P<confirm>[\d.]+) s)?(?P<note> \[.*\])?$"
)


def row_family(name: str) -> tuple[str, str]:
    """(family, operating point) of a row name: the rows that share fold models (a recipe and
    decision rule) form a family; they differ in threshold, confirmation and calibration."""
    m = _ROW_NAME.match(name)
    if m is None:  # (every group is optional: any name matches)
        raise ValueError(f"row name {name!r}")
    family = m["family"] + (" (retrained)" if m["note"] and "retrained" in m["note"] else "")
    point = f"@{m['thr'] or '0.5'}" + (f", {m['confirm']} s" if m["confirm"] else "")
    return family, ("calibrated " if m["cal"] else "") + point


def plot_tradeoff(runs: dict[str, Any], rows: list[str], path: Path) -> None:
    """Falls detected against daily-activity clips with a false event: one panel per family of
    rows (`row_family`), each row's mean with the sd over seeds as bars, every other row in
    grey behind, and the goal corner of #15 shaded."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points: dict[str, list[tuple[str, int, list[float], list[float]]]] = {}
    styles: dict[str, int] = {}
    n_falls, n_adl = 16, 27
    for name in rows:
        rs = runs_of(runs, name)
        if not rs:
            continue
        n_falls, n_adl = rs[0]["falls"], rs[0]["adl_clips"]
        family, point = row_family(name)
        xs = [float(r["adl_clips_with_event"]) for r in rs]
        ys = [float(r["falls_detected"]) for r in rs]
        points.setdefault(family, []).append((point, len(rs), xs, ys))
        styles.setdefault(point, len(styles))  # one colour and marker per operating point
    cols = 4
    nrows = max(1, -(-len(points) // cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(16, 3.3 * nrows), sharex=True, sharey=True,
                             squeeze=False)  # fmt: skip
    everyone = [(statistics.mean(x), statistics.mean(y)) for f in points.values()
                for _, _, x, y in f]  # fmt: skip
    sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0  # noqa: E731
    for ax, (family, fam_points) in zip(axes.flat, points.items(), strict=False):
        ax.add_patch(plt.Rectangle((-0.5, 14.5), 1.5, 2.0, color="tab:green", alpha=0.2))
        ax.scatter(*zip(*everyone, strict=True), s=8, color="0.85", zorder=1)
        for point, n, xs, ys in sorted(fam_points, key=lambda p: styles[p[0]]):
            i = styles[point]
            ax.errorbar(
                statistics.mean(xs), statistics.mean(ys), xerr=sd(xs), yerr=sd(ys),
                linestyle="none", capsize=2, color=f"C{i % 10}", marker="os^Dv<>"[i % 7], zorder=2,
                label=f"{point} ({n} seed{'s' * (n > 1)})",
            )  # fmt: skip
        ax.set_title("\n".join(textwrap.wrap(family, 48)), fontsize=7.5)
        ax.legend(fontsize=6, loc="lower right")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(points) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel(f"falls detected (of {n_falls})", fontsize=8)
    for col in range(cols):  # the lowest panel of each column carries the x axis
        last = axes[(len(points) - 1 - col) // cols, col] if col < len(points) else None
        if last is not None:
            last.tick_params(labelbottom=True)
            last.set_xlabel(f"activity clips with a false event (of {n_adl})", fontsize=8)
    axes[0, 0].set_xlim(-0.5, n_adl + 0.5)
    axes[0, 0].set_ylim(-0.5, n_falls + 0.5)
    fig.suptitle(
        "Real footage, leave one room out: mean ± sd over seeds per row; green: the goal of #15; "
        "grey: every other row"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
