#!/usr/bin/env bash
# Builds (links, does not run) the firmware in its three variants and prints
# their flash and RAM. Usage: firmware/build.sh   (from anywhere)
#
#   default    watertight without `alloc`, no global allocator in the binary
#   heap       watertight `alloc` + embedded-alloc (8 KiB), waiting acquire
#   unguarded  the same firmware with the upstream call made directly
#
# flash = .vector_table + .text + .rodata + .data (the .data load image)
# RAM   = .data + .bss + .uninit (the heap build's 8 KiB arena is in .bss)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
# Always the firmware's own target dir, never the main crate's.
export CARGO_TARGET_DIR="$HERE/target"
TARGET=thumbv7em-none-eabihf
start=$SECONDS

rustup target add "$TARGET" >/dev/null 2>&1
rustup component add llvm-tools >/dev/null 2>&1 || rustup component add llvm-tools-preview >/dev/null
HOST="$(rustc -vV | sed -n 's/^host: //p')"
BIN="$(rustc --print sysroot)/lib/rustlib/$HOST/bin"
SIZE="$BIN/llvm-size"
NM="$BIN/llvm-nm"

ELF="$CARGO_TARGET_DIR/$TARGET/release/watertight-firmware"
OUT="$CARGO_TARGET_DIR/sizes"
mkdir -p "$OUT"

for variant in default heap unguarded; do
    if [ "$variant" = default ]; then features=(); else features=(--features "$variant"); fi
    echo "== cargo build --release ${features[*]}"
    cargo build --release --locked "${features[@]}"
    cp "$ELF" "$OUT/$variant.elf"
done

# The alloc-free build must not contain an allocator or event-listener.
if "$NM" -C "$OUT/default.elf" | grep -Eq 'GlobalAlloc|__rust_alloc|__rg_alloc|event_listener'; then
    echo "error: the default (no alloc) build contains allocator code" >&2
    exit 1
fi

# Section sums: text vector_table+text+rodata, data, bss(+uninit).
sizes() {
    "$SIZE" -A "$1" | awk '
        $1 == ".vector_table" || $1 == ".text" || $1 == ".rodata" { t += $2 }
        $1 == ".data" { d += $2 }
        $1 == ".bss" || $1 == ".uninit" { b += $2 }
        END { print t, d, b, t + d, d + b }'
}
symsize() { "$NM" -S -C --radix=d "$1" | awk -v s="$2" '$0 ~ s { print $2 + 0; exit }'; }

read -r _ _ _ base_flash base_ram <<<"$(sizes "$OUT/unguarded.elf")"
echo
printf '%-10s %8s %6s %6s %8s %8s %12s %10s\n' variant text data bss flash RAM "Δflash" "ΔRAM"
for variant in default heap unguarded; do
    read -r t d b flash ram <<<"$(sizes "$OUT/$variant.elf")"
    printf '%-10s %8d %6d %6d %8d %8d %+12d %+10d\n' \
        "$variant" "$t" "$d" "$b" "$flash" "$ram" $((flash - base_flash)) $((ram - base_ram))
done
echo "(bytes; Δ against unguarded; text = .vector_table+.text+.rodata, flash = text+data, RAM = data+bss)"
echo
for variant in default heap; do
    echo "$variant: static Bulkhead<EmbassyClock> = $(symsize "$OUT/$variant.elf" UPSTREAM_BULKHEAD) B," \
        "static CircuitBreaker<EmbassyClock, 64> = $(symsize "$OUT/$variant.elf" UPSTREAM_BREAKER) B"
done
echo "firmware: $((SECONDS - start)) s"
