//! The budget header parser (`deadline::wire`) on hostile bytes, in both
//! formats: a typed error, or a value that is re-sent as itself; never a
//! panic. And the encoder on any duration the first 12 bytes make: what is
//! written parses back as at most that duration.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use watertight::deadline::wire::Format;

fuzz_target!(|data: &[u8]| {
    for format in [Format::GrpcTimeout, Format::Millis] {
        match format.parse(data) {
            Ok(d) => {
                let again = format.encode(d);
                assert_eq!(
                    format.parse(again.as_bytes()),
                    Ok(d),
                    "{data:?} -> {again:?}"
                );
            }
            Err(e) => drop(e.to_string()),
        }
    }
    if let (Some(secs), Some(nanos)) = (data.get(..8), data.get(8..12)) {
        let secs = u64::from_le_bytes(secs.try_into().unwrap());
        let nanos = u32::from_le_bytes(nanos.try_into().unwrap()) % 1_000_000_000;
        let d = Duration::new(secs, nanos);
        for format in [Format::GrpcTimeout, Format::Millis] {
            let sent = format.encode(d);
            let read = format.parse(sent.as_bytes()).unwrap();
            assert!(read <= d, "{d:?} sent as {sent:?}, read as {read:?}");
        }
    }
});
