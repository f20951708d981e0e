//! The model tests' proptest configuration, in one place: `cases` cases
//! (`miri` under Miri, which runs them far slower), or proptest's own
//! default and `PROPTEST_CASES` when that is set; under Miri no failure
//! file (its isolation has no file system).

use proptest::test_runner::Config as ProptestConfig;

pub fn cases(cases: u32, miri: u32) -> ProptestConfig {
    let mut config = if std::env::var_os("PROPTEST_CASES").is_some() {
        ProptestConfig::default()
    } else {
        ProptestConfig::with_cases(if cfg!(miri) { miri } else { cases })
    };
    if cfg!(miri) {
        config.failure_persistence = None;
    }
    config
}
