//! The journal entries of the supervisor's deliveries and of a requeue, and the intent keys that
//! make each exactly once.

use super::{DeliveryAct, RequeueResult};
use crate::journal::{Target, Verb};

/// The journal entry of a requeue.
pub(super) fn requeue_act(r: &RequeueResult) -> crate::journal::Act {
    crate::journal::Act::new(Verb::Requeue, r.status.clone())
        .workflow(&r.workflow_id)
        .handoff(&r.handoff_id)
        .target(Target::ToGod, Some(&r.to_god))
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
        if dead {
            crate::journal::Verb::DeadLetter
        } else {
            crate::journal::Verb::Redeliver
        },
        if dead { "dead_lettered" } else { "redelivered" },
    )
    .workflow(&a.workflow_id)
    .handoff(&a.handoff_id)
    .target(Target::FromGod, Some(&a.from_god))
    .target(Target::ToGod, Some(&a.to_god))
    .target(Target::Delivery, Some(&n))
}
