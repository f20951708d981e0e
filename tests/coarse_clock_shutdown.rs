#![cfg(all(feature = "std", not(loom)))]
//! The coarse clock's updater leaves no thread once its last handle is
//! dropped. Its own test binary: nothing else in the process holds a handle.

use std::time::Duration;

use watertight::clock::{Clock, CoarseClock, CoarseClockError};

/// Threads of this process named like the updater (Linux: their `comm`).
#[cfg(target_os = "linux")]
fn updater_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            std::fs::read_to_string(comm).is_ok_and(|name| name.trim() == "wt-coarse-clock")
        })
        .count()
}

#[cfg(not(target_os = "linux"))]
fn updater_threads() -> usize {
    usize::from(CoarseClock::updater_running())
}

/// The updater threads left after a drop that joined the updater. The join
/// returns once the thread has exited, and Linux removes its task from
/// `/proc/self/task` a moment later: a thread still listed is looked for
/// again, for up to 5 s (a thread that was not stopped stays listed).
fn updater_threads_after_join() -> usize {
    let give_up = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = updater_threads();
        if n == 0 || std::time::Instant::now() >= give_up {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn shutdown_leaves_no_thread() {
    assert_eq!(updater_threads(), 0);
    for round in 0..3 {
        let a = CoarseClock::new();
        let b = a.clone();
        let c = CoarseClock::new();
        assert_eq!(updater_threads(), 1, "one updater shared, round {round}");
        assert!(CoarseClock::updater_running());
        let t = a.now();
        drop(a);
        drop(c);
        assert_eq!(updater_threads(), 1, "a handle is left");
        assert!(b.now() >= t);
        drop(b);
        assert_eq!(
            updater_threads_after_join(),
            0,
            "the last drop joins it, round {round}"
        );
        assert!(!CoarseClock::updater_running());
    }

    // The resolution is fixed while handles live, free again after.
    let ms5 = Duration::from_millis(5);
    let a = CoarseClock::with_resolution(ms5).unwrap();
    assert_eq!(
        CoarseClock::with_resolution(Duration::from_millis(1)).unwrap_err(),
        CoarseClockError::OtherResolution(ms5)
    );
    assert_eq!(CoarseClock::new().resolution(), ms5);
    assert_eq!(updater_threads(), 1);
    drop(a);
    assert_eq!(updater_threads_after_join(), 0);
    let b = CoarseClock::with_resolution(Duration::from_millis(2)).unwrap();
    assert_eq!(b.resolution(), Duration::from_millis(2));
    drop(b);
    assert_eq!(updater_threads_after_join(), 0);

    // Bad input is an error, not a panic, and starts nothing.
    for bad in [Duration::ZERO, Duration::from_secs(2), Duration::MAX] {
        assert_eq!(
            CoarseClock::with_resolution(bad).unwrap_err(),
            CoarseClockError::BadResolution(bad)
        );
    }
    assert_eq!(updater_threads(), 0);
}
