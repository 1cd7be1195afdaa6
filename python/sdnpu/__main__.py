"""``python -m sdnpu``: the Python package's command line.

    python -m sdnpu bench --plot DIR [--ray ADDRESS --workers N] SDNPU-BENCH-OPTIONS...
    python -m sdnpu study --plot DIR [--budgets 2,4,8,16] [--ray ADDRESS --workers N] SDNPU-STUDY-OPTIONS...
    python -m sdnpu plot RECORDS.json [--cost PROFILE] --out DIR
    python -m sdnpu version

``bench`` and ``study`` run the ``sdnpu`` program with the given options (its table is
printed as it prints it), write its records as DIR/bench.json or DIR/study.json and draw
the PNG plots into DIR (``sdnpu.plots.plot_all``). The C commands write records and invoke
nothing; the plotting lives here. ``--ray`` runs the work over a Ray cluster, split by
request into ``--workers`` shards (``sdnpu.distributed``). ``study --budgets LIST`` runs the
study once per draft budget (``--draft-max``) for the speedup-against-budget plot (give
``--cost PROFILE`` to project speedups).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from . import core
from .studies import Records, _attach_projection, run_program


def _split_inputs(rest: list[str], flag: str) -> tuple[list[str], list[str]]:
    inputs: list[str] = []
    others: list[str] = []
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == flag and i + 1 < len(rest):
            inputs.append(rest[i + 1])
            i += 2
            continue
        if a.startswith(flag + "="):
            inputs.append(a.split("=", 1)[1])
        else:
            others.append(a)
        i += 1
    return inputs, others


def _records(kind: str, rest: list[str], ns: argparse.Namespace, out_json: Path | None, cost_out: Path | None) -> Records:
    if ns.ray is not None:
        from . import distributed

        flag = "--traces" if kind == "study" else "--dataset"
        inputs, others = _split_inputs(rest, flag)
        if not inputs:
            raise core.Error(core.EINVAL, f"--ray needs the inputs named with {flag}")
        fn = distributed.study if kind == "study" else distributed.bench
        recs = fn(inputs, others, workers=ns.workers, address=None if ns.ray in ("", "local") else ns.ray)
        for w in recs.meta.get("workers", []):
            print(f"worker {w['host']} node {str(w['node_id'])[:12]}: {w['requests']} requests")
    else:
        extra = ["--json", str(out_json)] if out_json else []
        if cost_out:
            extra += ["--cost-out", str(cost_out)]
        p = run_program([kind, *rest, *extra])
        sys.stdout.write(p.stdout)
        if not out_json:
            return Records()
        recs = Records.load(out_json, cost_out)
        recs.table = p.stdout
        _attach_projection(recs)
    return recs


def _cost_arg(rest: list[str]) -> dict[str, Any] | None:
    costs, _ = _split_inputs(rest, "--cost")
    if not costs:
        return None
    with open(costs[0], encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m sdnpu", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["bench", "study", "plot", "version"])
    ap.add_argument("--plot", metavar="DIR", help="write the records and the PNG plots into DIR")
    ap.add_argument("--ray", metavar="ADDRESS", nargs="?", const="", default=None,
                    help="run over a Ray cluster (ADDRESS: auto, HOST:PORT, ray://HOST:10001; none: local)")
    ap.add_argument("--workers", type=int, default=2, help="Ray workers (= shards) (default 2)")
    ap.add_argument("--budgets", metavar="LIST", help="bench: passed on to sdnpu bench; study: one study per --draft-max value (comma-separated)")
    ap.add_argument("--out", metavar="DIR", help="plot: where the PNG files go")
    if not argv or argv[0] in ("-h", "--help"):
        ap.print_help()
        return 0
    ns, rest = ap.parse_known_args(argv)
    try:
        if ns.command == "version":
            print(f"sdnpu (Python) {core.version()}, library {core._ffi.library_path()}, program {core.executable()}")
            return 0
        if ns.command == "plot":
            from . import plots

            if len(rest) < 1 or not ns.out:
                ap.error("plot needs RECORDS.json and --out DIR")
            recs = Records.load(rest[0])
            prof = _cost_arg(rest[1:])
            for p in plots.plot_all(recs, ns.out, profile=prof):
                print(f"wrote {p}")
            return 0
        kind = ns.command
        if kind == "bench" and ns.budgets:  # bench's own option: the program runs every budget
            rest += ["--budgets", ns.budgets]
        out = Path(ns.plot) if ns.plot else None
        if out:
            out.mkdir(parents=True, exist_ok=True)
        if kind == "study" and ns.budgets:
            budgets = [b.strip() for b in ns.budgets.split(",") if b.strip()]
            if any(a == "--draft-max" or a.startswith("--draft-max=") for a in rest):
                ap.error("study: --budgets runs one study per --draft-max value; give one or the other")
            recs = Records()
            for b in budgets:
                part = _records(kind, [*rest, "--draft-max", b], ns, (out or Path(".")) / f"study-{b}.json", None)
                for c in part:
                    c["budget"] = b
                recs.extend(part)
                recs.meta = part.meta
        else:
            want_cost = kind == "bench" and out is not None and not any(a.startswith("--cost") for a in rest) and ns.ray is None
            recs = _records(kind, rest, ns, out / f"{kind}.json" if out else None, out / "verify_cost.json" if out and want_cost else None)
        if kind == "study" or ns.ray is not None:
            recs.cost = recs.cost or _cost_arg(rest)
        if out:
            from . import plots

            with open(out / f"{kind}.json", "w", encoding="utf-8") as f:
                json.dump(recs.to_json(), f, indent=1)
            for p in plots.plot_all(recs, out):
                print(f"wrote {p}")
        elif ns.ray is not None:
            json.dump(recs.to_json(), sys.stdout, indent=1)
            print()
        return 0
    except core.Error as e:
        print(f"sdnpu: {e.message}", file=sys.stderr)
        return 2 if e.status == core.EINVAL else 3 if e.status == core.ESTATE else 1


if __name__ == "__main__":
    sys.exit(main())
