//! Paged listings of dispatches (`check_inbox`, `list_pending`): `limit` entries at a time, oldest
//! first, and a `next_cursor` for the page after.
//!
//! A cursor names the last entry returned by its sort key (god, `dispatched_at`, file name), never
//! by position, so files added or removed between two pages shift nothing: an entry that exists
//! throughout is returned exactly once. The cursor is opaque to callers (hex of the listing and the
//! key) and checked when it comes back, since it is input like any other: a cursor continues only
//! the listing that gave it ([`Listing`]), so one from another god's inbox or from `list_pending`
//! is refused, saying whose it is, instead of silently starting past entries it never saw.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::{Error, Result};

/// Entries per page when the caller does not say.
pub const DEFAULT_LIMIT: usize = 20;
/// The largest page a caller may ask for.
pub(crate) const MAX_LIMIT: usize = 1000;
/// The longest cursor accepted (a god name, a timestamp and a file name, hex-encoded).
const MAX_CURSOR_CHARS: usize = 2048;

/// What page to return: `limit` entries (`None`: all) after `cursor` (`None`: from the start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    /// Entries per page; `None` returns every entry.
    pub limit: Option<usize>,
    /// The opaque cursor from the previous page's `next_cursor`; `None` starts at the first entry.
    pub cursor: Option<String>,
}

impl PageRequest {
    /// The first page of the default size.
    pub fn first() -> Self {
        Self {
            limit: Some(DEFAULT_LIMIT),
            cursor: None,
        }
    }

    /// A page as callers ask for it: `limit` defaults to [`DEFAULT_LIMIT`] and must be 1 to
    /// `MAX_LIMIT`.
    pub fn new(limit: Option<usize>, cursor: Option<String>) -> Result<Self> {
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::refused(format!(
                "limit {limit} is out of range; ask for 1 to {MAX_LIMIT} entries a page"
            )));
        }
        Ok(Self {
            limit: Some(limit),
            cursor,
        })
    }
}

/// The listing a cursor was given out by, and the only one it continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing<'a> {
    /// `check_inbox` of this god (whole or compact: the same entries).
    Inbox(&'a str),
    /// `list_pending`, every god's inbox.
    Pending,
}

impl Listing<'_> {
    /// The tag written into the cursor.
    fn tag(&self) -> String {
        match self {
            Listing::Inbox(god) => format!("inbox:{god}"),
            Listing::Pending => "pending".to_owned(),
        }
    }

    /// How a tag read back from a cursor is named in a refusal (`None`: no tag this code writes).
    fn describe(tag: &str) -> Option<String> {
        match tag.split_once(':') {
            Some(("inbox", god)) => Some(format!("check_inbox for {god:?}")),
            None if tag == "pending" => Some("list_pending".to_owned()),
            _ => None,
        }
    }
}

/// Where an entry stands in a listing; pages are cut by comparing these.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct SortKey {
    /// The inbox the entry lies in (listings across gods sort by god first).
    pub god: String,
    /// When the entry was dispatched; unreadable times sort first.
    pub at: Option<DateTime<Utc>>,
    /// The file name, which breaks ties.
    pub file: String,
}

impl SortKey {
    fn encode(&self, listing: Listing) -> String {
        let at = self
            .at
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
            .unwrap_or_default();
        let plain = format!("{}\t{}\t{}\t{}", listing.tag(), self.god, at, self.file);
        plain.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// The key `cursor` names, if `listing` gave it out.
    fn decode(cursor: &str, listing: Listing) -> Result<Self> {
        let shown = cursor.chars().take(64).collect::<String>();
        let bad = || {
            Error::refused(format!(
                "cursor {shown:?} is not one this listing gave; start again without a cursor"
            ))
        };
        if cursor.len() > MAX_CURSOR_CHARS || !cursor.len().is_multiple_of(2) {
            return Err(bad());
        }
        let bytes = (0..cursor.len())
            .step_by(2)
            .map(|i| {
                cursor
                    .get(i..i + 2)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(bad)?;
        let plain = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut parts = plain.splitn(4, '\t');
        let (Some(tag), Some(god), Some(at), Some(file)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if tag != listing.tag() {
            let Some(theirs) = Listing::describe(tag) else {
                return Err(bad());
            };
            let ours = Listing::describe(&listing.tag()).unwrap_or_default();
            return Err(Error::refused(format!(
                "cursor {shown:?} was given out by {theirs}, not by {ours}: a cursor only \
                 continues the listing that gave it; call {ours} again without a cursor"
            )));
        }
        let at = if at.is_empty() {
            None
        } else {
            Some(
                DateTime::parse_from_rfc3339(at)
                    .map_err(|_| bad())?
                    .with_timezone(&Utc),
            )
        };
        Ok(Self {
            god: god.to_owned(),
            at,
            file: file.to_owned(),
        })
    }
}

/// One page cut from a listing sorted by key.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Page<T> {
    /// This page's entries.
    pub items: Vec<T>,
    /// Every entry of the listing, on any page.
    pub count: usize,
    /// The cursor for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// Cuts the page `request` asks for from `entries` of `listing` (sorted by key here, oldest first).
pub(crate) fn page<T>(
    mut entries: Vec<(SortKey, T)>,
    request: &PageRequest,
    listing: Listing,
) -> Result<Page<T>> {
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let count = entries.len();
    let after = request
        .cursor
        .as_deref()
        .map(|c| SortKey::decode(c, listing))
        .transpose()?;
    let start = match &after {
        Some(k) => entries.partition_point(|(key, _)| key <= k),
        None => 0,
    };
    let limit = request.limit.unwrap_or(usize::MAX);
    let mut rest = entries.into_iter().skip(start);
    let taken: Vec<(SortKey, T)> = rest.by_ref().take(limit).collect();
    let next_cursor = match (rest.next(), taken.last()) {
        (Some(_), Some((last, _))) => Some(last.encode(listing)),
        _ => None,
    };
    Ok(Page {
        items: taken.into_iter().map(|(_, t)| t).collect(),
        count,
        next_cursor,
    })
}

/// A dispatch in a compact inbox (`compact: true`): who, what and how old, without its context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactDispatch {
    /// The dispatch's own id, when set.
    pub dispatch_id: Option<String>,
    /// The handoff id (and file name) of the dispatch.
    pub handoff_id: String,
    /// The workflow it belongs to.
    pub workflow_id: String,
    /// The god whose handoff led here.
    pub from_god: String,
    /// The step to do.
    pub step: String,
    /// Seconds since `dispatched_at`; `None` when that is unreadable.
    pub age_secs: Option<i64>,
    /// The first line of the context's summary.
    pub summary: String,
}

impl CompactDispatch {
    /// The compact form of `d`, its age measured against `now`.
    pub fn of(d: &super::Dispatch, now: DateTime<Utc>) -> Self {
        Self {
            dispatch_id: d.dispatch_id.clone(),
            handoff_id: d.handoff_id.clone(),
            workflow_id: d.workflow_id.clone(),
            from_god: d.from_god.clone(),
            step: d.step.clone(),
            age_secs: d
                .dispatched_at
                .as_deref()
                .and_then(crate::store::time::parse_ts)
                .map(|t| (now - t).num_seconds().max(0)),
            summary: d.context.summary.lines().next().unwrap_or("").to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32) -> SortKey {
        SortKey {
            god: "thoth".into(),
            at: DateTime::from_timestamp(1_700_000_000 + i64::from(n), 0),
            file: format!("hof_{n:04}.json"),
        }
    }

    #[test]
    fn pages_survive_entries_added_and_removed_between_them() {
        let mut live: Vec<u32> = (0..30).collect();
        let mut seen = Vec::new();
        let mut cursor = None;
        let mut round = 0;
        loop {
            let entries = live.iter().map(|&n| (key(n), n)).collect();
            let p = page(
                entries,
                &PageRequest {
                    limit: Some(4),
                    cursor: cursor.clone(),
                },
                Listing::Inbox("thoth"),
            )
            .unwrap();
            assert_eq!(p.count, live.len());
            seen.extend(p.items.iter().copied());
            // Between pages: one seen and one unseen entry go, a newer and an older one come.
            round += 1;
            live.retain(|&n| n != round * 3 && n != 29 - round);
            live.push(100 + round);
            live.push(50 + round);
            match p.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let throughout: Vec<u32> = (0..30).filter(|n| live.contains(n)).collect();
        for n in &throughout {
            assert_eq!(
                seen.iter().filter(|&&s| s == *n).count(),
                1,
                "{n} once: {seen:?}"
            );
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len(), "nothing repeated: {seen:?}");
    }

    #[test]
    fn a_cursor_that_was_not_given_out_is_refused() {
        for bad in ["zz", "abc", "00", &"ab".repeat(2000), "74686f7468"] {
            let r = page::<u32>(
                vec![],
                &PageRequest {
                    limit: Some(1),
                    cursor: Some(bad.into()),
                },
                Listing::Pending,
            );
            assert!(r.is_err(), "{bad}");
        }
        assert!(PageRequest::new(Some(0), None).is_err());
        assert!(PageRequest::new(Some(MAX_LIMIT + 1), None).is_err());
        assert_eq!(PageRequest::new(None, None).unwrap(), PageRequest::first());
    }

    #[test]
    fn a_cursor_continues_only_the_listing_that_gave_it() {
        let entries = || (0..5).map(|n| (key(n), n)).collect::<Vec<_>>();
        let first = |listing| {
            page(
                entries(),
                &PageRequest::new(Some(2), None).unwrap(),
                listing,
            )
            .unwrap()
            .next_cursor
            .unwrap()
        };
        let again = |cursor: &str, listing| {
            page(
                entries(),
                &PageRequest::new(Some(2), Some(cursor.to_owned())).unwrap(),
                listing,
            )
        };
        let thoth = first(Listing::Inbox("thoth"));
        assert_eq!(
            again(&thoth, Listing::Inbox("thoth")).unwrap().items,
            vec![2, 3]
        );
        let other_god = again(&thoth, Listing::Inbox("marvin"))
            .unwrap_err()
            .to_string();
        assert!(
            other_god.contains("check_inbox for \"thoth\"")
                && other_god.contains("not by check_inbox for \"marvin\""),
            "{other_god}"
        );
        let pending = again(&thoth, Listing::Pending).unwrap_err().to_string();
        assert!(
            pending.contains("given out by check_inbox") && pending.contains("not by list_pending"),
            "{pending}"
        );
        let from_pending = first(Listing::Pending);
        let inbox = again(&from_pending, Listing::Inbox("thoth"))
            .unwrap_err()
            .to_string();
        assert!(inbox.contains("given out by list_pending"), "{inbox}");
    }
}
