#!/usr/bin/env python3
"""Instructions per call of each way of writing a closed breaker call.

Builds `benches/breaker.rs` (`cargo bench --bench breaker --no-run`) and runs
its binary under valgrind's callgrind once per form, with `WT_COUNT_FORM`
naming the form (see `count_instructions` there). Each form's count minus
the count of `none` (the same loop calling an empty function), over the
calls, is its instructions per call: the same every run, whatever else the
machine is doing, where the forms' criterion times (2-5 ns) move by a tenth
from run to run here. Prints two Markdown tables: the forms with their
ratio to the fewest, and slow-call timing on `CoarseClock`, the time
window (on `StdClock` and on `CoarseClock`) and the consecutive-failures
breaker against the count window's untimed call; with `--write`, puts
them into the guide's benchmarks page
(`src/guide/benchmarks.rs`, between the `breaker-instructions` markers)
instead, as `bench_table.py --write` does its tables.

    python3 scripts/forms_instructions.py [--calls N] [--write [FILE]]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# The forms' names and titles, as the criterion tables have them.
from bench_table import FORM_ORDER, FORM_TITLE, GUIDE, splice

REFERENCE = "ref-poll-ready"
# The second table: each closed call against the count window's untimed one.
TIMING = [("untimed", "closed call, slow-call timing off (`StdClock`)"),
          ("coarse", "the same, `slow_call_duration(1 s)` on `CoarseClock`"),
          ("time", "time window (100 ms, 10 buckets) on `StdClock`"),
          ("time-coarse", "the same time window on `CoarseClock`"),
          ("consecutive", "consecutive failures (5)")]


def bench_binary(root: Path) -> str:
    out = subprocess.run(
        ["cargo", "bench", "--bench", "breaker", "--no-run", "--message-format=json"],
        cwd=root, check=True, capture_output=True, text=True).stdout
    found = re.findall(r'"executable":"([^"]*/breaker-[0-9a-f]+)"', out)
    if not found:
        sys.exit("forms_instructions: cargo built no breaker bench binary")
    return found[-1]


def count(binary: str, form: str, calls: int) -> int:
    env = dict(os.environ, WT_COUNT_FORM=form, WT_COUNT_CALLS=str(calls))
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary],
        env=env, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"forms_instructions: {form}: exit {run.returncode}\n{run.stderr[-2000:]}")
    m = re.search(r"Collected : (\d+)", run.stderr)
    if not m:
        sys.exit(f"forms_instructions: {form}: no callgrind total\n{run.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--write", nargs="?", const=GUIDE, type=Path, metavar="FILE",
                    help="splice the tables into FILE (default src/guide/benchmarks.rs)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("forms_instructions: needs valgrind (apt-get install valgrind)")
    root = Path(__file__).resolve().parent.parent
    binary = bench_binary(root)
    base = count(binary, "none", args.calls)

    def per_call(form: str) -> float:
        return (count(binary, form, args.calls) - base) / args.calls

    forms = {f: per_call(f) for f in FORM_ORDER}
    fewest = min(forms.values())
    lines = [
        f"Instructions per call (valgrind callgrind, {args.calls:,} calls, net of the "
        "empty loop): breaker, one closed-state call written each way "
        "(`python3 scripts/forms_instructions.py`).",
        "",
        "| form | instructions | ÷ fewest |",
        "|---|---|---|",
    ]
    for f in FORM_ORDER:
        lines.append(f"| {FORM_TITLE[f]} | {forms[f]:.0f} | {forms[f] / fewest:.2f}× |")
    ref = per_call(REFERENCE)
    lines += [f"| reference: {FORM_TITLE[REFERENCE]} | {ref:.0f} | – |", ""]
    timing = {f: per_call(f) for f, _ in TIMING}
    lines += ["| call | instructions | ÷ untimed |", "|---|---|---|"]
    for f, title in TIMING:
        lines.append(f"| {title} | {timing[f]:.0f} | {timing[f] / timing['untimed']:.2f}× |")
    if args.write:
        splice(args.write, "breaker-instructions", lines)
        print(f"{args.write}: breaker-instructions", file=sys.stderr)
    else:
        print("\n".join(lines))

if __name__ == "__main__":
    main()
