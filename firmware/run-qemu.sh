#!/usr/bin/env bash
# Builds the scenario firmware (src/bin/scenario.rs) for two boards and runs
# each in QEMU, with semihosting for its output and exit status:
#
#   netduinoplus2  STM32F405, Cortex-M4F  thumbv7em-none-eabihf  tick: SysTick
#   microbit       nRF51822, Cortex-M0    thumbv6m-none-eabi     tick: TIMER0
#
# A run fails on a non-zero exit (a failed check, a panic), on a hang (past
# TIMEOUT seconds), on a FAIL or panic line, or when an expected line is
# missing or out of order. Prints each board's output, wall time and image
# size.
# Usage: firmware/run-qemu.sh   (from anywhere; QEMU=... picks the binary)
#
# Time: QEMU runs with -icount, so virtual time is the instruction count
# (2^shift ns per instruction) and never waits for the host (sleep=off):
# every run sees the same virtual time, and prints the same lines. The
# boards' timers (SysTick at the modelled 168 MHz, nRF51 TIMER0 at 1 MHz)
# count that virtual time, so embassy's milliseconds are virtual ones.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
export CARGO_TARGET_DIR="$HERE/target"
# As in build.sh: a RUSTFLAGS from the environment would drop `-Tlink.x`.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
QEMU="${QEMU:-qemu-system-arm}"
# Seconds per run (a run takes about one); QEMU_TIMEOUT=... overrides.
TIMEOUT="${QEMU_TIMEOUT:-60}"
start=$SECONDS

# machine, target, icount shift: 8 ns an instruction (125 MHz) on the
# 168 MHz STM32F405, 64 ns (15.6 MHz) on the 16 MHz nRF51.
BOARDS=(
    "netduinoplus2 thumbv7em-none-eabihf 3"
    "microbit thumbv6m-none-eabi 6"
)

# Every line the scenario must print, in this order (extended regexps; the
# board's name line comes first). Values that depend on the tick (how many
# ms) are matched loosely; counts and states exactly.
EXPECTED=(
    '^ok   bulkhead: 2 calls in, 2 of 2 slots taken$'
    '^ok   bulkhead: the third call refused: bulkhead full$'
    '^ok   bulkhead: after a release the next call is granted$'
    '^ok   wait: nothing released, a 10 ms wait ended: timed out waiting for a bulkhead permit \(after [0-9]+ ms, 0 left waiting\)$'
    '^ok   queue: a second waiter with 1 place in the queue: bulkhead wait queue full \(after 0 ms\)$'
    '^ok   wait: 1 waiting, a release 5 ms in, then the wait granted \(step 1 release, step 2 served, after [0-9]+ ms\)$'
    '^ok   bulkhead: 2 of 2 slots free at the end, 3 refusals counted \(full, timed out, queue full\)$'
    '^ok   breaker: 4 of 4 calls failed, state open$'
    '^ok   breaker: the next call refused without running \(ran: false\), retry after [0-9]+ms$'
    '^ok   breaker: [0-9]+ ms after opening, state open$'
    '^ok   breaker: once the retry hint has passed \([0-9]+ ms after opening\), state half_open$'
    '^ok   breaker: 2 good probes: state half_open after the first, closed after the second$'
    '^ok   time breaker: 3 of 3 calls in 200 ms failed, state open$'
    '^ok   time breaker: after the open wait a good probe: state closed$'
    '^ok   time breaker: 2 failures, 200 ms, 2 more: state closed, 2 calls in the window$'
    '^ok   deadline: a 100 ms call under a 20 ms deadline: cut after [0-9]+ ms$'
    '^ok   deadline: a 5 ms call under a 20 ms deadline returned Ok\(7\)$'
    '^ok   rate: a burst of 3 admitted at once, the 4th refused: rate limited: retry after 100ms$'
    '^ok   rate: 1 ms before the hint rate limited: retry after 1ms, at the hint \([0-9]+ ms in\) admitted, the next rate limited: retry after 100ms$'
    '^ok   rate: a 50 ms wait for a cell 100 ms away refused at once \(after 0 ms\): rate limited: retry after 100ms$'
    '^ok   rate: a 150 ms wait, 1 waiting 5 ms in, served at the cell.s instant \(after [0-9]+ ms, deadline 150 ms\)$'
    '^ok   rate: 5 admitted \(1 after a wait\), 4 refused, 0 cancelled, 0 waiting$'
    '^ok   partition: bulk took 3 of 3 slots \(1 borrowed from alarms\), the 4th refused: bulkhead full$'
    '^ok   partition: an alarm waited in its lent-out room and was served when the borrower left \(after [0-9]+ ms, room alarms\), bulk still refused$'
    '^scenario: 24 checks passed, 0 failed, [0-9]+ ms of embassy time$'
)

command -v "$QEMU" >/dev/null || {
    echo "error: $QEMU not found (apt-get install qemu-system-arm)" >&2
    exit 1
}
"$QEMU" --version | head -n 1

rustup component add llvm-tools >/dev/null 2>&1 || rustup component add llvm-tools-preview >/dev/null
HOST="$(rustc -vV | sed -n 's/^host: //p')"
SIZE="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-size"
NM="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-nm"
# flash (vector table, code, read-only data, .data's image) and RAM (.data,
# .bss, .uninit) of an image, as build.sh counts them.
sizes() {
    "$SIZE" -A "$1" | awk '
        $1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" { t += $2 }
        $1 == ".data" { d += $2 }
        $1 == ".bss" || $1 == ".uninit" { b += $2 }
        END { printf "%6d B flash %5d B RAM", t + d, d + b }'
}

OUT="$CARGO_TARGET_DIR/qemu"
mkdir -p "$OUT"
for board in "${BOARDS[@]}"; do
    read -r _ target _ <<<"$board"
    rustup target add "$target" >/dev/null 2>&1
    echo "== cargo build --release --features qemu --bin scenario --target $target"
    cargo build --release --locked --features qemu --bin scenario --target "$target"
done

# The scenario waits for a slot with no allocator: none may be linked.
for board in "${BOARDS[@]}"; do
    read -r _ target _ <<<"$board"
    if grep -Eq 'GlobalAlloc|__rust_alloc|__rg_alloc|event_listener' \
        <<<"$("$NM" -C "$CARGO_TARGET_DIR/$target/release/scenario")"; then
        echo "error: the $target scenario contains allocator code" >&2
        exit 1
    fi
done

failed=0
TIMES=()
for board in "${BOARDS[@]}"; do
    read -r machine target shift <<<"$board"
    elf="$CARGO_TARGET_DIR/$target/release/scenario"
    log="$OUT/$machine.out"
    echo
    echo "== $machine ($target): $QEMU -M $machine -icount shift=$shift,align=off,sleep=off"
    t0=$EPOCHREALTIME
    status=0
    timeout -k 5 "$TIMEOUT" "$QEMU" -M "$machine" -display none -monitor none -serial null \
        -semihosting-config enable=on,target=native \
        -icount "shift=$shift,align=off,sleep=off" \
        -kernel "$elf" </dev/null >"$log" 2>&1 || status=$?
    wall=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    cat "$log"
    problems=()
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        problems+=("hung: no exit within ${TIMEOUT} s")
    elif [ "$status" -ne 0 ]; then
        problems+=("exit status $status")
    fi
    if grep -Eq '^(FAIL|panic)' "$log"; then
        problems+=("a check failed or the firmware panicked")
    fi
    # The expected lines, in order, after the board's name.
    missing="$(EXPECTED_LINES="$(printf '%s\n' "${EXPECTED[@]}")" awk \
        -v board="^watertight scenario on $machine: " '
        BEGIN { n = split(ENVIRON["EXPECTED_LINES"], want, "\n"); want[0] = board; i = 0 }
        i <= n && $0 ~ want[i] { i++ }
        END { if (i <= n) print want[i] }' "$log")"
    if [ -n "$missing" ]; then
        problems+=("missing or out of order: $missing")
    fi
    verdict=ok
    if [ ${#problems[@]} -ne 0 ]; then
        failed=1
        verdict=FAILED
        for p in "${problems[@]}"; do echo "error: $machine: $p" >&2; done
    fi
    TIMES+=("$(printf '%-14s %-6s %5s s   %s' "$machine" "$verdict" "$wall" "$(sizes "$elf")")")
done

echo
echo "== QEMU runs: verdict, wall time, the scenario image's size"
printf '%s\n' "${TIMES[@]}"
echo "firmware-qemu: $((SECONDS - start)) s"
exit "$failed"
