#![cfg(not(loom))]
//! The budget header codec (`deadline::wire`), by property: what the sender
//! writes is read back as at most what it had (never more), and within one
//! unit of 8 significant digits of it; what a valid header says survives a
//! second trip unchanged; and no input makes the parser panic or return a
//! value the format cannot say.

#[path = "support/proptest_config.rs"]
mod proptest_config;

use std::time::Duration;

use proptest::prelude::*;
use watertight::deadline::wire::{Format, ParseError, GRPC_MAX_VALUE};

/// Durations across every unit's range: nanoseconds up to thousands of
/// years, and the edges.
fn budgets() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0u64..200_000_000).prop_map(Duration::from_nanos),
        (0u64..u64::MAX).prop_map(Duration::from_nanos),
        (0u64..400_000_000_000_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        any::<(u64, u32)>().prop_map(|(s, n)| Duration::new(s, n % 1_000_000_000)),
        Just(Duration::ZERO),
        Just(Duration::MAX),
    ]
}

/// The longest budget `grpc-timeout` can say.
const GRPC_MAX: Duration = Duration::from_secs(GRPC_MAX_VALUE * 3600);

proptest! {
    #![proptest_config(proptest_config::cases(2000, 50))]

    #[test]
    fn grpc_timeout_round_trip_never_extends_and_loses_under_a_unit(d in budgets()) {
        let sent = Format::GrpcTimeout.encode(d);
        prop_assert!(sent.as_bytes().len() <= 9, "{sent:?}");
        let read = Format::GrpcTimeout.parse(sent.as_bytes()).unwrap();
        prop_assert!(read <= d, "{d:?} sent as {sent:?}, read as {read:?}");
        if d < Duration::from_millis(100) {
            prop_assert_eq!(read, d); // in nanoseconds: exact
        } else if d <= GRPC_MAX {
            // At most one unit lost, and a unit is at most 1/100_000 of the
            // value (8 digits, units 1000 or 60 apart).
            let lost = d - read;
            prop_assert!(lost.as_nanos() * 100_000 <= d.as_nanos(), "{d:?} -> {read:?}");
        } else {
            prop_assert_eq!(read, GRPC_MAX);
        }
    }

    #[test]
    fn millis_round_trip_never_extends_and_loses_under_a_millisecond(d in budgets()) {
        let sent = Format::Millis.encode(d);
        let read = Format::Millis.parse(sent.as_bytes()).unwrap();
        prop_assert!(read <= d, "{d:?} sent as {sent:?}, read as {read:?}");
        let max = Duration::from_millis(u64::MAX);
        if d <= max {
            prop_assert!(d - read < Duration::from_millis(1), "{d:?} -> {read:?}");
        } else {
            prop_assert_eq!(read, max);
        }
    }

    #[test]
    fn a_valid_grpc_timeout_survives_a_second_trip(n in 0..=GRPC_MAX_VALUE, unit in prop::sample::select(b"HMSmun".to_vec())) {
        let header = format!("{n}{}", char::from(unit));
        let read = Format::GrpcTimeout.parse(header.as_bytes()).unwrap();
        let again = Format::GrpcTimeout.encode(read);
        prop_assert_eq!(Format::GrpcTimeout.parse(again.as_bytes()), Ok(read), "{} -> {:?}", header, again);
    }

    #[test]
    fn any_bytes_parse_to_a_sayable_value_or_a_typed_error(bytes in prop::collection::vec(any::<u8>(), 0..24)) {
        for format in [Format::GrpcTimeout, Format::Millis] {
            match format.parse(&bytes) {
                Ok(d) => {
                    // Only digits (and a unit) were accepted, and the value
                    // is re-sent as itself.
                    prop_assert!(bytes.iter().filter(|b| !b.is_ascii_digit()).count() <= 1);
                    prop_assert_eq!(format.parse(format.encode(d).as_bytes()), Ok(d));
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}

#[test]
fn a_minus_sign_is_negative_in_both_formats() {
    assert_eq!(
        Format::GrpcTimeout.parse(b"-100m"),
        Err(ParseError::Negative)
    );
    assert_eq!(Format::Millis.parse(b"-100"), Err(ParseError::Negative));
}
