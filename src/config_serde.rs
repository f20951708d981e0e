//! `Deserialize` for the configs (feature `serde`).
