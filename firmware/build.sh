#!/usr/bin/env bash
# Builds (links, does not run) the firmware in its ten variants, at
# opt-level "z" (profile release) and "s" (profile release-s), and prints
# their flash and RAM. Usage: firmware/build.sh   (from anywhere)
#
#   unguarded    the upstream call made directly: the baseline
#   no-deadline  fail-fast bulkhead + breaker, no alloc, no global allocator
#   default      no-deadline + deadline::timeout (the full guard)
#   wait         default, waiting up to 15 ms for a permit, no allocator
#   heap         wait with watertight `alloc` + embedded-alloc (8 KiB)
#   rate         no-deadline + a static RateLimiter's check() (fail-fast)
#   rate-1core   rate, its 64-bit word changed with interrupts disabled
#                (portable-atomic's unsafe-assume-single-core: one core)
#                instead of through portable-atomic's fallback lock table
#   rate-wait    wait + a wait of up to 15 ms for a cell (acquire_timeout)
#   time-window  no-deadline, the breaker on a time window (10 s, 10 buckets:
#                a TimeBreaker<_, 10>) instead of the last 64 calls
#   consecutive  no-deadline, the breaker on 5 failures in a row
#                (CircuitBreaker<_, 1>) instead of the last 64 calls
#
# flash = .vector_table + .text + .rodata + .data (the .data load image)
# RAM   = .data + .bss + .uninit (the heap build's 8 KiB arena is in .bss)
#
# run-qemu.sh, beside it, builds and runs the scenario firmware on two
# emulated boards.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
# Always the firmware's own target dir, never the main crate's.
export CARGO_TARGET_DIR="$HERE/target"
# A RUSTFLAGS from the environment, even an empty one, would replace the
# `-Tlink.x` of .cargo/config.toml, and the "firmware" would link to nothing.
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
TARGET=thumbv7em-none-eabihf
start=$SECONDS

rustup target add "$TARGET" >/dev/null 2>&1
rustup component add llvm-tools >/dev/null 2>&1 || rustup component add llvm-tools-preview >/dev/null
HOST="$(rustc -vV | sed -n 's/^host: //p')"
BIN="$(rustc --print sysroot)/lib/rustlib/$HOST/bin"
SIZE="$BIN/llvm-size"
NM="$BIN/llvm-nm"

OUT="$CARGO_TARGET_DIR/sizes"
rm -rf "$OUT"
mkdir -p "$OUT"
VARIANTS=(unguarded no-deadline default wait heap rate rate-1core rate-wait time-window consecutive)
# The cargo features of a variant.
features_of() {
    case "$1" in
        default) ;;
        rate) echo "--features no-deadline,rate" ;;
        rate-1core) echo "--features no-deadline,rate,single-core-atomics" ;;
        rate-wait) echo "--features wait,rate" ;;
        time-window) echo "--features no-deadline,time-window" ;;
        consecutive) echo "--features no-deadline,consecutive" ;;
        *) echo "--features $1" ;;
    esac
}

for profile in release release-s; do
    for variant in "${VARIANTS[@]}"; do
        read -r -a features <<<"$(features_of "$variant")"
        echo "== cargo build --profile $profile ${features[*]}"
        cargo build --profile "$profile" --locked "${features[@]}"
        cp "$CARGO_TARGET_DIR/$TARGET/$profile/watertight-firmware" "$OUT/$profile-$variant.elf"
    done
done

# Each image must be a real firmware: cortex-m-rt's reset handler, a vector
# table, and code.
for elf in "$OUT"/*.elf; do
    syms="$("$NM" "$elf")"
    text="$("$SIZE" -A "$elf" | awk '$1 == ".text" { print $2 + 0 }')"
    if ! grep -q ' T Reset$' <<<"$syms" || [ "${text:-0}" -lt 1024 ]; then
        echo "error: $(basename "$elf") is not a linked firmware (no reset handler or no code)" >&2
        exit 1
    fi
done

# The alloc-free builds must not contain an allocator or event-listener.
for elf in "$OUT"/release*-default.elf "$OUT"/release*-no-deadline.elf "$OUT"/release*-wait.elf \
    "$OUT"/release*-rate*.elf "$OUT"/release*-time-window.elf "$OUT"/release*-consecutive.elf; do
    if grep -Eq 'GlobalAlloc|__rust_alloc|__rg_alloc|event_listener' <<<"$("$NM" -C "$elf")"; then
        echo "error: $(basename "$elf") (no alloc) contains allocator code" >&2
        exit 1
    fi
done

# Section sums: text vector_table+text+rodata, data, bss(+uninit).
sizes() {
    "$SIZE" -A "$1" | awk '
        $1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" { t += $2 }
        $1 == ".data" { d += $2 }
        $1 == ".bss" || $1 == ".uninit" { b += $2 }
        END { print t, d, b, t + d, d + b }'
}
symsize() { "$NM" -S -C --radix=d "$1" | awk -v s="$2" '$0 ~ s { print $2 + 0; exit }'; }

echo
printf '%-6s %-12s %7s %5s %6s %7s %6s %8s %7s\n' opt variant text data bss flash RAM "Δflash" "ΔRAM"
for profile in release release-s; do
    opt=z; [ "$profile" = release-s ] && opt=s
    read -r _ _ _ base_flash base_ram <<<"$(sizes "$OUT/$profile-unguarded.elf")"
    for variant in "${VARIANTS[@]}"; do
        read -r t d b flash ram <<<"$(sizes "$OUT/$profile-$variant.elf")"
        printf '%-6s %-12s %7d %5d %6d %7d %6d %+8d %+7d\n' \
            "\"$opt\"" "$variant" "$t" "$d" "$b" "$flash" "$ram" $((flash - base_flash)) $((ram - base_ram))
        eval "flash_${opt}_${variant//-/_}=$flash ram_${opt}_${variant//-/_}=$ram"
        if [ "$variant" = no-deadline ]; then
            eval "guard_$opt=$((flash - base_flash))"
        fi
    done
done
echo "(bytes; Δ against unguarded at the same opt-level; text = .vector_table+.text+.rodata,"
echo " flash = text+data, RAM = data+bss)"
echo
# shellcheck disable=SC2154 # set by eval above
echo "bulkhead + breaker (no-deadline − unguarded): $guard_z B of flash at opt-level \"z\"," \
    "$guard_s B at \"s\" (target: ≤ 4096 B)"
# The guide's claim (guide::firmware), kept true: bulkhead + breaker within 4 KiB at both
# levels.
# (The check fails the script at its end, after every line below is printed.)
over=0
# shellcheck disable=SC2154
for guard in "z $guard_z" "s $guard_s"; do
    read -r opt bytes <<<"$guard"
    if [ "$bytes" -gt 4096 ]; then
        echo "error: bulkhead + breaker add $bytes B of flash at opt-level \"$opt\", above 4096 B" >&2
        over=1
    fi
done
# What the rate limiter adds, against the same build without it.
# shellcheck disable=SC2154 # set by eval above
for opt in z s; do
    for pair in "rate no-deadline" "rate-1core no-deadline" "rate-wait wait"; do
        read -r with without <<<"$pair"
        w=${with//-/_} wo=${without//-/_}
        eval "df=\$((flash_${opt}_$w - flash_${opt}_$wo)) dr=\$((ram_${opt}_$w - ram_${opt}_$wo))"
        printf 'rate limiter at "%s": %-10s − %-11s = %+6d B flash %+6d B RAM\n' "$opt" "$with" "$without" "$df" "$dr"
    done
done
# What the other breaker windows add or save, against the count window.
# shellcheck disable=SC2154 # set by eval above
for opt in z s; do
    for with in time-window consecutive; do
        w=${with//-/_}
        eval "df=\$((flash_${opt}_$w - flash_${opt}_no_deadline)) dr=\$((ram_${opt}_$w - ram_${opt}_no_deadline))"
        printf 'breaker window at "%s": %-11s − no-deadline = %+6d B flash %+6d B RAM\n' "$opt" "$with" "$df" "$dr"
    done
done
for variant in default wait heap; do
    echo "$variant: static Bulkhead<EmbassyClock> = $(symsize "$OUT/release-$variant.elf" UPSTREAM_BULKHEAD) B," \
        "static CircuitBreaker<EmbassyClock, 64> = $(symsize "$OUT/release-$variant.elf" UPSTREAM_BREAKER) B"
done
echo "time-window: static TimeBreaker<EmbassyClock, 10> = $(symsize "$OUT/release-time-window.elf" UPSTREAM_BREAKER) B;" \
    "consecutive: static CircuitBreaker<EmbassyClock, 1> = $(symsize "$OUT/release-consecutive.elf" UPSTREAM_BREAKER) B"
for variant in rate rate-1core; do
    echo "$variant: static RateLimiter<EmbassyClock> = $(symsize "$OUT/release-$variant.elf" UPSTREAM_RATE) B," \
        "portable-atomic's lock table = $(locks="$(symsize "$OUT/release-$variant.elf" 'portable_atomic.*LOCKS')"; echo "${locks:-0}") B"
done
echo "firmware: $((SECONDS - start)) s"
exit "$over"
