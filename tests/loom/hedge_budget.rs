use super::*;
use watertight::hedge::{HedgeBudget, HedgeConfig};

#[test]
fn racing_hedges_share_the_last_token() {
    model(|| {
        let config = HedgeConfig::builder().budget(1, 50.0).build().unwrap();
        let budget = Arc::new(HedgeBudget::new(&config));
        let sent = Arc::new(AtomicUsize::new(0));
        let t = {
            let (budget, sent) = (budget.clone(), sent.clone());
            thread::spawn(move || {
                if budget.try_spend() {
                    sent.fetch_add(1, SeqCst);
                }
            })
        };
        if budget.try_spend() {
            sent.fetch_add(1, SeqCst);
        }
        t.join().unwrap();
        assert_eq!(sent.load(SeqCst), 1);
        assert_eq!(budget.tokens(), 0.0);
    });
}

#[test]
fn refunds_and_refills_are_not_lost() {
    model(|| {
        // 2 tokens, 50 %: one spent and refunded (not sent after all)
        // while another call spends one and succeeds.
        let config = HedgeConfig::builder().budget(2, 50.0).build().unwrap();
        let budget = Arc::new(HedgeBudget::new(&config));
        let t = {
            let budget = budget.clone();
            thread::spawn(move || {
                assert!(budget.try_spend());
                budget.refund();
            })
        };
        assert!(budget.try_spend());
        budget.succeeded();
        t.join().unwrap();
        assert_eq!(budget.tokens(), 1.5);
    });
}
