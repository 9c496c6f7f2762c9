//! Benchmarks for the bus area (filled in by that area).
fn main() {}
