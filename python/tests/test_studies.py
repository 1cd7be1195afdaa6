"""Benchmarks and studies from Python: records as pandas tables equal to the program's
own, the PNG plots, `python -m sdnpu ... --plot DIR`, shards merged back into the whole
(exactly, for the offline study), and the study on a local Ray cluster of three nodes."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import sdnpu
from sdnpu import distributed, plots
from sdnpu.studies import Records, merge

EXACT = ("task", "method", "requests", "prompt_tokens", "output_tokens", "steps", "accepted_draft_tokens", "accept_hist",
         "draft_size_hist", "mismatches", "live")
RATIOS = ("mean_accepted", "draft_per_step")
REPLAY = ["pld", "sam", "sam+tree", "sam+cal"]


def same_study(a: Records, b: Records) -> None:
    """Equal cells: counts and histograms exactly, ratios to the 15 significant digits
    the program's JSON carries (cJSON prints the shortest of %.15g / %.17g it accepts)."""
    assert [(c["task"], c["method"]) for c in a] == [(c["task"], c["method"]) for c in b]
    for x, y in zip(a, b):
        for k in EXACT:
            assert x[k] == y[k], (x["task"], x["method"], k)
        for k in RATIOS:
            assert math.isclose(x[k], y[k], rel_tol=1e-13), (x["task"], x["method"], k, x[k], y[k])


def step_ms(p: dict, d: float) -> float:
    """The profile's verification step for d draft tokens: plain (or a listed size 0) at 0,
    linear between listed sizes, the last value beyond them (runtime/verify_cost.h)."""
    pts = list(zip(p["tree_sizes"], p["step_ms"]))
    if pts[0][0] != 0:
        pts.insert(0, (0, p["plain_step_ms"]))
    if d <= 0:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if d <= x1:
            return y0 + (y1 - y0) * (d - x0) / (x1 - x0)
    return pts[-1][1]


def project(p: dict, c: dict) -> tuple[float, float]:
    """Projected speedup and perfect-sizing ceiling of a cell on profile p: every step costed
    at its draft size (its accepted chain for the ceiling) plus the drafting time per step
    (the cell's own, else the profile's), against one plain step per token."""
    steps, out = c["steps"], c["output_tokens"]
    draft = c["draft_ms"] / steps if c.get("draft_ms") else max(p.get("draft_ms_per_step", 0), 0)
    verify = sum(n * step_ms(p, d) for d, n in enumerate(c["draft_size_hist"]))
    oracle = sum(n * step_ms(p, a) for a, n in enumerate(c["accept_hist"]))
    return p["plain_step_ms"] * out / (verify + draft * steps), p["plain_step_ms"] * out / (oracle + draft * steps)


def is_png(p: Path) -> bool:
    return p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_study_records_and_dataframe(story_data: dict[str, Path]) -> None:
    pd = pytest.importorskip("pandas")
    r = sdnpu.study(story_data["trace"], methods=REPLAY)
    df = pd.DataFrame(r)
    assert list(df["method"]) == REPLAY and (df["requests"] == 24).all()
    # mean accepted tokens per step is output tokens / steps; the histogram counts every step
    for c in r:
        assert c["mean_accepted"] == pytest.approx(c["output_tokens"] / c["steps"], rel=1e-13)
        assert sum(c["accept_hist"]) == c["steps"] and sum(c["draft_size_hist"]) == c["steps"]
    assert r.meta["kind"] == "study" and r.meta["models"][0]["fingerprint"]
    # the same numbers as the program's printed table
    for c in r:
        row = next(ln.split() for ln in r.table.splitlines() if ln.split()[:2] == ["story", c["method"]])
        assert int(row[2]) == c["requests"] and int(row[3]) == c["output_tokens"] and int(row[4]) == c["steps"]


def test_merged_shards_equal_the_whole(story_data: dict[str, Path]) -> None:
    args = ["--methods", ",".join(REPLAY), "--no-published"]
    whole = sdnpu.study(story_data["trace"], methods=REPLAY)
    for n in (2, 5):
        shards = distributed.shard_rows([story_data["trace"]], n)
        assert sum(len(v) for s in shards for v in s.values()) == 24
        parts = []
        for s in shards:
            j = distributed.run_shard("study", args, s)
            parts.append(Records(j.pop("results"), j))
        same_study(whole, merge(parts))
    # history replay: whole groups per shard, in trace order
    hw = sdnpu.study(story_data["trace"], methods=["sam"], replay_history=True)
    shards = distributed.shard_rows([story_data["trace"]], 3, by_group=True)
    parts = [Records((j := distributed.run_shard("study", ["--methods", "sam", "--replay-history"], s)).pop("results"), j) for s in shards]
    same_study(hw, merge(parts))


def test_bench_shards_merge(story_data: dict[str, Path]) -> None:
    """A benchmark split by request: every count and histogram of the merged cells equals
    the whole run's (greedy outputs and fixed budgets do not depend on timing); each
    shard's speedup is against its own plain decoding, and the merged one is recomputed."""
    args = ["--model", str(story_data["model"]), "--tokenizer", str(story_data["tokenizer"]), "--methods", "pld",
            "--budgets", "4", "--max-tokens", "24", "--threads", "1", "--limit", "6"]
    whole = sdnpu.bench(story_data["model"], story_data["task"], tokenizer=story_data["tokenizer"], methods=["pld"],
                        budgets=[4], max_tokens=24, threads=1, limit=6)
    rows = [ln for ln in story_data["task"].read_text().splitlines() if ln.strip()][:6]
    six = story_data["task"].parent / "six.jsonl"
    six.write_text("\n".join(rows) + "\n")
    parts = []
    for sh in distributed.shard_rows([six], 2):
        j = distributed.run_shard("bench", [a for a in args if a not in ("--limit", "6")], sh)
        parts.append(Records(j.pop("results"), j))
    merged = merge(parts)
    assert [(c["method"], c["budget"]) for c in merged] == [(c["method"], c["budget"]) for c in whole]
    for x, y in zip(whole, merged):
        for k in ("requests", "prompt_tokens", "output_tokens", "steps", "accepted_draft_tokens", "accept_hist", "mismatches"):
            assert x[k] == y[k], (x["method"], k)
        assert y["ms_per_token"] > 0 and y["speedup"] > 0


def test_bench_records_plots_and_cli(story_data: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    r = sdnpu.bench(story_data["model"], story_data["task"], tokenizer=story_data["tokenizer"], methods=["pld", "sam"],
                    budgets=["default", 2, 8], limit=6, max_tokens=32, threads=1, measure_cost=True)
    assert {(c["method"], c["budget"]) for c in r} >= {("none", None), ("pld", "2"), ("sam", "8"), ("sam", "default")}
    assert all(c["mismatches"] == 0 for c in r)
    assert r.cost is not None and r.cost["format"] == "sdnpu-verify-cost"
    written = plots.plot_all(r, tmp_path / "plots")
    assert sorted(p.name for p in written) == ["accept_hist.png", "speedup_vs_budget.png", "verify_cost.png"]
    assert all(is_png(p) for p in written)
    # the package's command line: the program's table, its records and the plots in DIR
    out = tmp_path / "cli"
    prof = tmp_path / "cost.json"
    prof.write_text(json.dumps(r.cost))
    p = subprocess.run([sys.executable, "-m", "sdnpu", "study", "--plot", str(out), "--traces", str(story_data["trace"]),
                        "--methods", "pld,sam", "--budgets", "2,8", "--cost", str(prof)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert all(is_png(out / f) for f in ("accept_hist.png", "speedup_vs_budget.png", "verify_cost.png"))
    j = json.loads((out / "study.json").read_text())
    assert {(c["method"], c["budget"]) for c in j["results"]} == {("pld", "2"), ("pld", "8"), ("sam", "2"), ("sam", "8")}
    # the projections are the program's (its PROJECTION table), one per cell
    assert all(c["projected_speedup"] > 0 and c["projected_ms_per_token"] > 0 for c in j["results"])
    # ... and they are the documented rule (runtime/verify_cost.h), recomputed here from each
    # cell's histograms and the profile: the speedup and the perfect-sizing ceiling, as printed
    for c in j["results"]:
        sp, ceil = project(r.cost, c)
        assert abs(c["projected_speedup"] - sp) <= 0.0051 and abs(c["projected_ceiling_speedup"] - ceil) <= 0.0051, (c, sp, ceil)
    assert "PROJECTION (not measured)" in p.stdout
    bad = subprocess.run([sys.executable, "-m", "sdnpu", "study", "--plot", str(out), "--traces", str(tmp_path / "nope.jsonl")],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "nope.jsonl" in bad.stderr


def test_socket_check_sees_an_address_off_loopback() -> None:
    """The cluster test's socket check (raycluster.py) flags a socket bound to every address
    and passes one on 127.0.0.1: it can fail."""
    from raycluster import off_loopback, sockets_of

    with socket.socket() as wide, socket.socket() as lo:
        wide.bind(("0.0.0.0", 0))
        wide.listen()
        lo.bind(("127.0.0.1", 0))
        lo.listen()
        mine = {s["lport"]: s for s in sockets_of({os.getpid()}) if s["proto"] == "tcp"}
        assert off_loopback(mine[wide.getsockname()[1]])
        assert not off_loopback(mine[lo.getsockname()[1]])


def test_study_on_a_local_ray_cluster(story_data: dict[str, Path]) -> None:
    """Three nodes (a head and two workers, each its own `ray start` process on this machine,
    all on 127.0.0.1); the study split over three workers equals the single-machine study, the
    live method (sdnpu: each worker loads the model once) included; no process of the cluster
    (nor the driver) ever holds a socket outside 127.0.0.0/8."""
    pytest.importorskip("ray")
    import ray

    from raycluster import LocalCluster

    env = {k: os.environ[k] for k in ("SDNPU_LIBRARY", "SDNPU_EXE", "PYTHONPATH") if k in os.environ}
    args = ["--methods", "pld,sam+cal,sdnpu", "--model", str(story_data["model"]), "--tokenizer", str(story_data["tokenizer"]),
            "--threads", "1"]
    whole = sdnpu.study(story_data["trace"], extra_args=args)
    assert any(c["live"] for c in whole)
    cluster = LocalCluster(workers=2, env=env)
    try:
        cluster.connect()
        try:
            alive = [n for n in ray.nodes() if n["Alive"]]
            assert len(alive) == 3
            assert {n["NodeManagerAddress"] for n in alive} == {"127.0.0.1"}
            assert {n["ObjectManagerPort"] for n in alive} and len({n["NodeManagerPort"] for n in alive}) == 3
            r = distributed.study(story_data["trace"], args, workers=3)
        finally:
            ray.shutdown()
    finally:
        cluster.stop()
    assert cluster.violations == [], cluster.violations[:10]
    seen = {c for c, *_ in cluster.seen}
    assert cluster.samples >= 3 and {"gcs_server", "raylet"} <= seen, (cluster.samples, sorted(seen))
    same_study(whole, r)
    assert len({w["node_id"] for w in r.meta["workers"]}) >= 2
    assert sum(w["requests"] for w in r.meta["workers"]) == 24
