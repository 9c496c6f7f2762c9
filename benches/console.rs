//! Benchmarks for the console area (filled in by that area).
fn main() {}
