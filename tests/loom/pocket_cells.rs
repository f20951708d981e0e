use super::cells::Cells;
use super::model;
use loom::sync::Arc;
use loom::thread;

#[test]
fn racing_spends_and_a_refill_account_for_every_cell() {
    model(|| {
        let cells = Arc::new(Cells::new());
        cells.refill(0, 3); // the first grant: 3 cells
        let spenders: Vec<_> = [2, 1]
            .into_iter()
            .map(|n| {
                let cells = cells.clone();
                thread::spawn(move || if cells.take(n) { n } else { 0 })
            })
            .collect();
        // The next refresh: the 3 cells of the first grant are old
        // (none is young), 2 more granted.
        let refill = {
            let cells = cells.clone();
            thread::spawn(move || cells.refill(0, 2))
        };
        let spent: u64 = spenders.into_iter().map(|t| t.join().unwrap()).sum();
        let (before, wasted, after) = refill.join().unwrap();
        assert_eq!(after, before - wasted + 2);
        assert!(spent <= 3 + 2);
        assert_eq!(
            spent + wasted + cells.get(),
            3 + 2,
            "a cell lost or invented"
        );
    });
}
