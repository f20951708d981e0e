#!/usr/bin/env python3
"""Markdown tables for the README from `cargo bench --bench bulkhead`.

Reads criterion's `<criterion dir>/**/new/estimates.json` (the median of each
benchmark, ns per acquire + release pair) with the `benchmark.json` beside
it (group and function names), and the fairness probe's
`<criterion dir>/bulkhead-fairness.json`, and prints:

- uncontended: ns per pair for each peer, each peer's ratio to watertight
  (peer median / watertight median: above 1 means watertight is faster) and,
  for `try_acquire`, watertight's ratio to the floor (watertight / floor);
- contended, one table per hold (yield, spin): the same per (M tasks, P permits);
- the fairness probe and the sizes of the three types.

Usage: python3 scripts/bench_table.py [CRITERION_DIR] [--baseline NAME] [--all]

CRITERION_DIR defaults to $CRITERION_HOME, else $CARGO_TARGET_DIR/criterion,
else target/criterion of this repository. --baseline reads
`<NAME>/estimates.json` (a `--save-baseline NAME` run) instead of `new/`.
--all also lists any other groups found there (e.g. from older runs).
Standard library only.
"""

import json
import os
import re
import sys
from pathlib import Path

OURS = "watertight"
PEERS = ["tokio", "async-lock"]
FLOOR = "floor"

UNCONTENDED = [
    ("uncontended/try_acquire+drop", "`try_acquire` + drop"),
    ("uncontended/acquire.await+drop/block_on", "free `acquire().await` + drop (`block_on`)"),
    (
        "uncontended/acquire.await+drop/tokio-current-thread",
        "free `acquire().await` + drop (tokio current-thread)",
    ),
]

CONTENDED = re.compile(r"^contended/(?P<hold>[^/]+)/M=(?P<m>\d+)/P=(?P<p>\d+)$")

HOLD_TITLE = {
    "yield": "permit held across `yield_now().await`",
    "spin": "permit held across 16 `black_box` adds",
}


def default_dir() -> Path:
    if os.environ.get("CRITERION_HOME"):
        return Path(os.environ["CRITERION_HOME"])
    if os.environ.get("CARGO_TARGET_DIR"):
        return Path(os.environ["CARGO_TARGET_DIR"]) / "criterion"
    return Path(__file__).resolve().parent.parent / "target" / "criterion"


def load(root: Path, baseline: str) -> dict:
    """{group_id: {function_id: median ns}}"""
    out: dict = {}
    for est in root.rglob(f"{baseline}/estimates.json"):
        meta = est.parent / "benchmark.json"
        if not meta.is_file():
            continue
        try:
            bench = json.loads(meta.read_text())
            median = json.loads(est.read_text())["median"]["point_estimate"]
        except (OSError, ValueError, KeyError) as e:
            print(f"skipping {est}: {e}", file=sys.stderr)
            continue
        group = bench.get("group_id")
        function = bench.get("function_id") or bench.get("value_str") or ""
        out.setdefault(group, {})[function] = float(median)
    return out


def ns(v) -> str:
    if v is None:
        return "–"
    if v < 100:
        return f"{v:.1f} ns"
    return f"{v:,.0f} ns"


def ratio(num, den) -> str:
    if num is None or den is None or den == 0:
        return "–"
    return f"{num / den:.2f}×"


def uncontended_table(data: dict) -> list:
    rows = [(gid, title, data[gid]) for gid, title in UNCONTENDED if gid in data]
    if not rows:
        return []
    lines = [
        "ns per acquire + release pair (criterion median); "
        "peer ÷ watertight above 1 means watertight is faster.",
        "",
        "| uncontended | floor (CAS + `fetch_add`) | watertight | tokio `Semaphore` "
        "| async-lock `Semaphore` | watertight ÷ floor | tokio ÷ watertight "
        "| async-lock ÷ watertight |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, title, g in rows:
        ours = g.get(OURS)
        floor = g.get(FLOOR)
        cells = [title, ns(floor), ns(ours), ns(g.get("tokio")), ns(g.get("async-lock"))]
        cells += [ratio(ours, floor) if floor is not None else "–"]
        cells += [ratio(g.get(p), ours) for p in PEERS]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def contended_tables(data: dict) -> list:
    cells: dict = {}
    for gid, g in data.items():
        m = CONTENDED.match(gid or "")
        if m:
            cells.setdefault(m["hold"], {})[(int(m["m"]), int(m["p"]))] = g
    lines: list = []
    order = list(HOLD_TITLE)
    for hold in sorted(cells, key=lambda h: (order.index(h) if h in order else len(order), h)):
        title = HOLD_TITLE.get(hold, hold)
        if lines:
            lines.append("")
        lines += [
            f"Contended, {title}: M tasks on a 2-worker tokio runtime, P permits; "
            "ns per pair (wall time ÷ pairs).",
            "",
            "| M tasks | P permits | watertight | tokio `Semaphore` | async-lock `Semaphore` "
            "| tokio ÷ watertight | async-lock ÷ watertight |",
            "|---|---|---|---|---|---|---|",
        ]
        for (m, p), g in sorted(cells[hold].items()):
            ours = g.get(OURS)
            row = [str(m), str(p), ns(ours), ns(g.get("tokio")), ns(g.get("async-lock"))]
            row += [ratio(g.get(peer), ours) for peer in PEERS]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def other_tables(data: dict) -> list:
    known = {gid for gid, _ in UNCONTENDED}
    lines: list = []
    for gid in sorted(g for g in data if g not in known and not CONTENDED.match(g or "")):
        g = data[gid]
        ours = g.get(OURS)
        if lines:
            lines.append("")
        lines += [f"`{gid}`", "", "| function | median | ÷ watertight |", "|---|---|---|"]
        for f in sorted(g):
            lines.append(f"| {f} | {ns(g[f])} | {ratio(g[f], ours)} |")
    return lines


def fairness_table(root: Path) -> list:
    path = root / "bulkhead-fairness.json"
    if not path.is_file():
        return []
    try:
        probe = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        print(f"skipping {path}: {e}", file=sys.stderr)
        return []
    lines = [
        f"Fairness: {probe['tasks']} tasks, {probe['permits']} permit, {probe['workers']} workers, "
        f"each loops {probe['loops']}× acquire → `yield_now` → release; each task's finishing "
        f"time as a share of the whole run (median of {probe['rounds']} rounds). A fair limiter "
        "has both near 1.0; one that lets a releasing task take the permit straight back lets "
        "the first task finish early.",
        "",
        "| peer | first finisher | median finisher |",
        "|---|---|---|",
    ]
    for r in probe["peers"]:
        lines.append(f"| {r['peer']} | {r['first']:.3f} | {r['median']:.3f} |")
    sizes = probe.get("sizes") or []
    if sizes:
        lines += ["", f"| type | `size_of` ({probe.get('arch', 'host')}) |", "|---|---|"]
        for s in sizes:
            lines.append(f"| `{s['type']}` | {s['bytes']} B |")
    return lines


def main(argv: list) -> int:
    root = None
    baseline = "new"
    show_all = False
    it = iter(argv)
    for a in it:
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--all":
            show_all = True
        elif a == "--baseline":
            baseline = next(it, None)
            if not baseline:
                print("--baseline needs a name", file=sys.stderr)
                return 2
        elif a.startswith("--baseline="):
            baseline = a.split("=", 1)[1]
        elif root is None:
            root = Path(a)
        else:
            print(f"unexpected argument {a!r}", file=sys.stderr)
            return 2
    root = root or default_dir()
    if not root.is_dir():
        print(f"no criterion output at {root}; run `cargo bench --bench bulkhead` first", file=sys.stderr)
        return 1

    data = load(root, baseline)
    sections = [uncontended_table(data), contended_tables(data)]
    if show_all:
        sections.append(other_tables(data))
    sections.append(fairness_table(root))
    sections = [s for s in sections if s]
    if not sections:
        print(f"no results under {root}", file=sys.stderr)
        return 1
    print("\n\n".join("\n".join(s) for s in sections))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
