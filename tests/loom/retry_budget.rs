use super::*;
use watertight::retry::{RetryBudget, RetryConfig};

#[test]
fn concurrent_failures_share_the_budget() {
    model(|| {
        // 4 tokens, 50 %: retries only while more than 2 are left.
        let config = RetryConfig::builder().budget(4, 50.0).build().unwrap();
        let budget = Arc::new(RetryBudget::new(&config));
        let allowed = Arc::new(AtomicUsize::new(0));
        let t = {
            let (budget, allowed) = (budget.clone(), allowed.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    if budget.failed_may_retry() {
                        allowed.fetch_add(1, SeqCst);
                    }
                }
            })
        };
        budget.succeeded();
        if budget.failed_may_retry() {
            allowed.fetch_add(1, SeqCst);
        }
        t.join().unwrap();
        // Three failures and one success: 4 − 3 + 0.5 = 1.5 tokens in
        // every interleaving; the success (capped at 4 when it came
        // first) allowed one or two retries, never three.
        let n = allowed.load(SeqCst);
        assert!((1..=2).contains(&n), "{n} retries");
        assert!(
            budget.tokens() == 1.0 || budget.tokens() == 1.5,
            "{}",
            budget.tokens()
        );
    });
}
