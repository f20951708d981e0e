use super::era::LeaseEra;
use super::model;
use loom::sync::Arc;
use loom::thread;

#[test]
fn an_expired_lease_ends_once_and_its_permits_are_lost() {
    model(|| {
        let lease = Arc::new(LeaseEra::new());
        lease.renew(10);
        let a = {
            let lease = lease.clone();
            thread::spawn(move || lease.enter(5))
        };
        let enders: Vec<_> = (0..2)
            .map(|_| {
                let lease = lease.clone();
                thread::spawn(move || lease.is_live(20))
            })
            .collect();
        let entered = a.join().unwrap();
        let ends: Vec<_> = enders
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter_map(Result::err)
            .collect();
        assert_eq!(ends.len(), 1, "exactly one caller ends the lease");
        assert_eq!(lease.until(), None);
        assert_eq!(lease.era(), 1);
        assert_eq!(lease.held(), 0, "the next era starts empty");
        match entered {
            Ok((era, held)) => {
                assert_eq!((era, held), (0, 1));
                assert_eq!(ends[0], 1, "the ended era counted the permit");
                assert_ne!(lease.era(), era, "its permit is lost");
                lease.leave(era);
                assert_eq!(lease.held(), 0);
            }
            Err(_) => assert_eq!(ends[0], 0, "nothing entered the ended era"),
        }
    });
}

#[test]
fn a_permit_of_an_ended_era_never_touches_the_next() {
    model(|| {
        let lease = Arc::new(LeaseEra::new());
        lease.renew(10);
        // A permit taken at 5: under the first lease, or under the
        // second if it is renewed by then (5 is before its end too).
        let old = {
            let lease = lease.clone();
            thread::spawn(move || {
                let entered = lease.enter(5).ok().map(|(era, _)| era);
                if let Some(era) = entered {
                    lease.leave(era);
                }
                entered
            })
        };
        let renewed = {
            let lease = lease.clone();
            thread::spawn(move || {
                lease.end();
                lease.renew(30);
                lease.enter(25)
            })
        };
        let old_era = old.join().unwrap();
        let (era, held) = renewed.join().unwrap().expect("the new lease is live");
        assert_eq!(era, 1);
        assert!(
            held == 1 || (held == 2 && old_era == Some(1)),
            "the new era counts its own permits only: {held}, the other in {old_era:?}"
        );
        assert_eq!(lease.held(), 1, "only the new era's permit is held");
        lease.leave(era);
        assert_eq!((lease.era(), lease.held()), (1, 0));
    });
}
