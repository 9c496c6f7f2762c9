//! The per-track message bus and the board deliberation (PROTOCOL 3 and 4).

pub mod model;
