"""Benchmarks and offline acceptance studies from Python: ``bench``, ``study``, ``trace``.

They live in the ``sdnpu`` program (tools/, not in libsdnpu), so this module runs it
(``sdnpu bench|study|trace ... --json FILE``) and reads the records it writes (format
"sdnpu-results", docs/datasets.md). A separate process keeps libsdnpu's API and ABI free of
benchmark code, and is the same unit of work the distributed runner (``sdnpu.distributed``)
sends to each worker. The records load straight into pandas: ``pandas.DataFrame(records)``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from .core import EFORMAT, EINVAL, EIO, ESTATE, EUNSUP, Error, executable

PathLike = Union[str, Path]
# Fields that add up over disjoint sets of requests (cells of the same task and method).
ADDITIVE = ("requests", "prompt_tokens", "output_tokens", "steps", "accepted_draft_tokens", "mismatches")
ADDITIVE_MEASURED = ("prefill_ms", "decode_ms", "draft_ms", "verify_ms")
HISTOGRAMS = ("accept_hist", "draft_size_hist", "budget_hist")


class Records(list):  # type: ignore[type-arg]
    """The result cells of one run: a list of dicts (one per task, method and budget), so
    ``pandas.DataFrame(records)`` is a table of them. ``meta`` holds the run's metadata
    (kind, machine, model, fingerprint, inputs, command, ...), ``cost`` the verify-cost
    profile when one was measured or given, ``table`` the program's printed table."""

    def __init__(self, cells: Iterable[dict[str, Any]] = (), meta: Mapping[str, Any] | None = None,
                 cost: Mapping[str, Any] | None = None, table: str = "") -> None:
        super().__init__(cells)
        self.meta: dict[str, Any] = dict(meta or {})
        self.cost: dict[str, Any] | None = dict(cost) if cost else None
        self.table = table

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the cells (pandas must be installed)."""
        import pandas as pd

        return pd.DataFrame(list(self))

    def to_json(self) -> dict[str, Any]:
        """The records as the program writes them (``meta`` fields plus ``results``)."""
        d = dict(self.meta)
        d["results"] = list(self)
        if self.cost:
            d["cost"] = self.cost
        return d

    @classmethod
    def load(cls, path: PathLike, cost: PathLike | None = None) -> Records:
        """Read a ``--json`` file of ``sdnpu bench`` / ``sdnpu study`` (and a cost profile)."""
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        if not isinstance(j, dict) or j.get("format") != "sdnpu-results":
            raise Error(EFORMAT, f"{path}: not an sdnpu-results file (field 'format')")
        cells = j.pop("results", [])
        prof = j.pop("cost", None)
        if cost is not None:
            with open(cost, encoding="utf-8") as f:
                prof = json.load(f)
        return cls(cells, j, prof)


def run_program(args: Sequence[str], *, cwd: PathLike | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``sdnpu`` program with args; its standard output is returned, its standard
    error passed through. A failure raises ``Error``: exit 2 (a usage error) is EINVAL,
    exit 3 (a method's output differed from plain decoding: a bug) ESTATE, others EIO, with
    the program's last message."""
    exe = executable()
    if not exe:
        raise Error(EUNSUP, "the `sdnpu` program was not found: install the sdnpu wheel, put sdnpu on PATH or set SDNPU_EXE")
    p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        msg = lines[-1] if lines else f"sdnpu {args[0] if args else ''} exited {p.returncode}"
        if p.returncode == 3:
            msg = "a method's output differed from plain decoding (a bug): " + msg
        code = EINVAL if p.returncode == 2 else ESTATE if p.returncode == 3 else EIO
        raise Error(code, f"sdnpu {args[0] if args else ''}: {msg.removeprefix('sdnpu: ')}")
    return p


def _opt(argv: list[str], name: str, value: Any) -> None:
    if value is None or value is False:
        return
    if value is True:
        argv.append(name)
    elif isinstance(value, (list, tuple)):
        argv += [name, ",".join(map(str, value))]
    else:
        argv += [name, str(value)]


def _repeat(argv: list[str], name: str, values: Any) -> None:
    if values is None:
        return
    if isinstance(values, (str, Path)):
        values = [values]
    if isinstance(values, Mapping):
        values = [f"{k}={v}" for k, v in values.items()]
    for v in values:
        argv += [name, str(v)]


def bench(model: PathLike, dataset: PathLike | Sequence[PathLike] | None = None, *, tokenizer: PathLike | None = None,
          methods: Sequence[str] | None = None, tasks: Sequence[str] | None = None, limit: int | None = None,
          max_tokens: int | None = None, budgets: Sequence[int | str] | None = None, draft_branch: int | None = None,
          threads: int | None = None, n_ctx: int | None = None, chat_template: str | None = None,
          history: PathLike | None = None, params: Mapping[str, Any] | Sequence[str] | None = None,
          json_schema: PathLike | None = None, grammar: PathLike | None = None, measure_cost: bool = False,
          extra_args: Sequence[str] = ()) -> Records:
    """Live benchmark (``sdnpu bench``): plain decoding and each method at each draft
    budget on the same requests, same run; every greedy output checked against plain
    decoding's (a difference raises ``Error`` ESTATE). ``dataset``: task file(s) or
    directories (default: the program's, ../shared/datasets). ``budgets``: e.g.
    ["default", 2, 4, 8, 16]. ``measure_cost``: also measure the model's verify-cost curve
    (``records.cost``, for ``plots.verify_cost``). Returns the cells as ``Records``."""
    argv: list[str] = ["bench", "--model", str(model)]
    _opt(argv, "--tokenizer", tokenizer)
    _repeat(argv, "--dataset", dataset)
    _opt(argv, "--methods", methods)
    _opt(argv, "--tasks", tasks)
    _opt(argv, "--limit", limit)
    _opt(argv, "--max-tokens", max_tokens)
    _opt(argv, "--budgets", budgets)
    _opt(argv, "--draft-branch", draft_branch)
    _opt(argv, "--threads", threads)
    _opt(argv, "--ctx", n_ctx)
    _opt(argv, "--chat-template", chat_template)
    _opt(argv, "--history", history)
    _repeat(argv, "--param", params)
    _opt(argv, "--json-schema", json_schema)
    _opt(argv, "--grammar", grammar)
    return _run_json(argv, list(extra_args), measure_cost)


def study(traces: PathLike | Sequence[PathLike], *, methods: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
          limit: int | None = None, draft_max: int | None = None, draft_depth: int | None = None,
          draft_branch: int | None = None, replay_history: bool = False, history_budget: int | None = None,
          params: Mapping[str, Any] | Sequence[str] | None = None, cost: PathLike | Sequence[PathLike] | None = None,
          model: PathLike | None = None, tokenizer: PathLike | None = None, threads: int | None = None,
          n_ctx: int | None = None, live: bool = False, extra_args: Sequence[str] = ()) -> Records:
    """Offline acceptance study (``sdnpu study``): replays each drafting method against
    recorded greedy generations (traces, from ``trace``). ``cost``: verify-cost profile(s)
    to project ms/token and speedup; ``model``: measure the methods a trace cannot replay
    (``sdnpu``, ``sam+reuse``) live on it (``live=True``: every method). Returns ``Records``
    (``records.cost`` is the first ``cost`` profile)."""
    argv: list[str] = ["study"]
    _repeat(argv, "--traces", traces)
    _opt(argv, "--methods", methods)
    _opt(argv, "--tasks", tasks)
    _opt(argv, "--limit", limit)
    _opt(argv, "--draft-max", draft_max)
    _opt(argv, "--draft-depth", draft_depth)
    _opt(argv, "--draft-branch", draft_branch)
    _opt(argv, "--replay-history", replay_history)
    _opt(argv, "--history-budget", history_budget)
    _repeat(argv, "--param", params)
    _repeat(argv, "--cost", cost)
    _opt(argv, "--model", model)
    _opt(argv, "--tokenizer", tokenizer)
    _opt(argv, "--threads", threads)
    _opt(argv, "--ctx", n_ctx)
    _opt(argv, "--live", live)
    recs = _run_json(argv, [*extra_args, "--no-published"], False)
    if cost is not None:
        first = cost if isinstance(cost, (str, Path)) else cost[0]
        with open(first, encoding="utf-8") as f:
            recs.cost = json.load(f)
    return recs


def trace(model: PathLike, dataset: PathLike | Sequence[PathLike], out: PathLike, *, tokenizer: PathLike | None = None,
          tasks: Sequence[str] | None = None, limit: int | None = None, max_tokens: int | None = None,
          prefill_topk: int | None = None, threads: int | None = None, n_ctx: int | None = None,
          extra_args: Sequence[str] = ()) -> Path:
    """Record plain greedy generation over a dataset as a trace for ``study``
    (``sdnpu trace``); returns the trace's path."""
    argv: list[str] = ["trace", "--model", str(model), "--out", str(out)]
    _opt(argv, "--tokenizer", tokenizer)
    _repeat(argv, "--dataset", dataset)
    _opt(argv, "--tasks", tasks)
    _opt(argv, "--limit", limit)
    _opt(argv, "--max-tokens", max_tokens)
    _opt(argv, "--prefill-topk", prefill_topk)
    _opt(argv, "--threads", threads)
    _opt(argv, "--ctx", n_ctx)
    run_program([*argv, *extra_args])
    return Path(out)


def _run_json(argv: list[str], extra: list[str], measure_cost: bool) -> Records:
    with tempfile.TemporaryDirectory(prefix="sdnpu-") as tmp:
        out = os.path.join(tmp, "records.json")
        cost = os.path.join(tmp, "cost.json")
        full = [*argv, *extra, "--json", out]
        if measure_cost:
            full += ["--cost-out", cost]
        p = run_program(full)
        recs = Records.load(out, cost if measure_cost else None)
        recs.table = p.stdout
        _attach_projection(recs)
        return recs


def _attach_projection(recs: Records) -> None:
    """Copy the program's first projection table (``--cost PROFILE``: "PROJECTION (not
    measured) onto ...", printed by tools/bench_util.c) into the cells as
    ``projected_ms_per_token``, ``projected_speedup`` and ``projected_ceiling_speedup`` (the
    perfect-sizing ceiling; the figures as printed: 3 and 2 decimals). A row is: task,
    method, [budget], verify ms/step, draft ms/step, ms/token, speedup, ceiling. The JSON
    does not carry them; nothing is recomputed here."""
    lines = recs.table.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("PROJECTION (not measured)")), None)
    if start is None or start + 1 >= len(lines):
        return
    has_budget = "budget" in lines[start + 1].split()
    base = 3 if has_budget else 2  # index of the verify ms/step column
    by_key = {(c["task"], c["method"], c.get("budget") if has_budget else None): c for c in recs}
    for ln in lines[start + 2:]:
        f = ln.split()
        if len(f) != base + 5 or not f[base + 3].endswith("x") or not f[base + 4].endswith("x"):
            break
        try:
            ms, sp, ceil = float(f[base + 2]), float(f[base + 3][:-1]), float(f[base + 4][:-1])
        except ValueError:
            break
        budget = (None if f[2] == "-" else f[2]) if has_budget else None
        c = by_key.get((f[0], f[1], budget))
        if c is not None:
            c["projected_ms_per_token"] = ms
            c["projected_speedup"] = sp
            c["projected_ceiling_speedup"] = ceil


def merge(parts: Sequence[Records]) -> Records:
    """Records of disjoint request sets (shards of one dataset, run with the same options)
    merged into the records of the whole: counts and histograms add up, and the ratios are
    computed from the sums exactly as the program computes them (mean accepted tokens =
    output tokens / steps, draft tokens per step from the draft-size histogram), so an
    offline study merged from shards equals the study of the whole. Measured times add up;
    ms/token and speedup are recomputed from them, each shard's against the plain decoding
    of its own worker. Per-task ``all`` rows are rebuilt from the merged task rows."""
    order: list[tuple[str, str, Any]] = []
    acc: dict[tuple[str, str, Any], dict[str, Any]] = {}
    tasks: set[str] = set()
    for part in parts:
        for c in part:
            if c["task"] == "all":
                continue
            tasks.add(c["task"])
            key = (c["task"], c["method"], c.get("budget"))
            if key not in acc:
                order.append(key)
                acc[key] = _blank(c)
            _add(acc[key], c)
    if len(tasks) > 1:  # the program's 'all' row per method (and budget): every task pooled
        for key in list(order):
            akey = ("all", key[1], key[2])
            if akey not in acc:
                order.append(akey)
                acc[akey] = _blank(acc[key])
                acc[akey]["task"] = "all"
            _add(acc[akey], acc[key], raw=True)
    cells = [_finish(acc[k]) for k in order]
    _plain_ref(cells)
    meta = dict(parts[0].meta) if parts else {}
    meta["shards"] = len(parts)
    return Records(cells, meta, parts[0].cost if parts else None)


def _blank(c: Mapping[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"task": c["task"], "method": c["method"], "budget": c.get("budget"), "live": c.get("live", False)}
    for k in ADDITIVE:
        d[k] = 0
    for k in ADDITIVE_MEASURED:
        d[k] = None
    d["peak_rss_bytes"] = None
    for h in HISTOGRAMS:
        d[h] = None
    return d


def _addhist(a: list[int] | None, b: list[int] | None) -> list[int] | None:
    if b is None:
        return a
    if a is None:
        return list(b)
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def _add(d: dict[str, Any], c: Mapping[str, Any], raw: bool = False) -> None:
    for k in ADDITIVE:
        d[k] += c.get(k) or 0
    for k in ADDITIVE_MEASURED:
        v = c.get(k)
        if v is not None:
            d[k] = (d[k] or 0.0) + v
    if c.get("peak_rss_bytes") is not None:
        d["peak_rss_bytes"] = max(d["peak_rss_bytes"] or 0, c["peak_rss_bytes"])
    for h in HISTOGRAMS:
        d[h] = _addhist(d[h], c.get(h))
    d["live"] = bool(d["live"] or c.get("live"))


def _finish(d: dict[str, Any]) -> dict[str, Any]:
    steps = d["steps"]
    d["mean_accepted"] = d["output_tokens"] / steps if steps else 0.0
    dh = d.get("draft_size_hist") or []
    d["draft_per_step"] = sum(k * n for k, n in enumerate(dh)) / steps if steps else 0.0
    d["ms_per_token"] = d["decode_ms"] / d["output_tokens"] if d["decode_ms"] and d["output_tokens"] else None
    if d.get("budget_hist") is None:
        d.pop("budget_hist", None)
    return d


def _plain_ref(cells: list[dict[str, Any]]) -> None:
    plain = {c["task"]: c for c in cells if c["method"] == "none"}
    for c in cells:
        p = plain.get(c["task"])
        pm = p["ms_per_token"] if p else None
        c["plain_ms_per_token"] = pm
        c["speedup"] = pm / c["ms_per_token"] if pm and c["ms_per_token"] else None
