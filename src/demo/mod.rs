//! The simulated pantheon behind `pantheon demo`.
