"""Benchmarks and offline studies past one machine, on a Ray cluster.

The dataset (``bench``) or the traces (``study``) are split by request into as many shards
as workers; each shard is a Ray task that runs the ``sdnpu`` program once over its shard
(so it loads the model once) and returns its records; ``studies.merge`` adds them up. The
offline study is exact: counts and histograms add, the ratios are computed from the sums
as the program computes them, so the merged records equal the single-machine run's (the
drafting time excepted: it is measured). A benchmark's speedups are each worker's methods
against the plain decoding of that same worker, on the same requests.

With ``--replay-history`` (a request drafts from the earlier answers of its group, in trace
order) every group's requests go to one shard, in their order.

Ray is imported only here (``pip install sdnpu[ray]``); workers need the sdnpu package,
and the model file (or a known model in their cache; ``pull=True`` downloads it) and
nothing else: shard rows travel with the task.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from .core import EINVAL, Error
from .studies import Records, merge, run_program

PathLike = Union[str, Path]


def _input_files(paths: Sequence[PathLike]) -> list[Path]:
    """The JSONL files a --dataset / --traces list names (a directory: its *.jsonl and
    those of its direct subfolders, sorted, as the program reads it)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(p.glob("*.jsonl")) + sorted(p.glob("*/*.jsonl"))
        elif p.exists():
            out.append(p)
        else:
            raise Error(EINVAL, f"{p}: no such file or directory")
    if not out:
        raise Error(EINVAL, f"no JSONL file in {', '.join(map(str, paths))}")
    return out


def shard_rows(files: Sequence[PathLike], n: int, *, by_group: bool = False) -> list[dict[str, list[str]]]:
    """Split the rows (requests) of JSONL files into n shards: contiguous runs of rows of
    near-equal size, in file order (``by_group``: whole groups, a row's ``group`` or else its
    ``task``, each in file order). A shard is {file name: [lines]}; empty shards dropped."""
    if n < 1:
        raise Error(EINVAL, f"workers: must be >= 1, got {n}")
    rows: list[tuple[str, str, str]] = []  # (file key, group, line)
    for i, f in enumerate(files):
        key = f"{i:02d}-{Path(f).name}"
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                group = ""
                if by_group:
                    try:
                        j = json.loads(line)
                        group = str(j.get("group") or j.get("task") or "")
                    except (json.JSONDecodeError, AttributeError):
                        group = ""  # the program reports the bad line with its file and line
                rows.append((key, group, line if line.endswith("\n") else line + "\n"))
    shards: list[dict[str, list[str]]] = [{} for _ in range(n)]
    if by_group:
        groups: dict[str, list[tuple[str, str, str]]] = {}
        for r in rows:
            groups.setdefault(r[1], []).append(r)
        sizes = [0] * n
        for g in sorted(groups, key=lambda g: -len(groups[g])):  # largest first, to the lightest shard
            k = sizes.index(min(sizes))
            sizes[k] += len(groups[g])
            for key, _, line in groups[g]:
                shards[k].setdefault(key, []).append(line)
        # keep file order inside each shard
        order = {id(line): i for i, (_, _, line) in enumerate(rows)}
        for s in shards:
            for key in s:
                s[key].sort(key=lambda ln: order[id(ln)])
    else:
        per, extra = divmod(len(rows), n)
        at = 0
        for k in range(n):
            take = per + (1 if k < extra else 0)
            for key, _, line in rows[at:at + take]:
                shards[k].setdefault(key, []).append(line)
            at += take
    return [s for s in shards if s]


def run_shard(kind: str, args: Sequence[str], shard: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Run ``sdnpu KIND ARGS`` over one shard on this machine (the rows written to a
    temporary folder, passed as --traces / --dataset) and return its records as JSON, with
    the host name. What each Ray worker does; usable alone too."""
    flag = "--traces" if kind == "study" else "--dataset"
    with tempfile.TemporaryDirectory(prefix="sdnpu-shard-") as tmp:
        inputs: list[str] = []
        for key, lines in shard.items():
            p = os.path.join(tmp, key)
            with open(p, "w", encoding="utf-8") as f:
                f.writelines(lines)
            inputs += [flag, p]
        out = os.path.join(tmp, "records.json")
        run_program([kind, *args, *inputs, "--json", out])
        with open(out, encoding="utf-8") as f:
            j = json.load(f)
    j["host"] = socket.gethostname()
    j["requests_in_shard"] = sum(len(v) for v in shard.values())
    return j


def run(kind: str, inputs: Sequence[PathLike], args: Sequence[str] = (), *, workers: int = 2, address: str | None = None,
        by_group: bool = False, num_cpus: float = 1, ray_init: Mapping[str, Any] | None = None) -> Records:
    """Run ``sdnpu bench`` (kind "bench", inputs: datasets) or ``sdnpu study`` (kind
    "study", inputs: traces) over a Ray cluster: ``workers`` shards, one Ray task each (``num_cpus`` each; give
    the program ``--threads`` to match), one shard each. ``args``: the program's other
    options (not --dataset/--traces/--json). ``address``: the cluster ("auto", "HOST:PORT",
    "ray://HOST:10001"; None: the one this process is connected to, else a local one; note
    that Ray turns a 127.0.0.1 address into this machine's network address, see
    docs/python.md for a cluster kept on loopback).
    Returns the merged ``Records``; ``records.meta["workers"]`` lists each shard's node,
    host and request count, ``records.parts`` each shard's own records."""
    import ray

    if kind not in ("bench", "study"):
        raise Error(EINVAL, f"kind: 'bench' or 'study', got {kind!r}")
    for a in args:
        if a in ("--dataset", "--traces", "--json", "--csv", "--out", "--results-db"):
            raise Error(EINVAL, f"args: {a} is set per worker by the distributed runner")
    files = _input_files(inputs)
    shards = shard_rows(files, workers, by_group=by_group)
    if not ray.is_initialized():
        ray.init(address=address, **dict(ray_init or {}))

    # One task per shard: a task holds its CPUs only while it runs, so more shards than free
    # CPUs queue instead of waiting on each other.
    task = ray.remote(num_cpus=num_cpus)(_shard_task)
    outs = ray.get([task.remote(kind, list(args), s) for s in shards])
    parts = []
    for j in outs:
        cells = j.pop("results")
        parts.append(Records(cells, j))
    task_order = _task_order(files)
    recs = merge(parts)
    recs.sort(key=lambda c: (task_order.get(c["task"], len(task_order) + (c["task"] == "all")),))
    recs.meta["workers"] = [{"node_id": j.get("node_id"), "host": j.get("host"), "requests": j.get("requests_in_shard")} for j in outs]
    recs.meta["command"] = f"sdnpu.distributed.run({kind!r}, ...) over {len(parts)} workers"
    recs.parts = parts  # type: ignore[attr-defined]
    return recs


def _shard_task(kind: str, args: list[str], shard: dict[str, list[str]]) -> dict[str, Any]:
    """A Ray task: ``run_shard`` on the worker it lands on, tagged with the worker's node."""
    import ray

    j = run_shard(kind, args, shard)
    j["node_id"] = ray.get_runtime_context().get_node_id()
    return j


def _task_order(files: Sequence[Path]) -> dict[str, int]:
    order: dict[str, int] = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                try:
                    t = json.loads(line).get("task") or json.loads(line).get("category")
                except (json.JSONDecodeError, AttributeError):
                    continue
                if t is not None and t not in order:
                    order[str(t)] = len(order)
    return order


def study(traces: PathLike | Sequence[PathLike], args: Sequence[str] = (), **kw: Any) -> Records:
    """``run("study", traces, args, ...)``; ``by_group`` follows ``--replay-history``."""
    kw.setdefault("by_group", "--replay-history" in args)
    return run("study", [traces] if isinstance(traces, (str, Path)) else list(traces), args, **kw)


def bench(dataset: PathLike | Sequence[PathLike], args: Sequence[str] = (), **kw: Any) -> Records:
    """``run("bench", dataset, args, ...)``; ``by_group`` follows ``--history``."""
    kw.setdefault("by_group", "--history" in args)
    return run("bench", [dataset] if isinstance(dataset, (str, Path)) else list(dataset), args, **kw)
