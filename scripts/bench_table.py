#!/usr/bin/env python3
"""Markdown tables for the guide's benchmarks page (`src/guide/benchmarks.rs`,
`watertight::guide::benchmarks`) from `cargo bench --bench bulkhead`,
`cargo bench --bench breaker` and `cargo bench --bench policy --features tokio`.

Reads criterion's `<criterion dir>/**/new/estimates.json` (the median of each
benchmark) with the `benchmark.json` beside it (group and function names),
the bulkhead fairness probe's `<criterion dir>/bulkhead-fairness.json` and
the breaker's `<criterion dir>/breaker-sizes.json`, and prints, for whichever
benches have results there:

- bulkhead, uncontended: ns per acquire + release pair for each peer, each
  peer's ratio to watertight (peer median / watertight median: above 1 means
  watertight is faster) and, for `try_acquire`, watertight's ratio to the
  floor (watertight / floor);
- bulkhead, contended, one table per hold (yield, spin): the same per
  (M tasks, P permits);
- the fairness probe and the sizes of the three types;
- breaker: ns per closed-state call for watertight, recloser and failsafe
  (default policy; consecutive failures only), each peer's ratio to
  watertight, per case (sync, async, slow-call timing on, 2 threads); the
  clock reads measured in the same run (`Instant::now`, `StdClock::now`,
  `CoarseClock::now`, and quanta's `Clock::now`, `Clock::recent`,
  `Instant::recent` with its `Upkeep` at 1 ms) and ours timed on quanta's
  recent time beside ours timed on `CoarseClock`; the sizes;
- policy: ns per policy call with nothing failing for watertight and the
  peers' stack (tokio `Semaphore` + failsafe + `tokio::time::timeout`), the
  peers' ratio to watertight, with and without a request budget, and with
  slow-call timing on (the breaker on `CoarseClock`, `StdClock`,
  `TokioClock`); then the parts measured in the same run (each layer alone,
  the clock reads, our layers with no clock read);
- the forms groups (breaker, bulkhead, policy): one call written each way a
  caller writes it (`unwrap`, `if let`, `match`, `?`, `call`, `call_with`),
  ns and ratio to the group's fastest form.

Usage: python3 scripts/bench_table.py [CRITERION_DIR] [--baseline NAME] [--all]
                                      [--only bulkhead|breaker|policy] [--write [FILE]]

CRITERION_DIR defaults to $CRITERION_HOME, else $CARGO_TARGET_DIR/criterion,
else target/criterion of this repository. --baseline reads
`<NAME>/estimates.json` (a `--save-baseline NAME` run) instead of `new/`.
--all also lists any other groups found there (e.g. from older runs).
--only prints one bench's tables.
--write puts each table into FILE (default src/guide/benchmarks.rs) in
place of the one there, between its markers (`<!-- bench_table.py: KEY -->`
and `<!-- /bench_table.py: KEY -->`, in `//!` lines), instead of printing;
a table with no results in this run is left as it is. README.md holds no
bench table: a bench run does not edit it.
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

# Breaker: (group, watertight's function in it, row title).
BREAKER_PEERS = ["recloser", "failsafe-default", "failsafe-consecutive"]
BREAKER_ROWS = [
    (
        "breaker/closed/sync",
        "watertight",
        "closed, sync: ours `try_acquire().unwrap().success()`, peers `.call(\\|\\| Ok(()))`",
    ),
    (
        "breaker/closed/sync",
        "watertight-call",
        "closed, sync: ours as a `call(\\|\\| Ok(()))` function around `try_acquire`",
    ),
    (
        "breaker/closed/async",
        "watertight",
        "closed, async: `call(async { Ok(()) }).await`, a loop in one `block_on`",
    ),
    (
        "breaker/closed/async-block_on-per-call",
        "watertight",
        "closed, async: one `block_on(call(async { Ok(()) }))` per call",
    ),
    (
        "breaker/slow-timing/sync",
        "watertight-untimed",
        "slow-timing group, ours untimed (slow calls off; the rows below in the same run)",
    ),
    (
        "breaker/slow-timing/sync",
        "watertight-coarse",
        "slow-call timing on (ours: `slow_call_duration(1 s)`, `CoarseClock`; recloser and "
        "failsafe's default time nothing, failsafe consecutive reads the clock once), sync",
    ),
    (
        "breaker/slow-timing/sync",
        "watertight-quanta",
        "slow-call timing on (ours: `slow_call_duration(1 s)`, a bench-local clock on "
        "`quanta::Clock::recent()`, quanta's `Upkeep` at 1 ms), sync",
    ),
    (
        "breaker/slow-timing/sync",
        "watertight",
        "slow-call timing on (ours: `slow_call_duration(1 s)`, `StdClock`), sync",
    ),
    (
        "breaker/contended/2-threads",
        "watertight",
        "2 threads on one breaker, sync; ns per call per thread",
    ),
]
SLOW_GROUP = "breaker/slow-timing/sync"

# Policy: (group, row title); the peers' stack is one function, `tokio+failsafe`.
POLICY_PEER = "tokio+failsafe"
POLICY_ROWS = [
    (
        "policy/call",
        "`call(\\|\\| async { Ok(()) })`; peers `sem.acquire()`, "
        "`breaker.call(timeout(30 s, async { Ok(()) }))`",
    ),
    (
        "policy/call_within",
        "the same in a 1.5 s request budget made per call: ours `call_within(&Deadline::after(..))`, "
        "peers inside an outer `timeout(1.5 s, ..)`",
    ),
]
# Policy with slow-call timing on: (function, row title), beside the peers'
# stack in the same group.
POLICY_SLOW_GROUP = "policy/slow-timing"
POLICY_SLOW_ROWS = [
    ("watertight-untimed", "slow-timing group, ours untimed (`BreakerConfig::DEFAULT`)"),
    (
        "watertight-coarse",
        "slow-call timing on: `slow_call_duration(1 s)`, the breaker on `CoarseClock` "
        "(`Policy::with_breaker_clock`)",
    ),
    ("watertight-std", "the same, the breaker on `StdClock`"),
    ("watertight-tokio", "the same, the breaker on `TokioClock` (the policy's own clock)"),
]
# The forms groups: (group, what); each row a form, with its ratio to the
# fastest form of the group.
FORMS = [
    ("breaker/forms/sync", "breaker, one closed-state call (`benches/breaker.rs`)"),
    ("uncontended/try_acquire-forms", "bulkhead, `try_acquire` + drop (`benches/bulkhead.rs`)"),
    ("policy/forms", "policy, `call(ready).await` in a tokio current-thread loop (`benches/policy.rs`)"),
]
FORM_ORDER = ["unwrap", "if-let", "match-err", "question-mark", "call", "call-awaited", "call_with"]
FORM_TITLE = {
    "unwrap": "`.unwrap()`",
    "if-let": "`if let Ok(..)`",
    "match-err": "`match`, the `Err` arm using the error",
    "question-mark": "`?` in a fn returning the error",
    "call": "`call(..)` (polled once)",
    "call-awaited": "`call(..).await` in an `async` block (polled once)",
    "call_with": "`call_with(.., classifier)`",
    "ref-poll-ready": "the trivial call's future alone, polled once the same way (no breaker)",
}
POLICY_PARTS_GROUP = "policy/parts"
# (function, what) in the order shown.
POLICY_PARTS = [
    ("watertight-floor", "ours: free slot + breaker permit + call + record, no clock read, no sleep"),
    ("watertight-acquire_timeout", "ours: free `Bulkhead::acquire_timeout(100 ms)` + drop"),
    ("tokio-acquire", "tokio: free `Semaphore::acquire()` + drop"),
    ("watertight-breaker", "ours: closed `CircuitBreaker::call(ready)`"),
    ("failsafe-breaker", "failsafe: default breaker's `call(ready)`"),
    ("watertight-timeout", "ours: `timeout(TokioClock, 30 s, ready)`"),
    ("tokio-timeout", "tokio: `tokio::time::timeout(30 s, ready)`"),
    ("Instant::now", "`std::time::Instant::now()`"),
    ("TokioClock::now", "`TokioClock::now()` (tokio's `Instant::now()`)"),
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
    known = (
        {gid for gid, _ in UNCONTENDED}
        | {gid for gid, _, _ in BREAKER_ROWS}
        | {gid for gid, _ in POLICY_ROWS}
        | {POLICY_PARTS_GROUP, POLICY_SLOW_GROUP}
        | {gid for gid, _ in FORMS}
        | {HANDOFF}
    )
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


def breaker_tables(data: dict, root: Path) -> list:
    rows = [(gid, f, title) for gid, f, title in BREAKER_ROWS if f in data.get(gid, {})]
    if not rows:
        return []
    lines = [
        "ns per call (criterion median): admit, run a trivial `Ok(())`, record the outcome; "
        "peer ÷ watertight above 1 means watertight is faster. Ours is "
        "`CircuitBreaker<StdClock, 64>` with `BreakerConfig::DEFAULT`; recloser "
        "`Recloser::default()`; failsafe `Config::new().build()` (default) and "
        "`consecutive_failures(5, constant(30 s))` (consecutive).",
        "",
        "| case | watertight | recloser | failsafe default | failsafe consecutive "
        "| recloser ÷ watertight | failsafe default ÷ watertight "
        "| failsafe consecutive ÷ watertight |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for gid, f, title in rows:
        g = data[gid]
        ours = g.get(f)
        cells = [title, ns(ours)] + [ns(g.get(p)) for p in BREAKER_PEERS]
        cells += [ratio(g.get(p), ours) for p in BREAKER_PEERS]
        lines.append("| " + " | ".join(cells) + " |")

    slow = data.get(SLOW_GROUP, {})
    timed, untimed = slow.get("watertight"), slow.get("watertight-untimed")
    clock = slow.get("StdClock::now")
    if timed is not None and untimed is not None:
        added = timed - untimed
        lines += [
            "",
            f"Clock reads, measured in the slow-timing group: `std::time::Instant::now()` "
            f"{ns(slow.get('Instant::now'))}, `StdClock::now()` {ns(clock)}. Ours there: "
            f"{ns(untimed)} untimed, {ns(timed)} timed, so slow-call timing adds {ns(added)}"
            + (f" = {added / clock:.2f} `StdClock` reads." if clock else "."),
        ]
        lines[-1] += f" Timed on `StdClock` ÷ untimed: {timed / untimed:.2f}×."
        coarse, coarse_timed = slow.get("CoarseClock::now"), slow.get("watertight-coarse")
        if coarse is not None and coarse_timed is not None:
            lines[-1] += (
                f" `CoarseClock::now()` {ns(coarse)}; ours timed on it {ns(coarse_timed)}"
                f" ({coarse_timed / untimed:.2f}× untimed)."
            )
        q_now, q_recent = slow.get("quanta::Clock::now"), slow.get("quanta::Clock::recent")
        q_global, q_timed = slow.get("quanta::Instant::recent"), slow.get("watertight-quanta")
        if q_now is not None and q_recent is not None and q_timed is not None:
            lines[-1] += (
                f" quanta, `Upkeep` at 1 ms: `Clock::now()` {ns(q_now)}"
                f" ({ratio(q_now, slow.get('Instant::now'))} `Instant::now()`),"
                f" `Clock::recent()` {ns(q_recent)} ({ratio(q_recent, coarse)} `CoarseClock::now()`)"
                + (f", `Instant::recent()` {ns(q_global)}" if q_global is not None else "")
                + f"; ours timed on `Clock::recent()` {ns(q_timed)}"
                f" ({ratio(q_timed, coarse_timed)} timed on `CoarseClock`,"
                f" {q_timed / untimed:.2f}× untimed)."
            )

    path = root / "breaker-sizes.json"
    if path.is_file():
        try:
            sizes = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            print(f"skipping {path}: {e}", file=sys.stderr)
        else:
            lines += ["", f"| type | `size_of` ({sizes.get('arch', 'host')}) |", "|---|---|"]
            for s_ in sizes.get("sizes") or []:
                lines.append(f"| `{s_['type']}` | {s_['bytes']} B |")
    return lines


def policy_tables(data: dict) -> list:
    rows = [(gid, title) for gid, title in POLICY_ROWS if OURS in data.get(gid, {})]
    if not rows:
        return []
    lines = [
        "ns per call with nothing failing (criterion median), a loop of calls in one tokio "
        "current-thread `block_on`; peers ÷ watertight above 1 means watertight is faster. "
        "Ours is `Policy<TokioClock, 64>` from `PolicyConfig::builder(64)` (slot wait 100 ms, "
        "call timeout 30 s, default breaker); the peers are `tokio::sync::Semaphore::new(64)` "
        "outside, failsafe's futures breaker (`Config::new().build()`) inside, "
        "`tokio::time::timeout(30 s)` innermost.",
        "",
        "| case | watertight | tokio `Semaphore` + failsafe + `tokio::time::timeout` "
        "| peers ÷ watertight |",
        "|---|---|---|---|",
    ]
    for gid, title in rows:
        g = data[gid]
        ours, peer = g.get(OURS), g.get(POLICY_PEER)
        lines.append(f"| {title} | {ns(ours)} | {ns(peer)} | {ratio(peer, ours)} |")
    slow = data.get(POLICY_SLOW_GROUP, {})
    shown = [(f, title) for f, title in POLICY_SLOW_ROWS if f in slow]
    untimed = slow.get("watertight-untimed")
    for f, title in shown:
        ours, peer = slow.get(f), slow.get(POLICY_PEER)
        lines.append(f"| {title} | {ns(ours)} | {ns(peer)} | {ratio(peer, ours)} |")
    if shown and untimed:
        lines += [
            "",
            "Slow-call timing's cost in the policy, same run: "
            + ", ".join(
                f"{f.removeprefix('watertight-')} {ratio(slow[f], untimed)} untimed"
                for f, _ in shown
                if f != "watertight-untimed"
            )
            + ".",
        ]
    parts = data.get(POLICY_PARTS_GROUP, {})
    shown = [(f, what) for f, what in POLICY_PARTS if f in parts]
    if shown:
        lines += [
            "",
            "The parts, each alone in a loop in the same `block_on`, same run:",
            "",
            "| part | ns |",
            "|---|---|",
        ]
        for f, what in shown:
            lines.append(f"| {what} | {ns(parts[f])} |")
    return lines


# The forms groups' marker keys in src/guide/benchmarks.rs.
FORMS_KEY = {"breaker/forms/sync": "forms-breaker", "uncontended/try_acquire-forms": "forms-bulkhead",
             "policy/forms": "forms-policy"}


def forms_tables(data: dict, only, group=None) -> list:
    """One table per forms group present (or only `group`'s): ns per form
    and its ratio to the group's fastest form."""
    benches = {"breaker/forms/sync": "breaker", "uncontended/try_acquire-forms": "bulkhead",
               "policy/forms": "policy"}
    lines: list = []
    for gid, what in FORMS:
        g = data.get(gid)
        if group not in (None, gid) or not g or only not in (None, benches[gid]):
            continue
        # `ref-*` rows are references for reading the forms, not forms.
        refs = {f: v for f, v in g.items() if f.startswith("ref-")}
        g = {f: v for f, v in g.items() if f not in refs}
        if not g:
            continue
        fastest = min(g.values())
        if lines:
            lines.append("")
        lines += [
            f"The same call written each way a caller writes it: {what}; ns (criterion "
            "median) and ÷ the fastest form, one run.",
            "",
            "| form | ns | ÷ fastest |",
            "|---|---|---|",
        ]
        order = [f for f in FORM_ORDER if f in g] + sorted(f for f in g if f not in FORM_ORDER)
        for f in order:
            lines.append(f"| {FORM_TITLE.get(f, f)} | {ns(g[f])} | {ratio(g[f], fastest)} |")
        for f in sorted(refs):
            lines.append(f"| reference: {FORM_TITLE.get(f, f)} | {ns(refs[f])} | – |")
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


GUIDE = Path(__file__).resolve().parent.parent / "src" / "guide" / "benchmarks.rs"


def splice(path: Path, key: str, lines: list) -> None:
    """Replaces the `//!` lines between `key`'s two markers in `path` with
    `lines` (each prefixed `//! `), keeping a blank doc line on each side."""
    start = f"//! <!-- bench_table.py: {key} -->"
    end = f"//! <!-- /bench_table.py: {key} -->"
    text = path.read_text().split("\n")
    try:
        a = text.index(start)
        b = text.index(end, a)
    except ValueError:
        raise SystemExit(f"{path}: no markers for {key!r} ({start!r} ... {end!r})")
    body = ["//!"] + [("//! " + l).rstrip() if l else "//!" for l in lines] + ["//!"]
    text[a + 1:b] = body
    path.write_text("\n".join(text))


def main(argv: list) -> int:
    root = None
    baseline = "new"
    show_all = False
    only = None
    write = None
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
        elif a == "--write":
            write = GUIDE
        elif a.startswith("--write="):
            write = Path(a.split("=", 1)[1])
        elif a == "--only" or a.startswith("--only="):
            only = a.split("=", 1)[1] if "=" in a else next(it, None)
            if only not in ("bulkhead", "breaker", "policy"):
                print("--only takes bulkhead, breaker or policy", file=sys.stderr)
                return 2
        elif root is None:
            root = Path(a)
        else:
            print(f"unexpected argument {a!r}", file=sys.stderr)
            return 2
    root = root or default_dir()
    if not root.is_dir():
        print(
            f"no criterion output at {root}; run `cargo bench --bench bulkhead`, "
            "`cargo bench --bench breaker` or `cargo bench --bench policy --features tokio` first",
            file=sys.stderr,
        )
        return 1

    data = load(root, baseline)
    # (marker key, lines): the keys name the places in src/guide/benchmarks.rs.
    sections = []
    if only in (None, "bulkhead"):
        sections += [
            ("bulkhead-uncontended", uncontended_table(data)),
            ("bulkhead-contended", contended_tables(data)),
        ]
    if show_all:
        sections.append((None, other_tables(data)))
    if only in (None, "bulkhead"):
        sections.append(("bulkhead-fairness", fairness_table(root)))
    if only in (None, "breaker"):
        sections.append(("breaker", breaker_tables(data, root)))
    if only in (None, "policy"):
        sections.append(("policy", policy_tables(data)))
    for gid, _ in FORMS:
        sections.append((FORMS_KEY[gid], forms_tables(data, only, gid)))
    sections = [(k, s) for k, s in sections if s]
    if not sections:
        print(f"no results under {root}", file=sys.stderr)
        return 1
    if write:
        for key, lines in sections:
            if key is None:
                continue
            splice(write, key, lines)
            print(f"{write}: {key}", file=sys.stderr)
        return 0
    print("\n\n".join("\n".join(s) for _, s in sections))
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
