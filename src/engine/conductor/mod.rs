//! The Conductor protocol (PROTOCOL 2).
