use super::*;
use watertight::hedge::{Hedge, HedgeConfig, HedgeDelay, Percentile};

#[test]
fn a_kept_delay_lasts_one_period() {
    model(|| {
        // Window 16: a period of one record; the largest sample.
        let top = Percentile::new(100.0).unwrap();
        let config = HedgeConfig::builder()
            .delay(HedgeDelay::Percentile(top))
            .min_samples(1)
            .window(16)
            .build()
            .unwrap();
        let hedge = Arc::new(Hedge::new("loom", config));
        let seen = [Duration::from_nanos(5), Duration::from_nanos(9)];
        let t = {
            let hedge = hedge.clone();
            thread::spawn(move || {
                hedge.histogram().record(Duration::from_nanos(5));
                hedge.delay()
            })
        };
        hedge.histogram().record(Duration::from_nanos(9));
        let mine = hedge.delay();
        let theirs = t.join().unwrap();
        for d in [mine, theirs] {
            assert!(d.is_some_and(|d| seen.contains(&d)), "{d:?}");
        }
        hedge.histogram().record(Duration::from_nanos(3));
        assert_eq!(hedge.delay(), hedge.histogram().percentile(top));
        assert_eq!(hedge.delay(), Some(Duration::from_nanos(9)));
    });
}
