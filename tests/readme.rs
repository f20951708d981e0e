//! The front page and the guide stay in step: the guide's one feature table
//! lists every feature of `Cargo.toml`, no other page repeats it, and the
//! README's links into the guide name pages that exist. (README's own Rust
//! examples are compiled as doc tests: `ReadmeDoctests` in `src/lib.rs`.)

const CARGO_TOML: &str = include_str!("../Cargo.toml");
const README: &str = include_str!("../README.md");
const LIB: &str = include_str!("../src/lib.rs");
const FEATURES: &str = include_str!("../src/guide/features.rs");
const GUIDE_INDEX: &str = include_str!("../src/guide/mod.rs");

/// The names in `Cargo.toml`'s `[features]`, `default` aside.
fn features() -> Vec<&'static str> {
    CARGO_TOML
        .lines()
        .skip_while(|l| l.trim() != "[features]")
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.starts_with('#') && l.contains('='))
        .map(|l| l.split('=').next().unwrap().trim())
        .filter(|name| *name != "default")
        .collect()
}

#[test]
fn the_feature_table_lists_every_feature() {
    let features = features();
    assert!(features.len() >= 12, "read {features:?} from Cargo.toml");
    for f in &features {
        let row = format!("//! | `{f}` |");
        assert_eq!(
            FEATURES.lines().filter(|l| l.starts_with(&row)).count(),
            1,
            "src/guide/features.rs has no row (or more than one) for feature `{f}`"
        );
    }
    let rows = FEATURES
        .lines()
        .filter(|l| l.starts_with("//! | `"))
        .count();
    assert!(rows >= features.len());
}

#[test]
fn no_other_page_repeats_the_feature_table() {
    for (page, text) in [("README.md", README), ("src/lib.rs", LIB)] {
        assert!(
            !text.lines().any(|l| l.contains("| feature |")),
            "{page} has a feature table of its own: link to guide::features instead"
        );
        assert!(
            text.contains("features"),
            "{page} links to the feature table"
        );
    }
    assert!(README.contains("https://docs.rs/watertight/latest/watertight/guide/features/"));
    assert!(LIB.contains("[`guide::features`]"));
}

#[test]
fn the_readme_links_name_guide_pages_that_exist() {
    let prefix = "https://docs.rs/watertight/latest/watertight/guide/";
    let mut linked = 0;
    for (i, _) in README.match_indices(prefix) {
        let rest = &README[i + prefix.len()..];
        let page = rest.split(['/', ')', ' ', '\n']).next().unwrap();
        if page.starts_with("index.html") {
            continue;
        }
        linked += 1;
        assert!(
            GUIDE_INDEX.contains(&format!("pub mod {page};")),
            "README links to guide page `{page}`, which src/guide/mod.rs does not declare"
        );
    }
    assert!(linked >= 10, "README links to {linked} guide pages");
}

#[test]
fn the_readme_is_a_front_door() {
    let lines = README.lines().count();
    assert!(
        lines <= 300,
        "README.md is {lines} lines: move the detail into src/guide/"
    );
    assert!(
        !README.contains("criterion median"),
        "a bench table in README.md: it belongs in guide::benchmarks"
    );
}
