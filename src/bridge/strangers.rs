//! Which lines of a shared track the consumer reads, and what becomes of the others.
//!
//! A consumer on the whole track (`pantheon.track.T.*`) is handed this machine's own lines back,
//! each one delivered by the server and decoded here only to be skipped: half of what a pair of
//! bridges moves. So the consumer reads only the allowed peers' subjects: one subject as the
//! consumer's `filter_subject` (any server), several as `filter_subjects` (nats-server 2.10 and
//! later); on a 2.9 server with several peers it reads the whole track as before.
//!
//! Lines a filtered consumer never sees are those of pantheons not allowed (and of subjects that
//! name no pantheon). They are still dead-lettered, by a sweep when the consumer is idle: the
//! stream's subjects are listed, and each stranger's lines past what was swept are read with a
//! consumer of their own. The sweep starts again from the stream's first line when the bridge
//! restarts; a dead letter is named by its stream sequence, so one swept twice is written over,
//! never doubled.

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, stream};
use futures_util::{StreamExt, TryStreamExt};

use super::track::Track;
use crate::engine::nats::track as et;

/// The most stranger subjects a sweep looks at: a stream holding more (a hostile peer inventing
/// names) has only the first ones, in the server's listing order, swept; the bridge says so in its log.
const MAX_SUBJECTS: usize = 4096;
/// The most stranger lines one sweep dead-letters.
const MAX_PER_SWEEP: usize = 4096;

/// The subjects the consumer reads, or `None` for the whole track.
pub(super) fn peer_subjects(t: &Track, server_version: &str) -> Option<Vec<String>> {
    let me = &t.shared.inbound.name;
    let subjects: Vec<String> = t
        .shared
        .inbound
        .peers
        .names()
        .into_iter()
        .filter(|p| p != me)
        .map(|p| et::subject(&t.track, &p))
        .collect();
    match subjects.len() {
        0 => None,
        1 => Some(subjects),
        _ if at_least_2_10(server_version) => Some(subjects),
        _ => None,
    }
}

/// True for a server version of 2.10 or later (`filter_subjects`).
fn at_least_2_10(version: &str) -> bool {
    let mut parts = version
        .trim_start_matches('v')
        .split(['.', '-'])
        .map(|p| p.parse::<u64>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (2, 10),
        _ => false,
    }
}

/// The consumer's configuration from `start` on.
pub(super) fn consumer_config(
    subjects: &Option<Vec<String>>,
    t: &Track,
    start: u64,
) -> pull::OrderedConfig {
    let deliver_policy = jetstream::consumer::DeliverPolicy::ByStartSequence {
        start_sequence: start,
    };
    match subjects.as_deref() {
        Some([one]) => pull::OrderedConfig {
            filter_subject: one.clone(),
            deliver_policy,
            ..Default::default()
        },
        Some(several) => pull::OrderedConfig {
            filter_subjects: several.to_vec(),
            deliver_policy,
            ..Default::default()
        },
        None => pull::OrderedConfig {
            filter_subject: et::filter(&t.track),
            deliver_policy,
            ..Default::default()
        },
    }
}

/// The last stream sequence the consumer would be handed: the stream's last, or with a filter the
/// last of the filtered subjects (`None`: the server did not answer).
pub(super) async fn last_for_consumer(
    stream: &stream::Stream,
    subjects: &Option<Vec<String>>,
) -> Option<u64> {
    let info = stream.get_info().await.ok()?;
    let Some(subjects) = subjects else {
        return Some(info.state.last_sequence);
    };
    let mut last = 0;
    for s in subjects {
        match stream.get_last_raw_message_by_subject(s).await {
            Ok(m) => last = last.max(m.sequence),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {}
            Err(_) => return None,
        }
    }
    Some(last)
}

/// What the sweep has dead-lettered: per stranger subject, the last stream sequence swept.
#[derive(Default)]
pub(super) struct Sweep {
    swept: HashMap<String, u64>,
}

impl Sweep {
    /// Dead-letters the lines of subjects the consumer does not read, other than this machine's.
    pub(super) async fn run(&mut self, t: &Track, stream: &stream::Stream, read: &[String]) {
        let own = et::subject(&t.track, &t.shared.inbound.name);
        let Ok(mut listed) = stream.info_with_subjects(et::filter(&t.track)).await else {
            return;
        };
        let mut strangers = Vec::new();
        while let Ok(Some((subject, _count))) = listed.try_next().await {
            if subject != own && !read.contains(&subject) {
                strangers.push(subject);
            }
            if strangers.len() >= MAX_SUBJECTS {
                tracing::warn!(
                    "bridge: track {} holds more than {MAX_SUBJECTS} subjects of pantheons not allowed: only the first are swept",
                    t.track
                );
                break;
            }
        }
        let mut budget = MAX_PER_SWEEP;
        for subject in strangers {
            let Ok(last) = stream.get_last_raw_message_by_subject(&subject).await else {
                continue;
            };
            let from = self.swept.get(&subject).copied().unwrap_or(0);
            if last.sequence <= from || budget == 0 {
                continue;
            }
            let done = sweep_subject(t, stream, &subject, from, last.sequence, &mut budget).await;
            self.swept.insert(subject, done);
        }
    }
}

/// Dead-letters the lines of `subject` after `from` up to `to`; returns the last one done.
async fn sweep_subject(
    t: &Track,
    stream: &stream::Stream,
    subject: &str,
    from: u64,
    to: u64,
    budget: &mut usize,
) -> u64 {
    let config = pull::OrderedConfig {
        filter_subject: subject.to_owned(),
        deliver_policy: jetstream::consumer::DeliverPolicy::ByStartSequence {
            start_sequence: from.saturating_add(1),
        },
        ..Default::default()
    };
    let Ok(consumer) = stream.create_consumer(config).await else {
        return from;
    };
    let Ok(mut messages) = consumer.messages().await else {
        return from;
    };
    let mut done = from;
    while done < to && *budget > 0 {
        let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(2), messages.next()).await
        else {
            break;
        };
        let Ok(info) = m.info() else { break };
        let seq = info.stream_sequence;
        let reason = match et::sender_of(&m.subject) {
            Some(from) => {
                format!(
                    "pantheon {from:?} is not an allowed peer (--peer): its line is not appended"
                )
            }
            None => format!("subject {} names no pantheon", m.subject),
        };
        super::track::dead(t, seq, &m.subject, &reason, &m.payload).await;
        done = seq;
        *budget -= 1;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::at_least_2_10;

    #[test]
    fn filter_subjects_needs_a_2_10_server() {
        for (v, ok) in [
            ("2.9.10", false),
            ("2.10.0", true),
            ("2.15.1", true),
            ("v2.10.3-beta.1", true),
            ("3.0.0", true),
            ("1.99.0", false),
            ("garbage", false),
            ("", false),
        ] {
            assert_eq!(at_least_2_10(v), ok, "{v}");
        }
    }
}
