//! Plausible words for the simulated pantheon: topics, step summaries, decisions, worker subtasks,
//! board proposals and directors' remarks. Picked with the simulation's seeded RNG.

use rand::Rng;
use rand::rngs::StdRng;

/// Picks one item.
pub(crate) fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// What a workflow of `definition` is about.
pub(crate) fn topic(rng: &mut StdRng, definition: &str) -> &'static str {
    match definition {
        "bug-fix" => pick(
            rng,
            &[
                "null dereference in the invoice parser",
                "double charge on retried webhooks",
                "search results lost after pagination",
                "session cookie dropped behind the proxy",
            ],
        ),
        super::gods::PROBE => pick(
            rng,
            &[
                "the checkout API's p99 latency",
                "the search index's freshness",
            ],
        ),
        "morning-briefing" => pick(
            rng,
            &[
                "today's briefing",
                "the Monday briefing",
                "the launch-day briefing",
            ],
        ),
        "cross-pantheon-deploy" => pick(
            rng,
            &[
                "shared auth library 2.4",
                "the billing schema migration",
                "the partner search index",
            ],
        ),
        _ => pick(
            rng,
            &[
                "rate limiting for the public API",
                "Stripe checkout webhooks",
                "search autocomplete",
                "SSO through OIDC",
                "CSV export of invoices",
                "an audit log for admin actions",
            ],
        ),
    }
}

/// A one-line summary of `step` done on `topic`.
pub(crate) fn summary(rng: &mut StdRng, step: &str, topic: &str) -> String {
    let t: &[&str] = match step {
        "research" => &[
            "Surveyed prior art and constraints for {t}; three options compared.",
            "Researched {t}: requirements, risks and two viable approaches.",
        ],
        "architect" => &[
            "Designed {t}: module boundaries, data flow and failure modes.",
            "Architecture for {t} written up; one open trade-off noted.",
        ],
        "implement" | "build" | "fix" => &[
            "Implemented {t}; unit tests green, behind a feature flag.",
            "Built {t} with tests; the migration is reversible.",
        ],
        "review" => &[
            "Reviewed {t}: two nits fixed, logic gate passed.",
            "Code review of {t} done; edge cases covered.",
        ],
        "deploy" => &[
            "Shipped {t} to production with a canary at 5%.",
            "Deployed {t}; dashboards quiet.",
        ],
        "triage" => &[
            "Triaged {t}: reproduced, root cause narrowed to one module.",
            "Triage of {t}: severity high, repro attached.",
        ],
        "verify" => &[
            "Verified {t} end to end; state gate passed.",
            "Checked {t} against the acceptance list; all pass.",
        ],
        "handover" => &[
            "Handed {t} over to the partner pantheon; receipt confirmed.",
            "Partner gateway accepted {t}.",
        ],
        "announce" | "deliver" => &[
            "Announced {t} to the channels.",
            "Delivered {t} to everyone subscribed.",
        ],
        "active-goals" => &["Collected the active goals for {t}."],
        "news-scan" => &["Scanned the news relevant to {t}; five items kept."],
        "write-briefing" => &["Wrote {t}: goals, news, one risk to watch."],
        _ => &["Finished {s} for {t}."],
    };
    pick(rng, t).replace("{t}", topic).replace("{s}", step)
}

/// One or two decisions taken at `step`.
pub(crate) fn decisions(rng: &mut StdRng, step: &str) -> Vec<String> {
    let pool: &[&str] = match step {
        "research" | "news-scan" | "active-goals" => &[
            "Prefer the boring, proven option",
            "Scope: first iteration without admin UI",
            "Reuse the existing queue instead of a new service",
        ],
        "architect" => &[
            "Keep state in Postgres; no new datastore",
            "Idempotency keys on every write endpoint",
            "Feature flag per tenant",
        ],
        "implement" | "build" | "fix" => &[
            "Guard with a feature flag",
            "Add a regression test before the fix",
            "Migration split in two reversible steps",
        ],
        "review" | "verify" => &["Logic gate passed", "Accept with one follow-up ticket"],
        _ => &["Proceed as planned", "Notify the on-call channel"],
    };
    let n = rng.random_range(1..=2usize).min(pool.len());
    let mut out: Vec<String> = Vec::new();
    while out.len() < n {
        let d = pick(rng, pool).to_owned();
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// A short message for a pending ack.
pub(crate) fn pending_message(rng: &mut StdRng) -> &'static str {
    pick(
        rng,
        &[
            "Queued behind a deploy; starting shortly.",
            "Heard. Finishing another step first.",
            "In a review; will pick it up after.",
        ],
    )
}

/// Why a god declines a dispatch.
pub(crate) fn reject_message(rng: &mut StdRng) -> &'static str {
    pick(
        rng,
        &[
            "At capacity this hour; please route to the fallback.",
            "Outside my skills for this one.",
            "Blocked on another incident.",
        ],
    )
}

/// A worker subtask at `pct` percent.
pub(crate) fn subtask(rng: &mut StdRng, pct: u32) -> &'static str {
    match pct {
        0 => "reading the task",
        p if p < 50 => pick(
            rng,
            &["writing the types", "wiring the handler", "first draft"],
        ),
        p if p < 100 => pick(rng, &["writing tests", "fixing lints", "edge cases"]),
        _ => "done",
    }
}

/// A failure a worker reports.
pub(crate) fn failure(rng: &mut StdRng) -> (&'static str, &'static str) {
    pick2(
        rng,
        &[
            (
                "tsc: Type 'string | undefined' is not assignable to type 'string'",
                "at src/lib/price.ts:42:7",
            ),
            (
                "test failed: cart total rounds 0.005 down",
                "at tests/cart.test.ts:88",
            ),
            (
                "eslint: 3 errors (no-floating-promises)",
                "at src/app/api/route.ts:17",
            ),
        ],
    )
}

fn pick2<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

/// A board proposal for `checkpoint`.
pub(crate) fn proposal(rng: &mut StdRng, checkpoint: &str) -> &'static str {
    match checkpoint {
        "EVALUATE_PLAN" => pick(
            rng,
            &[
                "Checkout v2: client wrapper, checkout button, webhook handler",
                "Search: move autocomplete to the edge",
            ],
        ),
        "EVALUATE_EXECUTION" => pick(
            rng,
            &[
                "Checkout v2 as built: 14 tasks done, 2 retried",
                "Search autocomplete as built: p95 38 ms",
            ],
        ),
        _ => pick(
            rng,
            &[
                "Launch checkout v2 to all tenants on Thursday",
                "Launch autocomplete behind a 20% rollout",
            ],
        ),
    }
}

/// A director's concern.
pub(crate) fn concern(rng: &mut StdRng, director: &str) -> &'static str {
    match director {
        "CA" => pick(
            rng,
            &[
                "Webhook handler couples to the client",
                "No idempotency keys",
            ],
        ),
        "CPO" => pick(rng, &["Scope: defer refunds", "Success metric is vague"]),
        "CSO" => pick(
            rng,
            &["Webhook signature not verified", "Secrets in env files"],
        ),
        "COO" => pick(rng, &["No rollback plan", "On-call not briefed"]),
        _ => pick(rng, &["No loading states", "Error copy is unclear"]),
    }
}

/// A director's recommendation.
pub(crate) fn recommendation(rng: &mut StdRng, director: &str) -> &'static str {
    match director {
        "CA" => pick(rng, &["Idempotency keys", "Split the adapter"]),
        "CPO" => pick(
            rng,
            &["Ship refunds next sprint", "Define the conversion target"],
        ),
        "CSO" => pick(
            rng,
            &[
                "Verify signatures with the SDK",
                "Move secrets to the vault",
            ],
        ),
        "COO" => pick(rng, &["Write the rollback runbook", "Stage the rollout"]),
        _ => pick(rng, &["Add skeleton loaders", "Rewrite error messages"]),
    }
}

/// A discussion line of `kind`.
pub(crate) fn discussion(rng: &mut StdRng, kind: &str) -> &'static str {
    match kind {
        "CHALLENGE" => pick(
            rng,
            &[
                "This underestimates the migration risk.",
                "The timeline ignores the partner's freeze.",
            ],
        ),
        "QUESTION" => pick(rng, &["Rollback plan?", "Are webhook signatures verified?"]),
        "CLARIFY" => pick(
            rng,
            &[
                "Yes, via the SDK's constructEvent.",
                "Rollback is a flag flip; data is forward-compatible.",
            ],
        ),
        _ => pick(
            rng,
            &["Agreed, with the condition above.", "Same view here."],
        ),
    }
}
