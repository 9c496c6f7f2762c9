//! The Conductor protocol (PROTOCOL 2): handoffs, routing by definition, rules or directly, gates,
//! inboxes, acks, approvals, workflow state, abort and cleanup.

pub mod definition;
pub mod model;
