//! The journal entries of the supervisor's deliveries and of a requeue, and the intent keys that
//! make each exactly once.

use super::{DeliveryAct, RequeueResult};

/// The journal entry of a requeue.
pub(super) fn requeue_act(r: &RequeueResult) -> crate::journal::Act {
    crate::journal::Act::new("requeue", r.status.clone())
        .target("workflow_id", Some(&r.workflow_id))
        .target("handoff_id", Some(&r.handoff_id))
        .target("to_god", Some(&r.to_god))
}

pub(super) fn delivery_intent_key(a: &DeliveryAct, dead: bool) -> String {
    format!(
        "{}-{}-{}",
        if dead { "dead" } else { "redeliver" },
        a.handoff_id,
        a.delivery
    )
}

pub(super) fn delivery_act(a: &DeliveryAct, dead: bool) -> crate::journal::Act {
    let n = a.delivery.to_string();
    crate::journal::Act::new(
        if dead { "dead_letter" } else { "redeliver" },
        if dead { "dead_lettered" } else { "redelivered" },
    )
    .target("workflow_id", Some(&a.workflow_id))
    .target("handoff_id", Some(&a.handoff_id))
    .target("from_god", Some(&a.from_god))
    .target("to_god", Some(&a.to_god))
    .target("delivery", Some(&n))
}
