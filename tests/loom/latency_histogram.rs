use super::*;
use watertight::hedge::{LatencyHistogram, Percentile};

/// `per_thread` records of `ns` nanoseconds on each of two threads.
fn two_recorders(window: u32, per_thread: [&'static [u64]; 2]) -> Arc<LatencyHistogram> {
    let h = Arc::new(LatencyHistogram::new(window));
    let t = {
        let h = h.clone();
        thread::spawn(move || {
            for ns in per_thread[1] {
                h.record(Duration::from_nanos(*ns));
            }
        })
    };
    for ns in per_thread[0] {
        h.record(Duration::from_nanos(*ns));
    }
    t.join().unwrap();
    h
}

#[test]
fn a_record_two_windows_late_is_not_counted() {
    model(|| {
        // Window 1, three records of one bucket: windows 0, 1, 2; 0 and
        // 2 share the slot. Read after: windows 2 and 3, one sample.
        let h = two_recorders(1, [&[5], &[5, 5]]);
        assert_eq!(h.recorded(), 3);
        assert_eq!(h.len(), 1);
        assert_eq!(h.percentile(Percentile::P50), Some(Duration::from_nanos(5)));
    });
}

#[test]
fn every_sample_of_the_two_windows_is_counted_once() {
    model(|| {
        // Window 2: windows 0, 0, 1; all three read.
        let h = two_recorders(2, [&[3], &[3, 9]]);
        assert_eq!(h.len(), 3);
        assert_eq!(
            h.percentile(Percentile::new(100.0).unwrap()),
            Some(Duration::from_nanos(9))
        );
        assert_eq!(h.percentile(Percentile::P50), Some(Duration::from_nanos(3)));
    });
}

#[test]
fn a_read_racing_with_records_invents_nothing() {
    model(|| {
        let h = Arc::new(LatencyHistogram::new(1));
        let t = {
            let h = h.clone();
            thread::spawn(move || {
                h.record(Duration::from_nanos(2));
                h.record(Duration::from_nanos(2));
            })
        };
        h.record(Duration::from_nanos(7));
        let len = h.len();
        assert!(len <= 2, "{len} samples read, two windows of 1");
        let p = h.percentile(Percentile::new(100.0).unwrap());
        let recorded = [
            None,
            Some(Duration::from_nanos(2)),
            Some(Duration::from_nanos(7)),
        ];
        assert!(recorded.contains(&p), "{p:?}");
        t.join().unwrap();
    });
}
