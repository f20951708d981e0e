//! `PartitionShares`: the lists, both forms, each fault named.

use super::*;

fn shares<const K: usize>(fields: Vec<(&'static str, V)>) -> Result<PartitionShares<K>, String> {
    from(fields)
}

fn seq(items: &[u64]) -> V {
    V::Seq(items.iter().map(|&n| V::U(n)).collect())
}

fn env_shares<const K: usize>(vars: &[(&str, &str)]) -> Result<PartitionShares<K>, String> {
    envy::prefixed("SEARCH_PARTITION_")
        .from_iter(env(vars))
        .map_err(|e| e.to_string())
}

const CLASSES: [&str; 3] = ["checkout", "browse", "export"];

/// The bulkhead the shares build, as `[share; 3]` and its capacity.
fn built(s: PartitionShares<3>) -> ([usize; 3], usize) {
    let b = PartitionedBulkhead::from_shares("search", CLASSES, s, StdClock).unwrap();
    ([b.share(0), b.share(1), b.share(2)], b.capacity())
}

#[test]
fn partition_shares_from_typed_values() {
    let s = shares::<3>(vec![("shares", seq(&[5, 3, 2]))]).unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]));
    assert_eq!(built(s), ([5, 3, 2], 10));
    let s = shares::<3>(vec![
        ("capacity", V::U(10)),
        ("percent", seq(&[50, 30, 20])),
        ("max_waiters", V::U(32)),
    ])
    .unwrap();
    assert_eq!(
        s,
        PartitionShares::percent(10, [50, 30, 20]).with_max_waiters(32)
    );
    assert_eq!(built(s), ([5, 3, 2], 10));
    let b = PartitionedBulkhead::from_shares("search", CLASSES, s, StdClock).unwrap();
    assert_eq!(b.room(2).unwrap().max_waiters(), Some(32));
    // Entries as strings and whole floats, a list as one string, an
    // explicit null for the bound.
    let s = shares::<3>(vec![
        ("shares", V::Seq(vec![V::S("5"), V::F(3.0), V::U(2)])),
        ("max_waiters", V::Null),
    ])
    .unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]));
    let s = shares::<3>(vec![("shares", V::S(" 5, 3 ,2 "))]).unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]));
    // One class: a lone number is a list of one.
    assert_eq!(
        shares::<1>(vec![("shares", V::U(4))]),
        Ok(PartitionShares::slots([4]))
    );
    // 7 slots at 50/30/20: rounded as from_percent rounds them.
    let s = shares::<3>(vec![("capacity", V::S("7")), ("percent", V::S("50,30,20"))]).unwrap();
    assert_eq!(built(s), ([4, 2, 1], 7));
}

#[test]
fn partition_shares_from_the_environment() {
    let s = env_shares::<3>(&[
        ("SEARCH_PARTITION_SHARES", "5,3,2"),
        ("SEARCH_PARTITION_MAX_WAITERS", "16"),
        ("OTHER", "x"),
    ])
    .unwrap();
    assert_eq!(s, PartitionShares::slots([5, 3, 2]).with_max_waiters(16));
    let s = env_shares::<3>(&[
        ("SEARCH_PARTITION_CAPACITY", "20"),
        ("SEARCH_PARTITION_PERCENT", "50,30,20"),
    ])
    .unwrap();
    assert_eq!(built(s), ([10, 6, 4], 20));
    assert_names(
        env_shares::<3>(&[("SEARCH_PARTITION_SHARES", "5,3")]),
        "shares",
        "2 entries, expected 3 (one per class)",
    );
    assert_names(
        env_shares::<3>(&[
            ("SEARCH_PARTITION_CAPACITY", "10"),
            ("SEARCH_PARTITION_PERCENT", "50,30,30"),
        ]),
        "percent",
        "add up to 110, not 100",
    );
    assert_names(
        env_shares::<3>(&[("SEARCH_PARTITION_SHARES", "5,x,2")]),
        "shares",
        "\"x\" is not a number",
    );
    assert_names(
        env_shares::<3>(&[
            ("SEARCH_PARTITION_SHARES", "5,3,2"),
            ("SEARCH_PARTITION_PERCENT", "50,30,20"),
        ]),
        "shares",
        "not both",
    );
}

#[test]
fn a_list_of_the_wrong_length_names_the_key_and_the_count() {
    for (v, n) in [
        (seq(&[5, 3]), "2 entries"),
        (seq(&[5, 3, 2, 1]), "4 entries"),
        (
            V::Seq(vec![V::U(5), V::U(3), V::U(2), V::Map(vec![])]),
            "4 entries",
        ),
        (V::Seq(vec![]), "0 entries"),
        (V::S(""), "0 entries"),
        (V::S("5,3,2,"), "4 entries"),
        (V::U(10), "1 entry"),
    ] {
        assert_names(
            shares::<3>(vec![("shares", v.clone())]),
            "shares",
            &format!("{n}, expected 3 (one per class)"),
        );
    }
    assert_names(
        shares::<2>(vec![
            ("capacity", V::U(10)),
            ("percent", seq(&[50, 30, 20])),
        ]),
        "percent",
        "3 entries, expected 2 (one per class)",
    );
}

#[test]
fn bad_partition_shares_are_refused_naming_the_key() {
    assert_names(
        shares::<3>(vec![("shares", seq(&[5, 0, 2]))]),
        "shares",
        "class 1 has a share of 0 slots",
    );
    let max = watertight::Bulkhead::<()>::MAX_PERMITS as u64;
    assert_names(
        shares::<3>(vec![("shares", seq(&[5, max + 1, 2]))]),
        "shares",
        &format!(
            "class 1 asks for {} slots, above the maximum of {max}",
            max + 1
        ),
    );
    assert_names(
        shares::<2>(vec![
            ("capacity", V::U(max + 1)),
            ("percent", seq(&[50, 50])),
        ]),
        "capacity",
        "above the maximum",
    );
    assert_names(
        shares::<3>(vec![
            ("capacity", V::U(10)),
            ("percent", seq(&[50, 30, 10])),
        ]),
        "percent",
        "add up to 90, not 100",
    );
    assert_names(
        shares::<3>(vec![("capacity", V::U(2)), ("percent", seq(&[50, 30, 20]))]),
        "percent",
        "class 2's 20 % of `capacity` rounds to 0 slots",
    );
    assert_names(
        shares::<2>(vec![("capacity", V::U(10)), ("percent", seq(&[100, 0]))]),
        "percent",
        "class 1's 0 % of `capacity` rounds to 0 slots",
    );
    assert_names(
        shares::<2>(vec![("capacity", V::U(10)), ("percent", seq(&[300, 0]))]),
        "percent",
        "300 is too large",
    );
    let waiters = watertight::Bulkhead::<()>::MAX_WAITERS as u64;
    assert_names(
        shares::<2>(vec![
            ("shares", seq(&[1, 1])),
            ("max_waiters", V::U(waiters + 1)),
        ]),
        "max_waiters",
        "above the maximum",
    );
    assert!(shares::<2>(vec![
        ("shares", seq(&[1, 1])),
        ("max_waiters", V::U(waiters))
    ])
    .is_ok());
    assert_names(
        shares::<2>(vec![("shares", V::Seq(vec![V::U(1), V::I(-1)]))]),
        "shares",
        "negative",
    );
    assert_names(
        shares::<2>(vec![("shares", V::Seq(vec![V::U(1), V::F(1.5)]))]),
        "shares",
        "whole number",
    );
    assert_names(
        shares::<2>(vec![("shares", V::Seq(vec![V::U(1), V::Null]))]),
        "shares",
        "an entry is null",
    );
    assert_names(
        shares::<2>(vec![("shares", V::B(true))]),
        "shares",
        "a list of 2",
    );
}

#[test]
fn partition_shares_are_given_one_way_exactly() {
    let both = "set `shares` (slots per class) or `capacity` and `percent`, not both";
    for extra in [("capacity", V::U(10)), ("percent", seq(&[50, 50]))] {
        let err = shares::<2>(vec![("shares", seq(&[5, 5])), extra]).unwrap_err();
        assert!(err.contains(both), "{err}");
    }
    assert_names(
        shares::<2>(vec![("capacity", V::U(10))]),
        "percent",
        "missing field",
    );
    assert_names(
        shares::<2>(vec![("percent", seq(&[50, 50]))]),
        "capacity",
        "missing field",
    );
    assert_names(shares::<2>(vec![]), "shares", "missing field");
    // Null is the key not given.
    assert_names(
        shares::<2>(vec![("shares", V::Null)]),
        "shares",
        "missing field",
    );
    // Unknown keys (a typo) are refused.
    assert_names(
        shares::<2>(vec![("share", seq(&[5, 5]))]),
        "share",
        "unknown field",
    );
    // No classes.
    let err = shares::<0>(vec![("shares", V::Seq(vec![]))]).unwrap_err();
    assert!(err.contains("at least one class"), "{err}");
}
