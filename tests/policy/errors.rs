//! The policy's error: which layer refused, and the retry hint.

use super::*;

// ---- error API -------------------------------------------------------------

#[test]
fn error_api_for_each_kind() {
    let clock = ManualClock::new();
    let mut errors: Vec<(Error<Boom>, bool, Option<Duration>)> = Vec::new();

    // BulkheadFull.
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    let held = p.bulkhead().try_acquire().unwrap();
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    drop(held);
    // BulkheadClosed.
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    p.bulkhead().close();
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    // CircuitOpen(Open), retry_after the whole open wait.
    let p = policy("payments", &clock, 1, Duration::ZERO, SEC);
    trip(&p);
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, Some(10 * SEC)));
    // CircuitOpen(ForcedOpen).
    p.breaker().force_open();
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    // CircuitOpen(ProbesBusy).
    let p = policy("payments", &clock, 2, Duration::ZERO, SEC);
    half_open(&clock, &p);
    let probe = Task::pending(p.call(Probe::default().hang()));
    errors.push((now_or_never(p.call(ok)).unwrap_err(), true, None));
    drop(probe);
    // DeadlineExceeded.
    let spent = Deadline::after(&clock, Duration::ZERO);
    errors.push((
        now_or_never(p.call_within(&spent, ok)).unwrap_err(),
        true,
        None,
    ));
    // Call.
    errors.push((
        now_or_never(p.call(|| async { Err::<u32, _>(Boom) })).unwrap_err(),
        false,
        None,
    ));

    let kinds: Vec<_> = errors.iter().map(|(e, _, _)| e.kind().clone()).collect();
    assert!(matches!(kinds[0], ErrorKind::BulkheadFull));
    assert!(matches!(kinds[1], ErrorKind::BulkheadClosed));
    assert!(matches!(
        kinds[2],
        ErrorKind::CircuitOpen(Rejection::Open { .. })
    ));
    assert!(matches!(
        kinds[3],
        ErrorKind::CircuitOpen(Rejection::ForcedOpen)
    ));
    assert!(matches!(
        kinds[4],
        ErrorKind::CircuitOpen(Rejection::ProbesBusy)
    ));
    assert!(matches!(kinds[5], ErrorKind::DeadlineExceeded));
    assert!(matches!(kinds[6], ErrorKind::Call(Boom)));

    for (e, unavailable, retry_after) in errors {
        let kind = e.kind().clone();
        assert_eq!(e.is_unavailable(), unavailable, "{kind:?}");
        assert_eq!(e.retry_after(), retry_after, "{kind:?}");
        assert_eq!(e.system(), "payments", "{kind:?}");
        let shown = e.to_string();
        assert!(shown.contains("payments"), "{shown}");
        if unavailable {
            assert!(shown.contains("unavailable"), "{shown}");
        }
        let source = std::error::Error::source(&e).map(|s| s.to_string());
        match &kind {
            ErrorKind::Call(_) => assert_eq!(source.as_deref(), Some("boom")),
            ErrorKind::CircuitOpen(r) => assert_eq!(source, Some(r.to_string())),
            _ => assert_eq!(source, None, "{kind:?}"),
        }
        let inner = e.into_inner();
        assert_eq!(inner.is_some(), !unavailable, "{kind:?}");
    }
}

#[test]
fn error_display_per_kind() {
    let clock = ManualClock::new();
    let p = policy("inventory", &clock, 1, Duration::ZERO, SEC);
    let held = p.bulkhead().try_acquire().unwrap();
    assert_eq!(
        now_or_never(p.call(ok)).unwrap_err().to_string(),
        "inventory unavailable: bulkhead full"
    );
    drop(held);
    assert_eq!(
        now_or_never(p.call(|| async { Err::<u32, _>(Boom) }))
            .unwrap_err()
            .to_string(),
        "inventory: boom"
    );
    let spent = Deadline::after(&clock, Duration::ZERO);
    assert_eq!(
        now_or_never(p.call_within(&spent, ok))
            .unwrap_err()
            .to_string(),
        "inventory unavailable: deadline exceeded"
    );
}
