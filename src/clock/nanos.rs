//! Nanosecond arithmetic without 64-bit division.
//!
//! Cortex-M has no 64-bit divide instruction: a `u64 / 1_000_000` there is a
//! call into compiler-builtins' `__aeabi_uldivmod`, about 900 bytes of flash
//! that every time conversion of the breaker and the bulkhead would pull in
//! (`Duration::from_nanos` divides by 10⁹ too). The three divisors time
//! needs are constants, so each division is done here as a multiplication by
//! a precomputed reciprocal and a shift — exact for every `u64` (the
//! Granlund–Montgomery bound, checked below against `/` on edge cases and a
//! sweep). 64-bit targets multiply in one instruction; 32-bit targets build
//! the high half from four 32×32 multiplications (`umull`), a dozen
//! instructions and no call.

use core::time::Duration;

/// The high 64 bits of `a × b`.
#[inline(always)]
const fn mulhi(a: u64, b: u64) -> u64 {
    #[cfg(target_pointer_width = "64")]
    {
        ((a as u128 * b as u128) >> 64) as u64
    }
    #[cfg(not(target_pointer_width = "64"))]
    {
        mulhi_halves(a, b)
    }
}

/// [`mulhi`] from 32-bit halves, the form 32-bit targets use; compiled on
/// every target so the host's tests cover it.
#[inline(always)]
#[cfg_attr(target_pointer_width = "64", allow(dead_code))]
const fn mulhi_halves(a: u64, b: u64) -> u64 {
    const LOW: u64 = 0xffff_ffff;
    let (a0, a1) = (a & LOW, a >> 32);
    let (b0, b1) = (b & LOW, b >> 32);
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // The middle column, with the carry out of the low one; cannot overflow:
    // three terms below 2³² each.
    let mid = (p00 >> 32) + (p01 & LOW) + (p10 & LOW);
    p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32)
}

/// `n / 1_000` (microseconds from nanoseconds).
#[inline(always)]
#[allow(dead_code)] // used on 64-bit targets only, tested everywhere
pub(crate) const fn div_1e3(n: u64) -> u64 {
    mulhi(n >> 3, 0x20c4_9ba5_e353_f7cf) >> 4
}

/// `n / 1_000_000` (milliseconds from nanoseconds).
#[inline(always)]
#[allow(dead_code)] // used on 32-bit targets only, tested everywhere
pub(crate) const fn div_1e6(n: u64) -> u64 {
    mulhi(n >> 6, 0x0218_def4_16bd_b1a7) >> 7
}

/// `n / 1_000_000_000` (seconds from nanoseconds).
#[inline(always)]
pub(crate) const fn div_1e9(n: u64) -> u64 {
    mulhi(n >> 9, 0x0044_b82f_a09b_5a53) >> 11
}

/// `Duration::from_nanos(n)`, without the division.
#[inline(always)]
pub(crate) const fn duration(n: u64) -> Duration {
    let secs = div_1e9(n);
    let nanos = (n - secs * 1_000_000_000) as u32;
    // SAFETY: `div_1e9` is `n / 10⁹` exactly for every `u64` (the bound
    // above, and `divisions_are_exact` below), so the remainder
    // is below 10⁹. Told to the compiler, `Duration::new` drops its
    // carry-and-panic path: on Cortex-M that path (a division and a panic
    // with its location) was a fifth of the breaker's retry hint.
    unsafe { core::hint::assert_unchecked(nanos < 1_000_000_000) };
    Duration::new(secs, nanos)
}

/// `d` in whole nanoseconds, or `None` past `u64::MAX` (585 years);
/// `u64::try_from(d.as_nanos())` without the 128-bit arithmetic.
#[inline(always)]
pub(crate) const fn checked_from(d: Duration) -> Option<u64> {
    match d.as_secs().checked_mul(1_000_000_000) {
        Some(whole) => whole.checked_add(d.subsec_nanos() as u64),
        None => None,
    }
}

/// `d` in whole nanoseconds, stopping at `u64::MAX`.
#[inline(always)]
pub(crate) const fn saturating_from(d: Duration) -> u64 {
    match checked_from(d) {
        Some(n) => n,
        None => u64::MAX,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Edge cases around multiples of `d` and the ends of the range, plus a
    /// sweep across every magnitude.
    fn samples(d: u64) -> impl Iterator<Item = u64> {
        let edges = [
            0,
            1,
            d - 1,
            d,
            d + 1,
            u64::MAX,
            u64::MAX - 1,
            u64::MAX / d * d,
            u64::MAX / d * d - 1,
        ];
        // A xorshift sweep: deterministic, covers all bit lengths.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let sweep = (0..20_000).map(move |i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = x >> (i % 64);
            // Land on, just below and just above a multiple of `d`.
            match i % 3 {
                0 => n,
                1 => n / d * d,
                _ => (n / d * d).wrapping_sub(1),
            }
        });
        edges.into_iter().chain(sweep)
    }

    #[test]
    fn halves_multiply_like_u128() {
        for a in samples(3) {
            for b in [0, 1, 3, u64::MAX, 0x0218_def4_16bd_b1a7, a.rotate_left(17)] {
                assert_eq!(
                    mulhi_halves(a, b),
                    ((a as u128 * b as u128) >> 64) as u64,
                    "{a} × {b}"
                );
            }
        }
    }

    #[test]
    fn divisions_are_exact() {
        for n in samples(1_000) {
            assert_eq!(div_1e3(n), n / 1_000, "{n}");
        }
        for n in samples(1_000_000) {
            assert_eq!(div_1e6(n), n / 1_000_000, "{n}");
        }
        for n in samples(1_000_000_000) {
            assert_eq!(div_1e9(n), n / 1_000_000_000, "{n}");
            assert_eq!(duration(n), Duration::from_nanos(n), "{n}");
        }
    }

    #[test]
    fn checked_from_matches_as_nanos() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::new(18_446_744_073, 709_551_615),
            Duration::new(18_446_744_073, 709_551_616),
            Duration::new(u64::MAX, 999_999_999),
            Duration::MAX,
        ] {
            assert_eq!(checked_from(d), u64::try_from(d.as_nanos()).ok(), "{d:?}");
            assert_eq!(
                saturating_from(d),
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
                "{d:?}"
            );
        }
    }
}
