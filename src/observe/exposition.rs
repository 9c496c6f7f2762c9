//! The Prometheus text exposition format (version 0.0.4) and OpenMetrics 1.0, written by one
//! writer: families (`# HELP`, `# TYPE`), samples with escaped label values, counters with their
//! `_total` suffix (and `_created` in OpenMetrics only), histograms with cumulative buckets.
//!
//! Every family caps its series at [`MAX_SERIES_PER_FAMILY`]; samples past the cap are dropped and
//! counted ([`Exposition::dropped`]), so no root can make a scrape unbounded.

use std::fmt::Write as _;

/// The most label sets one family shows in one scrape.
pub(crate) const MAX_SERIES_PER_FAMILY: usize = 1000;

/// The content type of the text format (what `promtool check metrics` reads).
pub(crate) const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of OpenMetrics 1.0.
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Gauge,
    Counter,
    Histogram,
}

/// A histogram with fixed upper bounds (seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative): `counts[i]` fell in `(bounds[i-1], bounds[i]]`; the
    /// last one past every bound.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records one observation; a negative one (a clock stepped back) counts as 0.
    pub fn observe(&mut self, v: f64) {
        let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
        let i = self.bounds.partition_point(|b| *b < v);
        if let Some(c) = self.counts.get_mut(i) {
            *c = c.saturating_add(1);
        }
        self.sum += v;
        self.count = self.count.saturating_add(1);
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

/// One scrape's text.
pub(crate) struct Exposition {
    out: String,
    open_metrics: bool,
    /// The family being written and how many series it has so far.
    family: String,
    kind: Option<Kind>,
    series: usize,
    dropped: u64,
}

impl Exposition {
    pub(crate) fn new(open_metrics: bool) -> Self {
        Self {
            out: String::with_capacity(16 * 1024),
            open_metrics,
            family: String::new(),
            kind: None,
            series: 0,
            dropped: 0,
        }
    }

    /// Starts a family. `name` is the family's name without a counter's `_total`.
    pub(crate) fn family(&mut self, name: &str, kind: Kind, help: &str) {
        self.family = name.to_owned();
        self.kind = Some(kind);
        self.series = 0;
        let shown = match (kind, self.open_metrics) {
            (Kind::Counter, false) => format!("{name}_total"),
            _ => name.to_owned(),
        };
        let word = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Histogram => "histogram",
        };
        let _ = writeln!(self.out, "# HELP {shown} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {shown} {word}");
    }

    /// Counts one more series of the current family; false (and counted as dropped) past the cap.
    fn admit(&mut self) -> bool {
        if self.series >= MAX_SERIES_PER_FAMILY {
            self.dropped = self.dropped.saturating_add(1);
            return false;
        }
        self.series += 1;
        true
    }

    /// A gauge's sample.
    pub(crate) fn gauge(&mut self, labels: &[(&str, &str)], value: f64) {
        debug_assert_eq!(self.kind, Some(Kind::Gauge));
        if self.admit() {
            let name = self.family.clone();
            self.line(&name, "", labels, None, value);
        }
    }

    /// A counter's sample (`_total`), and its `_created` (unix seconds) in OpenMetrics.
    pub(crate) fn counter(&mut self, labels: &[(&str, &str)], value: u64, created: Option<f64>) {
        self.counter_f64(labels, value as f64, created);
    }

    /// A counter whose value is not a whole number (dollars, say).
    pub(crate) fn counter_f64(
        &mut self,
        labels: &[(&str, &str)],
        value: f64,
        created: Option<f64>,
    ) {
        debug_assert_eq!(self.kind, Some(Kind::Counter));
        if !self.admit() {
            return;
        }
        let name = self.family.clone();
        self.line(&name, "_total", labels, None, value);
        if self.open_metrics
            && let Some(c) = created
        {
            self.line(&name, "_created", labels, None, c);
        }
    }

    /// A histogram's buckets, sum and count (and `_created` in OpenMetrics).
    pub(crate) fn histogram(
        &mut self,
        labels: &[(&str, &str)],
        h: &Histogram,
        created: Option<f64>,
    ) {
        debug_assert_eq!(self.kind, Some(Kind::Histogram));
        if !self.admit() {
            return;
        }
        let name = self.family.clone();
        let mut cumulative = 0u64;
        for (i, bound) in h.bounds.iter().enumerate() {
            cumulative = cumulative.saturating_add(h.counts.get(i).copied().unwrap_or(0));
            self.line(
                &name,
                "_bucket",
                labels,
                Some(&fmt_f64(*bound)),
                cumulative as f64,
            );
        }
        self.line(&name, "_bucket", labels, Some("+Inf"), h.count as f64);
        self.line(&name, "_sum", labels, None, h.sum);
        self.line(&name, "_count", labels, None, h.count as f64);
        if self.open_metrics
            && let Some(c) = created
        {
            self.line(&name, "_created", labels, None, c);
        }
    }

    fn line(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &[(&str, &str)],
        le: Option<&str>,
        v: f64,
    ) {
        self.out.push_str(name);
        self.out.push_str(suffix);
        if !labels.is_empty() || le.is_some() {
            self.out.push('{');
            let mut first = true;
            for (k, val) in labels.iter().copied().chain(le.map(|l| ("le", l))) {
                if !first {
                    self.out.push(',');
                }
                first = false;
                self.out.push_str(k);
                self.out.push_str("=\"");
                escape_label(&mut self.out, val);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        self.out.push_str(&fmt_f64(v));
        self.out.push('\n');
    }

    /// Samples dropped so far by the per-family cap.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The finished text (OpenMetrics ends with `# EOF`).
    pub(crate) fn finish(mut self) -> String {
        if self.open_metrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// A number as both formats write it: integers without a fraction, `+Inf`, `NaN`.
pub(crate) fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape_label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: &[f64] = &[0.5, 1.0, 5.0];

    #[test]
    fn counters_take_total_in_text_and_created_only_in_openmetrics() {
        for om in [false, true] {
            let mut e = Exposition::new(om);
            e.family("pantheon_acks", Kind::Counter, "Acks.");
            e.counter(&[("status", "acc\"e\\pted\n")], 3, Some(1700000000.5));
            let t = e.finish();
            if om {
                assert!(t.contains("# TYPE pantheon_acks counter\n"), "{t}");
                assert!(
                    t.contains(
                        "pantheon_acks_created{status=\"acc\\\"e\\\\pted\\n\"} 1700000000.5\n"
                    ),
                    "{t}"
                );
                assert!(t.ends_with("# EOF\n"));
            } else {
                assert!(t.contains("# TYPE pantheon_acks_total counter\n"), "{t}");
                assert!(!t.contains("_created"), "{t}");
                assert!(!t.contains("# EOF"));
            }
            assert!(
                t.contains("pantheon_acks_total{status=\"acc\\\"e\\\\pted\\n\"} 3\n"),
                "{t}"
            );
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_inf() {
        let mut h = Histogram::new(B);
        for v in [0.1, 0.7, 0.7, 3.0, 60.0, -2.0] {
            h.observe(v);
        }
        let mut e = Exposition::new(false);
        e.family("x_seconds", Kind::Histogram, "X.");
        e.histogram(&[], &h, None);
        let t = e.finish();
        assert!(t.contains("x_seconds_bucket{le=\"0.5\"} 2\n"), "{t}");
        assert!(t.contains("x_seconds_bucket{le=\"1\"} 4\n"), "{t}");
        assert!(t.contains("x_seconds_bucket{le=\"5\"} 5\n"), "{t}");
        assert!(t.contains("x_seconds_bucket{le=\"+Inf\"} 6\n"), "{t}");
        assert!(t.contains("x_seconds_count 6\n"), "{t}");
        assert!(t.contains("x_seconds_sum 64.5\n"), "{t}");
    }

    #[test]
    fn a_family_past_the_cap_drops_and_counts() {
        let mut e = Exposition::new(false);
        e.family("g", Kind::Gauge, "G.");
        let names: Vec<String> = (0..MAX_SERIES_PER_FAMILY + 5)
            .map(|i| format!("n{i}"))
            .collect();
        for n in &names {
            e.gauge(&[("god", n)], 1.0);
        }
        assert_eq!(e.dropped(), 5);
        let t = e.finish();
        assert_eq!(
            t.lines().filter(|l| l.starts_with("g{")).count(),
            MAX_SERIES_PER_FAMILY
        );
    }
}
