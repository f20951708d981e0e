//! The request budget on the wire: the two header formats that carry what
//! is left of a [`Deadline`](super::Deadline) from one service to the next.
//!
//! - [`Format::GrpcTimeout`]: gRPC's `grpc-timeout` header, at most 8
//!   ASCII digits and a unit (`H` hours, `M` minutes, `S` seconds, `m`
//!   milliseconds, `u` microseconds, `n` nanoseconds): `"250m"`,
//!   `"1500000u"`.
//! - [`Format::Millis`]: a plain count of milliseconds, `"250"`, under a
//!   header whose name is the caller's choice; the default is
//!   [`TIMEOUT_MS`] (`x-request-timeout-ms`), beside Envoy's
//!   `x-envoy-expected-rq-timeout-ms`, whose meaning it shares.
//!
//! The value is a *duration* (what is left), never an instant: the two
//! machines' clocks need not agree, only tick at the same rate.
//!
//! Pure functions over bytes: no allocation, no `std`, no `http` crate. The
//! tower layers that read and write these headers (feature `http`) are in
//! `watertight::tower`.
//!
//! # Which way values round
//!
//! A budget may shrink on its way down a call chain, never grow: a callee
//! that believes it has more time than its caller keeps working after the
//! caller has given up. So:
//!
//! - **the sender rounds down** ([`Format::encode`] truncates): a header
//!   never says more than the sender had. `grpc-timeout` uses the finest
//!   unit in which the value fits in 8 digits, so nothing is lost below
//!   100 ms (nanoseconds), and at most one unit of 8 significant digits
//!   above it (below a microsecond up to 100 s, below a millisecond up to
//!   27 hours). Budgets past the largest the format can say (99,999,999
//!   hours; `u64::MAX` ms) are sent as that largest value. grpc-java
//!   truncates the same way; grpc-go rounds up, which lets each hop add up
//!   to one unit to its caller's budget.
//! - **the receiver takes the value exactly**: every unit is a whole number
//!   of nanoseconds, so a parsed value needs no rounding. What the receiver
//!   does with it — capping it at its own maximum, refusing a budget too
//!   small to be worth starting — is the inbound layer's business.
//!
//! The time the request spends on the network is not in the value: the
//! sender subtracts a margin for it (the outbound layer's `margin`).
//!
//! # Absurd values
//!
//! | value | parse |
//! |---|---|
//! | `""` | [`ParseError::Empty`] |
//! | `"-5m"`, `"-5"` | [`ParseError::Negative`] |
//! | `"1.5S"`, `" 5m"`, `"5 m"`, `"+5"` | [`ParseError::InvalidDigit`] |
//! | `"123456789m"` (9 digits) | [`ParseError::TooManyDigits`] |
//! | `"250"` as `grpc-timeout` | [`ParseError::MissingUnit`] |
//! | `"250x"` | [`ParseError::UnknownUnit`] |
//! | `"m"` | [`ParseError::MissingDigits`] |
//! | `"18446744073709551616"` ms (past `u64::MAX`) | [`ParseError::Overflow`] |
//! | `"0m"`, `"0"` | `Ok(Duration::ZERO)`: the budget is already spent |
//!
//! A zero budget is a value, not an error: the caller had nothing left.
//! The inbound layer refuses such a request at admission.
//!
//! # Examples
//!
//! ```
//! use core::time::Duration;
//! use watertight::deadline::wire::{Format, ParseError};
//!
//! let left = Duration::from_micros(1_234_567); // 1.234567 s
//! assert_eq!(Format::GrpcTimeout.encode(left).as_str(), "1234567u");
//! assert_eq!(Format::Millis.encode(left).as_str(), "1234"); // rounded down
//!
//! assert_eq!(Format::GrpcTimeout.parse(b"250m"), Ok(Duration::from_millis(250)));
//! assert_eq!(Format::Millis.parse(b"250"), Ok(Duration::from_millis(250)));
//! assert_eq!(Format::GrpcTimeout.parse(b"250"), Err(ParseError::MissingUnit));
//! ```

use core::fmt;
use core::time::Duration;

/// The gRPC header: `grpc-timeout`.
///
/// # Examples
///
/// ```
/// use watertight::deadline::wire::{Format, GRPC_TIMEOUT};
/// assert_eq!(Format::GrpcTimeout.default_header(), GRPC_TIMEOUT);
/// ```
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The default header for [`Format::Millis`]: `x-request-timeout-ms`.
///
/// Lowercase (HTTP/2 sends header names lowercase), an `x-` name because no
/// standard header carries a request's budget, `request-timeout` because
/// that is what the value is to the receiver (the time it has to answer),
/// and `-ms` for the unit, as in Envoy's `x-envoy-expected-rq-timeout-ms`,
/// without tying it to one proxy. Any other name can be configured.
///
/// # Examples
///
/// ```
/// use watertight::deadline::wire::{Format, TIMEOUT_MS};
/// assert_eq!(Format::Millis.default_header(), TIMEOUT_MS);
/// assert_eq!(TIMEOUT_MS, "x-request-timeout-ms");
/// ```
pub const TIMEOUT_MS: &str = "x-request-timeout-ms";

/// The largest value `grpc-timeout` can carry in one unit: 8 digits.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::deadline::wire::{Format, GRPC_MAX_VALUE};
/// assert_eq!(GRPC_MAX_VALUE, 99_999_999);
/// // Anything longer is sent as the largest value there is.
/// assert_eq!(Format::GrpcTimeout.encode(Duration::MAX).as_str(), "99999999H");
/// ```
pub const GRPC_MAX_VALUE: u64 = 99_999_999;

/// Nanoseconds per `grpc-timeout` unit, finest first.
const UNITS: [(u8, u64); 6] = [
    (b'n', 1),
    (b'u', 1_000),
    (b'm', 1_000_000),
    (b'S', 1_000_000_000),
    (b'M', 60 * 1_000_000_000),
    (b'H', 3_600 * 1_000_000_000),
];

/// A header format for the request budget.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::deadline::wire::Format;
///
/// for format in [Format::GrpcTimeout, Format::Millis] {
///     let sent = format.encode(Duration::from_millis(300));
///     assert_eq!(format.parse(sent.as_bytes()), Ok(Duration::from_millis(300)));
/// }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// gRPC's `grpc-timeout`: at most 8 digits and a unit.
    GrpcTimeout,
    /// Whole milliseconds, digits only.
    Millis,
}

impl Format {
    /// The header this format is sent in unless configured otherwise:
    /// [`GRPC_TIMEOUT`] or [`TIMEOUT_MS`].
    ///
    /// # Examples
    ///
    /// ```
    /// use watertight::deadline::wire::Format;
    /// assert_eq!(Format::GrpcTimeout.default_header(), "grpc-timeout");
    /// assert_eq!(Format::Millis.default_header(), "x-request-timeout-ms");
    /// ```
    pub const fn default_header(self) -> &'static str {
        match self {
            Format::GrpcTimeout => GRPC_TIMEOUT,
            Format::Millis => TIMEOUT_MS,
        }
    }

    /// Reads a header value: the budget it carries, exactly.
    ///
    /// # Errors
    ///
    /// A [`ParseError`] saying what is wrong with the value; the table of
    /// [absurd values](self#absurd-values) lists each case.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::deadline::wire::{Format, ParseError};
    ///
    /// assert_eq!(Format::GrpcTimeout.parse(b"2S"), Ok(Duration::from_secs(2)));
    /// assert_eq!(Format::GrpcTimeout.parse(b"1H"), Ok(Duration::from_secs(3600)));
    /// assert_eq!(Format::GrpcTimeout.parse(b"-1S"), Err(ParseError::Negative));
    /// assert_eq!(Format::Millis.parse(b"0"), Ok(Duration::ZERO));
    /// assert_eq!(Format::Millis.parse(b"99999999999999999999"), Err(ParseError::Overflow));
    /// ```
    pub fn parse(self, value: &[u8]) -> Result<Duration, ParseError> {
        match self {
            Format::GrpcTimeout => parse_grpc_timeout(value),
            Format::Millis => parse_millis(value),
        }
    }

    /// Writes a budget as a header value, rounded down (never more than
    /// `budget`); budgets past the format's largest value are sent as
    /// that value. See [which way values round](self#which-way-values-round).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::deadline::wire::Format;
    ///
    /// // Exact below 100 ms, in nanoseconds.
    /// assert_eq!(Format::GrpcTimeout.encode(Duration::from_nanos(99_999_999)).as_str(), "99999999n");
    /// // From 100 ms on, in microseconds: the nanoseconds are dropped.
    /// assert_eq!(Format::GrpcTimeout.encode(Duration::from_nanos(100_000_999)).as_str(), "100000u");
    /// assert_eq!(Format::Millis.encode(Duration::from_micros(2_999)).as_str(), "2");
    /// assert_eq!(Format::Millis.encode(Duration::ZERO).as_str(), "0");
    /// ```
    pub fn encode(self, budget: Duration) -> Encoded {
        match self {
            Format::GrpcTimeout => encode_grpc_timeout(budget),
            Format::Millis => {
                let ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
                Encoded::digits(ms, None)
            }
        }
    }
}

fn parse_grpc_timeout(value: &[u8]) -> Result<Duration, ParseError> {
    let (&unit, digits) = value.split_last().ok_or(ParseError::Empty)?;
    if unit.is_ascii_digit() {
        return Err(ParseError::MissingUnit);
    }
    let Some(&(_, nanos_per)) = UNITS.iter().find(|(u, _)| *u == unit) else {
        // A sign alone is a value with no digits, not a unit.
        return Err(if unit == b'-' && digits.is_empty() {
            ParseError::MissingDigits
        } else {
            ParseError::UnknownUnit(unit)
        });
    };
    let n = digits_value(digits, 8)?;
    // At most 99_999_999 units of at most an hour: 3.6e20 ns does not fit
    // a u64 of nanoseconds, so hours and minutes go through seconds.
    Ok(if nanos_per >= 1_000_000_000 {
        Duration::from_secs(n * (nanos_per / 1_000_000_000))
    } else {
        Duration::from_nanos(n * nanos_per)
    })
}

fn parse_millis(value: &[u8]) -> Result<Duration, ParseError> {
    if value.is_empty() {
        return Err(ParseError::Empty);
    }
    // u64::MAX has 20 digits; leading zeros are allowed, so the length
    // alone does not decide: the checked arithmetic does.
    Ok(Duration::from_millis(digits_value(value, usize::MAX)?))
}

/// The value of a run of ASCII digits, at most `max_digits` of them.
fn digits_value(digits: &[u8], max_digits: usize) -> Result<u64, ParseError> {
    match digits.first() {
        None => return Err(ParseError::MissingDigits),
        Some(b'-') => return Err(ParseError::Negative),
        Some(_) => {}
    }
    if digits.len() > max_digits {
        // Report a bad character before the length: "1.5000000000S" is not
        // a number at all.
        if digits.iter().all(u8::is_ascii_digit) {
            return Err(ParseError::TooManyDigits);
        }
        return Err(ParseError::InvalidDigit);
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(ParseError::InvalidDigit);
        }
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(ParseError::Overflow)?;
    }
    Ok(n)
}

fn encode_grpc_timeout(budget: Duration) -> Encoded {
    let secs = budget.as_secs();
    let nanos = u128::from(secs) * 1_000_000_000 + u128::from(budget.subsec_nanos());
    for &(unit, nanos_per) in &UNITS {
        let n = nanos / u128::from(nanos_per); // truncates: never more than the budget
        if n <= u128::from(GRPC_MAX_VALUE) {
            // Fits: n ≤ 99_999_999.
            return Encoded::digits(n as u64, Some(unit));
        }
    }
    Encoded::digits(GRPC_MAX_VALUE, Some(b'H'))
}

/// A header value written by [`Format::encode`]: ASCII, on the stack.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use watertight::deadline::wire::Format;
///
/// let v = Format::GrpcTimeout.encode(Duration::from_millis(250));
/// assert_eq!(v.as_str(), "250000u");
/// assert_eq!(v.as_bytes(), b"250000u");
/// assert_eq!(v.to_string(), "250000u");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Encoded {
    // u64::MAX has 20 digits; grpc-timeout has at most 8 and a unit.
    buf: [u8; 20],
    len: u8,
}

impl Encoded {
    fn digits(mut n: u64, unit: Option<u8>) -> Encoded {
        let mut buf = [0u8; 20];
        let mut tmp = [0u8; 20];
        let mut i = tmp.len();
        loop {
            i -= 1;
            tmp[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let len = tmp.len() - i;
        buf[..len].copy_from_slice(&tmp[i..]);
        let mut len = len;
        if let Some(u) = unit {
            // grpc-timeout: at most 8 digits, so there is room.
            buf[len] = u;
            len += 1;
        }
        Encoded {
            buf,
            len: len as u8,
        }
    }

    /// The value as bytes (for `http::HeaderValue::from_bytes`).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::deadline::wire::Format;
    /// assert_eq!(Format::Millis.encode(Duration::from_secs(3)).as_bytes(), b"3000");
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// The value as text.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use watertight::deadline::wire::Format;
    /// assert_eq!(Format::GrpcTimeout.encode(Duration::from_secs(200)).as_str(), "200000m");
    /// ```
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and a unit letter are ever written.
        core::str::from_utf8(self.as_bytes()).unwrap_or("")
    }
}

impl fmt::Display for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Encoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Why a budget header's value was refused; see the table of
/// [absurd values](self#absurd-values).
///
/// # Examples
///
/// ```
/// use watertight::deadline::wire::{Format, ParseError};
///
/// let e = Format::GrpcTimeout.parse(b"123456789m").unwrap_err();
/// assert_eq!(e, ParseError::TooManyDigits);
/// assert_eq!(e.to_string(), "budget header has more than 8 digits");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseError {
    /// The value is empty.
    Empty,
    /// The value starts with a minus sign: a budget cannot be negative.
    Negative,
    /// Something other than an ASCII digit where digits belong (a sign,
    /// a decimal point, white space).
    InvalidDigit,
    /// A unit with no digits before it.
    MissingDigits,
    /// `grpc-timeout` with more than its 8 digits.
    TooManyDigits,
    /// `grpc-timeout` without a unit.
    MissingUnit,
    /// `grpc-timeout` with a unit other than `H`, `M`, `S`, `m`, `u`, `n`.
    UnknownUnit(u8),
    /// Milliseconds past `u64::MAX`.
    Overflow,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => f.write_str("budget header is empty"),
            ParseError::Negative => f.write_str("budget header is negative"),
            ParseError::InvalidDigit => {
                f.write_str("budget header has a character that is not a digit")
            }
            ParseError::MissingDigits => f.write_str("budget header has no digits"),
            ParseError::TooManyDigits => f.write_str("budget header has more than 8 digits"),
            ParseError::MissingUnit => f.write_str("budget header has no unit"),
            ParseError::UnknownUnit(u) => {
                write!(f, "budget header has an unknown unit {:?}", char::from(*u))
            }
            ParseError::Overflow => f.write_str("budget header is too large"),
        }
    }
}

impl core::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    const G: Format = Format::GrpcTimeout;
    const M: Format = Format::Millis;

    #[test]
    fn each_grpc_unit_reads_as_its_length() {
        assert_eq!(G.parse(b"3H"), Ok(Duration::from_secs(3 * 3600)));
        assert_eq!(G.parse(b"3M"), Ok(Duration::from_secs(180)));
        assert_eq!(G.parse(b"3S"), Ok(Duration::from_secs(3)));
        assert_eq!(G.parse(b"3m"), Ok(Duration::from_millis(3)));
        assert_eq!(G.parse(b"3u"), Ok(Duration::from_micros(3)));
        assert_eq!(G.parse(b"3n"), Ok(Duration::from_nanos(3)));
        assert_eq!(G.parse(b"00000007m"), Ok(Duration::from_millis(7)));
        assert_eq!(
            G.parse(b"99999999H"),
            Ok(Duration::from_secs(99_999_999 * 3600))
        );
    }

    #[test]
    fn absurd_grpc_values_are_typed_errors() {
        assert_eq!(G.parse(b""), Err(ParseError::Empty));
        assert_eq!(G.parse(b"-5m"), Err(ParseError::Negative));
        assert_eq!(G.parse(b"-m"), Err(ParseError::Negative));
        assert_eq!(G.parse(b"-"), Err(ParseError::MissingDigits));
        assert_eq!(G.parse(b"m"), Err(ParseError::MissingDigits));
        assert_eq!(G.parse(b"250"), Err(ParseError::MissingUnit));
        assert_eq!(G.parse(b"250x"), Err(ParseError::UnknownUnit(b'x')));
        assert_eq!(G.parse(b"250 "), Err(ParseError::UnknownUnit(b' ')));
        assert_eq!(G.parse(b"1.5S"), Err(ParseError::InvalidDigit));
        assert_eq!(G.parse(b" 5m"), Err(ParseError::InvalidDigit));
        assert_eq!(G.parse(b"+5m"), Err(ParseError::InvalidDigit));
        assert_eq!(G.parse(b"123456789m"), Err(ParseError::TooManyDigits));
        assert_eq!(G.parse(b"1.34567890S"), Err(ParseError::InvalidDigit));
        assert_eq!(G.parse(b"0n"), Ok(Duration::ZERO));
    }

    #[test]
    fn absurd_millis_values_are_typed_errors() {
        assert_eq!(M.parse(b""), Err(ParseError::Empty));
        assert_eq!(M.parse(b"-1"), Err(ParseError::Negative));
        assert_eq!(M.parse(b"1.5"), Err(ParseError::InvalidDigit));
        assert_eq!(M.parse(b"250ms"), Err(ParseError::InvalidDigit));
        assert_eq!(M.parse(b"0"), Ok(Duration::ZERO));
        assert_eq!(
            M.parse(b"18446744073709551615"),
            Ok(Duration::from_millis(u64::MAX))
        );
        assert_eq!(M.parse(b"18446744073709551616"), Err(ParseError::Overflow));
        assert_eq!(
            M.parse(b"000000000000000000000000042"),
            Ok(Duration::from_millis(42))
        );
    }

    #[test]
    fn grpc_encoding_picks_the_finest_unit_that_fits_and_rounds_down() {
        let e = |d: Duration| G.encode(d);
        assert_eq!(e(Duration::ZERO).as_str(), "0n");
        assert_eq!(e(Duration::from_nanos(1)).as_str(), "1n");
        assert_eq!(e(Duration::from_nanos(99_999_999)).as_str(), "99999999n");
        assert_eq!(e(Duration::from_nanos(100_000_001)).as_str(), "100000u");
        assert_eq!(e(Duration::from_nanos(100_000_999)).as_str(), "100000u");
        assert_eq!(e(Duration::from_secs(100)).as_str(), "100000m");
        assert_eq!(e(Duration::from_secs(100_000)).as_str(), "100000S");
        assert_eq!(e(Duration::from_secs(100_000_000)).as_str(), "1666666M");
        assert_eq!(
            e(Duration::from_secs(99_999_999 * 60 + 59)).as_str(),
            "99999999M"
        );
        assert_eq!(e(Duration::from_secs(6_000_000_000)).as_str(), "1666666H");
        assert_eq!(e(Duration::MAX).as_str(), "99999999H");
    }

    #[test]
    fn millis_encoding_rounds_down_and_clamps() {
        assert_eq!(M.encode(Duration::from_nanos(999_999)).as_str(), "0");
        assert_eq!(M.encode(Duration::from_millis(300)).as_str(), "300");
        assert_eq!(M.encode(Duration::MAX).as_str(), "18446744073709551615");
    }
}
