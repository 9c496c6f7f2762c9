//! Benchmarks for the conductor area (filled in by that area).
fn main() {}
