//! Which due occurrences run and which are skipped: the catch-up rules, as a pure function
//! of the schedule, the policy, the last occurrence on record and the time now.
//!
//! The occurrences due are those after the last one on record (or since a runner first
//! saw the automation) and at or before now. The newest of them is *current* when it is
//! less than [`GRACE_MS`] old: a runner started by cron every minute, or `serve` ticking,
//! meets every occurrence while it is current. The others were missed while no runner ran:
//! - `latest`: the newest due occurrence runs (if it is within the window); the rest are
//!   skipped;
//! - `all`: every due occurrence within the window runs, oldest first, but at most
//!   `catch_up_max_runs` of them (the newest; default 100); older ones are skipped;
//! - `none`: only a current occurrence runs; the rest are skipped.
//!
//! The window is `catch_up_window_secs`, never less than the grace. Skipped occurrences
//! are recorded as one span (first, last, count), so a week of a per-minute schedule is one
//! record, not ten thousand.

use crate::clock::Millis;
use crate::config::CatchUp;

/// How old the newest due occurrence may be and still count as on time (cron's minute).
pub const GRACE_MS: i64 = 60_000;
/// Skipped spans count their occurrences up to this many.
pub const COUNT_CAP: u64 = 100_000;

/// A schedule's occurrences (a trait so the rules are tested without time zones).
pub trait Occurrences {
    /// The first occurrence strictly after `t`.
    fn next_after(&self, t: Millis) -> Option<Millis>;
    /// The latest occurrence at or before `t`.
    fn latest_at_or_before(&self, t: Millis) -> Option<Millis>;
}

impl Occurrences for crate::schedule::Schedule {
    fn next_after(&self, t: Millis) -> Option<Millis> {
        crate::schedule::Schedule::next_after(self, t)
    }
    fn latest_at_or_before(&self, t: Millis) -> Option<Millis> {
        crate::schedule::Schedule::latest_at_or_before(self, t)
    }
}

/// Missed occurrences that do not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipSpan {
    pub first: Millis,
    pub last: Millis,
    /// `None` past [`COUNT_CAP`].
    pub count: Option<u64>,
    pub reason: String,
}

/// What a runner does next for one automation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Recorded as skipped first.
    pub skip: Option<SkipSpan>,
    /// The next occurrence to run (after it, the runner plans again).
    pub run: Option<Millis>,
}

/// How a runner catches up: the policy, the window, and how many missed occurrences
/// `catch_up: all` runs at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub catch_up: CatchUp,
    pub window_secs: u64,
    pub max_runs: u32,
}

/// Plans from `after` (the last occurrence on record, exclusive) to `now` (inclusive).
pub fn plan(occ: &impl Occurrences, policy: Policy, after: Millis, now: Millis) -> Plan {
    let Policy {
        catch_up,
        window_secs,
        max_runs,
    } = policy;
    let Some(first) = occ.next_after(after).filter(|&f| f <= now) else {
        return Plan::default();
    };
    let last = occ.latest_at_or_before(now).unwrap_or(first).max(first);
    let window = i64::try_from(window_secs.saturating_mul(1000))
        .unwrap_or(i64::MAX)
        .max(GRACE_MS);
    // Occurrences at or after this are within the window.
    let horizon = now.saturating_sub(window);
    let current = now - last < GRACE_MS;
    let (run, reason) = match catch_up {
        CatchUp::None => (
            current.then_some(last),
            "missed while no runner ran (catch_up: none)".to_owned(),
        ),
        CatchUp::Latest => {
            if last >= horizon {
                (
                    Some(last),
                    "missed while no runner ran (catch_up: latest runs only the newest)".to_owned(),
                )
            } else {
                (
                    None,
                    format!(
                        "missed while no runner ran, older than catch_up_window_secs ({window_secs} s)"
                    ),
                )
            }
        }
        CatchUp::All => {
            let in_window = if first >= horizon {
                Some(first)
            } else {
                occ.next_after(horizon - 1).filter(|&t| t <= now)
            };
            // The backlog is bounded: the newest `max_runs` due occurrences at most.
            let newest = newest_runs(occ, first, last, max_runs);
            match in_window {
                Some(w) if w < newest => (
                    Some(newest),
                    format!(
                        "missed while no runner ran, beyond the newest {max_runs} (catch_up_max_runs)"
                    ),
                ),
                w => (
                    w,
                    format!(
                        "missed while no runner ran, older than catch_up_window_secs ({window_secs} s)"
                    ),
                ),
            }
        }
    };
    let skip_last = match run {
        Some(r) if r == first => None,
        Some(r) => occ.latest_at_or_before(r - 1),
        None => Some(last),
    };
    let skip = skip_last.filter(|&l| l >= first).map(|l| SkipSpan {
        first,
        last: l,
        count: count(occ, first, l),
        reason,
    });
    Plan { skip, run }
}

/// The oldest of the newest `n` occurrences from `first` to `last` (both occurrences).
fn newest_runs(occ: &impl Occurrences, first: Millis, last: Millis, n: u32) -> Millis {
    let mut t = last;
    for _ in 1..n.max(1) {
        match occ.latest_at_or_before(t - 1) {
            Some(before) if before >= first => t = before,
            _ => return first,
        }
    }
    t
}

/// The number of occurrences from `first` to `last` (both occurrences), up to the cap.
fn count(occ: &impl Occurrences, first: Millis, last: Millis) -> Option<u64> {
    let mut n = 1;
    let mut t = first;
    while t < last {
        if n >= COUNT_CAP {
            return None;
        }
        match occ.next_after(t) {
            Some(next) if next <= last => {
                n += 1;
                t = next;
            }
            _ => break,
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `period` ms from 0.
    struct Every(i64);

    impl Occurrences for Every {
        fn next_after(&self, t: Millis) -> Option<Millis> {
            Some((t.div_euclid(self.0) + 1) * self.0)
        }
        fn latest_at_or_before(&self, t: Millis) -> Option<Millis> {
            Some(t.div_euclid(self.0) * self.0)
        }
    }

    const MIN: i64 = 60_000;
    const HOUR: i64 = 60 * MIN;

    type Skip = Option<(i64, i64, Option<u64>)>;

    fn span(first: i64, last: i64, count: u64) -> Skip {
        Some((first, last, Some(count)))
    }

    fn policy(catch_up: CatchUp, window_secs: u64) -> Policy {
        Policy {
            catch_up,
            window_secs,
            max_runs: 100,
        }
    }

    fn p(c: CatchUp, window: u64, after: i64, now: i64) -> (Skip, Option<i64>) {
        let plan = plan(&Every(HOUR), policy(c, window), after, now);
        (plan.skip.map(|s| (s.first, s.last, s.count)), plan.run)
    }

    #[test]
    fn on_time_every_policy_runs_the_current_occurrence() {
        for c in [CatchUp::Latest, CatchUp::All, CatchUp::None] {
            assert_eq!(
                p(c, 86_400, HOUR - 1, HOUR + 5_000),
                (None, Some(HOUR)),
                "{c:?}"
            );
        }
        // Nothing due yet, or the due one already on record.
        assert_eq!(p(CatchUp::All, 86_400, HOUR, HOUR + 5_000), (None, None));
        assert_eq!(p(CatchUp::All, 86_400, 0, HOUR - 1), (None, None));
    }

    #[test]
    fn missed_occurrences_follow_the_policy() {
        // On record: 1:00. Now 5:30: 2:00, 3:00, 4:00 and 5:00 were missed.
        let (after, now) = (HOUR, 5 * HOUR + 30 * MIN);
        assert_eq!(
            p(CatchUp::Latest, 86_400, after, now),
            (span(2 * HOUR, 4 * HOUR, 3), Some(5 * HOUR))
        );
        assert_eq!(p(CatchUp::All, 86_400, after, now), (None, Some(2 * HOUR)));
        assert_eq!(
            p(CatchUp::None, 86_400, after, now),
            (span(2 * HOUR, 5 * HOUR, 4), None)
        );
        // The window: an hour and a half reaches back to 4:00.
        assert_eq!(
            p(CatchUp::All, 5_400, after, now),
            (span(2 * HOUR, 3 * HOUR, 2), Some(4 * HOUR))
        );
        // Ten minutes: 5:00 is too old even for latest.
        assert_eq!(
            p(CatchUp::Latest, 600, after, now),
            (span(2 * HOUR, 5 * HOUR, 4), None)
        );
        // The window never shrinks below the grace: a current occurrence always runs.
        assert_eq!(
            p(CatchUp::Latest, 1, 5 * HOUR - 1, 5 * HOUR + 59_000),
            (None, Some(5 * HOUR))
        );
    }

    #[test]
    fn a_huge_gap_is_one_span_counted_up_to_the_cap() {
        let plan = plan(
            &Every(1000),
            policy(CatchUp::Latest, 86_400),
            -1,
            400_000_000,
        );
        let skip = plan.skip.expect("skip");
        assert_eq!((skip.first, skip.count), (0, None));
        assert_eq!(plan.run, Some(400_000_000));
        assert_eq!(skip.last, 399_999_000);
    }

    #[test]
    fn catch_up_all_runs_at_most_its_bound_of_a_backlog() {
        // A per-second schedule, a day without a runner: 86,400 missed occurrences.
        const DAY: i64 = 86_400_000;
        let every = Every(1000);
        let mut after = 0;
        let mut runs = Vec::new();
        let mut skipped = Vec::new();
        loop {
            let plan = plan(&every, policy(CatchUp::All, 86_400), after, DAY);
            if let Some(s) = plan.skip {
                skipped.push((s.first, s.last, s.count, s.reason));
            }
            let Some(run) = plan.run else { break };
            runs.push(run);
            after = run;
        }
        assert_eq!(runs.len(), 100);
        assert_eq!(runs[0], DAY - 99_000);
        assert_eq!(runs.last(), Some(&DAY));
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        let (first, last, count, reason) = &skipped[0];
        assert_eq!((*first, *last, *count), (1000, DAY - 100_000, Some(86_300)));
        assert!(reason.contains("catch_up_max_runs"), "{reason}");
        // Within the bound, every missed occurrence runs.
        let plan = plan(&Every(HOUR), policy(CatchUp::All, 86_400), HOUR, 5 * HOUR);
        assert_eq!((plan.skip, plan.run), (None, Some(2 * HOUR)));
    }
}
