"""PNG plots of benchmark and study records (matplotlib, drawn off-screen).

- ``accept_hist``: tokens accepted per step, a histogram per method, one panel per task.
- ``speedup_vs_budget``: speedup over plain decoding against the draft budget, a line per
  method, one panel per task (bench records with several ``budgets``, or study records of a
  sweep over ``draft_max`` projected with a verify-cost profile).
- ``verify_cost``: the verification step's cost against draft tokens (a verify-cost
  profile), with the step budget the default rule chose most often when records are given.
- ``plot_all``: whichever of the three the records allow, into a folder.
Each function returns the path it wrote.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

PathLike = Union[str, Path]
MAX_BIN = 10  # accepted draft tokens 0..10, then ">10" (as the program's tables)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _cells(records: Any) -> list[dict[str, Any]]:
    if hasattr(records, "to_dict") and hasattr(records, "columns"):  # a DataFrame
        return list(records.to_dict("records"))
    return [dict(c) for c in records]


def _label(c: Mapping[str, Any]) -> str:
    b = c.get("budget")
    return f"{c['method']}@{b}" if b not in (None, "", "default") else str(c["method"])


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, 3)
    return math.ceil(n / cols), cols


def accept_hist(records: Any, path: PathLike, *, title: str | None = None) -> Path:
    """Histogram of accepted draft tokens per step (share of steps, 0..10 and >10) per
    method, one panel per task; plain decoding is left out (it accepts nothing). With
    several budgets, the default budget's cells (or the first one's) are drawn."""
    plt = _plt()
    cells = [c for c in _cells(records) if c["method"] != "none" and c.get("accept_hist") and c.get("steps")]
    if not cells:
        raise ValueError("accept_hist: no cell with an accepted-length histogram (run some drafting method)")
    budgets = {c.get("budget") for c in cells}
    keep = "default" if "default" in budgets else None if None in budgets else sorted(budgets, key=str)[0]
    cells = [c for c in cells if c.get("budget") == keep]
    tasks = list(dict.fromkeys(c["task"] for c in cells))
    methods = list(dict.fromkeys(c["method"] for c in cells))
    rows, cols = _grid(len(tasks))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False, sharey=True)
    width = 0.8 / len(methods)
    xs = list(range(MAX_BIN + 2))
    cmap = plt.get_cmap("tab10")
    for ti, task in enumerate(tasks):
        ax = axes[ti // cols][ti % cols]
        for mi, m in enumerate(methods):
            c = next((c for c in cells if c["task"] == task and c["method"] == m), None)
            if c is None:
                continue
            h = list(c["accept_hist"])
            bins = h[: MAX_BIN + 1] + [0] * max(0, MAX_BIN + 1 - len(h)) + [sum(h[MAX_BIN + 1:])]
            total = sum(h) or 1
            ax.bar([x - 0.4 + width * (mi + 0.5) for x in xs], [100.0 * b / total for b in bins], width,
                   label=f"{m} ({c['mean_accepted']:.2f} tok/step)", color=cmap(mi % 10))
        ax.set_title(f"task: {task}")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in range(MAX_BIN + 1)] + [f">{MAX_BIN}"])
        ax.set_xlabel("draft tokens accepted in a step")
        if ti % cols == 0:
            ax.set_ylabel("% of steps")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, title="method (mean tokens/step)", title_fontsize=8)
    for k in range(len(tasks), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    suffix = f", budget {keep}" if keep not in (None, "default") else ""
    fig.suptitle(title or f"Tokens accepted per step{suffix}")
    fig.tight_layout()
    return _save(fig, plt, path)


def _budget_x(b: Any) -> float | None:
    try:
        return float(b)
    except (TypeError, ValueError):
        return None


def speedup_vs_budget(records: Any, path: PathLike, *, title: str | None = None) -> Path:
    """Speedup over plain decoding (same run, same requests) against the draft budget
    (draft tokens per step at most), a line per method, one panel per task; the engine's
    default budget (sized each step from the verify cost curve) is a dashed level line."""
    plt = _plt()
    cells = [dict(c) for c in _cells(records) if c["method"] != "none"]
    projected = not any(c.get("speedup") is not None for c in cells)
    for c in cells:  # a study's speedups are projections onto a verify-cost profile
        if projected:
            c["speedup"] = c.get("projected_speedup")
    cells = [c for c in cells if c.get("speedup") is not None]
    if not cells:
        raise ValueError("speedup_vs_budget: no cell with a speedup (bench records, or study records projected with a cost profile)")
    if not any(_budget_x(c.get("budget")) is not None for c in cells):
        raise ValueError("speedup_vs_budget: no numeric draft budget in the records (bench --budgets 2,4,8,..., or a study sweep)")
    tasks = list(dict.fromkeys(c["task"] for c in cells))
    methods = list(dict.fromkeys(c["method"] for c in cells))
    rows, cols = _grid(len(tasks))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ti, task in enumerate(tasks):
        ax = axes[ti // cols][ti % cols]
        for mi, m in enumerate(methods):
            pts = sorted((_budget_x(c.get("budget")), c["speedup"]) for c in cells
                         if c["task"] == task and c["method"] == m and _budget_x(c.get("budget")) is not None)
            color = cmap(mi % 10)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color, label=m)
            d = next((c for c in cells if c["task"] == task and c["method"] == m and c.get("budget") == "default"), None)
            if d is not None:
                ax.axhline(d["speedup"], color=color, linestyle="--", linewidth=1, label=f"{m} (default budget)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ticks = sorted({x for c in cells if c["task"] == task for x in [_budget_x(c.get("budget"))] if x is not None})
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_title(f"task: {task}")
        ax.set_xlabel("draft budget (draft tokens per step at most)")
        ax.set_ylabel("speedup over plain decoding")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    for k in range(len(tasks), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    fig.suptitle(title or ("Projected speedup (verify-cost profile, not measured)" if projected else "Speedup")
                 + " against draft budget\n(1.0 = plain decoding)")
    fig.tight_layout()
    return _save(fig, plt, path)


def verify_cost(profile: Mapping[str, Any], path: PathLike, *, records: Any = None, title: str | None = None) -> Path:
    """The verify cost curve: milliseconds of one verification step against the draft
    tokens it checks (``profile``: a "sdnpu-verify-cost" profile, as ``sdnpu bench
    --cost-out`` writes), the plain decoding step as the level at 0, and on a second axis
    the step's cost relative to a plain step. With bench ``records``, a dotted line marks
    the step budget the default rule chose most often per method."""
    plt = _plt()
    sizes = list(profile["tree_sizes"])
    ms = list(profile["step_ms"])
    plain = float(profile["plain_step_ms"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot([0, *sizes], [plain, *ms], marker="o", color="tab:blue", label="verification step (median)")
    ax.axhline(plain, color="gray", linestyle=":", label=f"plain decoding step ({plain:.3g} ms)")
    ax.set_xlabel("draft tokens verified in one step (batch = draft + 1 rows)")
    ax.set_ylabel("ms per step")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    sec = ax.secondary_yaxis("right", functions=(lambda y: y / plain, lambda r: r * plain))
    sec.set_ylabel("x plain decoding step")
    if records is not None:
        cmap = plt.get_cmap("tab10")
        modes: dict[int, list[str]] = {}
        for c in _cells(records):
            h = c.get("budget_hist")
            if c.get("budget") == "default" and h and c["task"] != "all":
                modes.setdefault(max(range(len(h)), key=lambda k: h[k]), []).append(f"{c['method']} ({c['task']})")
        for mi, (mode, who) in enumerate(sorted(modes.items())):
            ax.axvline(mode, color=cmap((mi + 1) % 10), linestyle="--", linewidth=1,
                       label=f"default rule's most frequent budget, {mode}: " + ", ".join(who[:4]) + (" ..." if len(who) > 4 else ""))
    ax.legend(fontsize=8)
    shape = profile.get("shape") or profile.get("model") or ""
    ax.set_title(title or f"Verify cost curve: {shape}, {profile.get('threads', '?')} threads")
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_all(records: Any, out_dir: PathLike, *, profile: Mapping[str, Any] | None = None) -> list[Path]:
    """Every plot the records allow, as PNG files in out_dir: accept_hist.png,
    speedup_vs_budget.png (numeric budgets and speedups), verify_cost.png (a profile:
    ``profile`` or ``records.cost``). Returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    cells = _cells(records)
    if any(c["method"] != "none" and c.get("accept_hist") for c in cells):
        written.append(accept_hist(cells, out / "accept_hist.png"))
    if any((c.get("speedup") is not None or c.get("projected_speedup") is not None) and c["method"] != "none"
           and _budget_x(c.get("budget")) is not None for c in cells):
        written.append(speedup_vs_budget(cells, out / "speedup_vs_budget.png"))
    prof = profile or getattr(records, "cost", None)
    if prof:
        written.append(verify_cost(prof, out / "verify_cost.png", records=cells))
    return written


def _save(fig: Any, plt: Any, path: PathLike) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


__all__: Sequence[str] = ["accept_hist", "speedup_vs_budget", "verify_cost", "plot_all"]
