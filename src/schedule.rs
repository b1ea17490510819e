//! Cron schedules in a time zone: parsed for `validate`, evaluated for automations.
//!
//! A schedule is a cron expression (5 fields `minute hour day-of-month month day-of-week`,
//! 6 with seconds first, 7 with a year last, or a nickname such as `@daily`) evaluated in an
//! IANA time zone (default: the machine's local zone, `TZ` or `/etc/localtime`, as cron).
//! Occurrences are instants: UTC milliseconds, always whole seconds.
//!
//! Daylight-saving transitions follow cron (Vixie cron and the Open Cron Pattern
//! Specification, as croner implements them):
//! - a *fixed-time* job (numbers in the second, minute and hour fields) whose time falls in
//!   the gap when clocks jump forward runs once at the first valid time after the gap
//!   (`30 2 * * *` in Europe/Berlin on the last Sunday of March: 03:00 CEST);
//!   when clocks fall back it runs once, at the first of the two times;
//! - a job with `*` or steps in those fields skips the wall-clock times that do not exist
//!   and runs in both passes of a repeated hour (`*/30 * * * *` runs at 02:00 and 02:30
//!   twice on the night clocks fall back: four distinct instants).

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{Timestamp, Zoned};

use crate::clock::Millis;

/// A parsed schedule with its time zone.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: Cron,
    tz: TimeZone,
    /// The zone's IANA name (canonical spelling), or a description of the local zone.
    zone_name: String,
    /// Whether the zone is the machine's local zone (no `timezone:` given).
    local: bool,
}

/// The field names of a 5, 6 or 7 field expression.
fn field_names(n: usize) -> &'static [&'static str] {
    const FIVE: &[&str] = &["minute", "hour", "day-of-month", "month", "day-of-week"];
    const SIX: &[&str] = &[
        "second",
        "minute",
        "hour",
        "day-of-month",
        "month",
        "day-of-week",
    ];
    const SEVEN: &[&str] = &[
        "second",
        "minute",
        "hour",
        "day-of-month",
        "month",
        "day-of-week",
        "year",
    ];
    match n {
        5 => FIVE,
        6 => SIX,
        _ => SEVEN,
    }
}

fn field_range(name: &str) -> &'static str {
    match name {
        "second" | "minute" => "0-59",
        "hour" => "0-23",
        "day-of-month" => "1-31, L or W",
        "month" => "1-12 or JAN-DEC",
        "day-of-week" => "0-7 (0 and 7 are Sunday) or SUN-SAT, with L or #",
        _ => "1-4999",
    }
}

/// Parses a cron expression. The error names the field at fault and what it accepts.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let whole = expr.parse::<Cron>();
    let problem = match whole {
        Ok(cron) => return Ok(cron),
        Err(e) => e,
    };
    let trimmed = expr.trim();
    if trimmed.starts_with('@') {
        return Err(format!(
            "`{trimmed}` is not a known nickname (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)"
        ));
    }
    let fields: Vec<&str> = trimmed.split_whitespace().collect();
    if !(5..=7).contains(&fields.len()) {
        return Err(format!(
            "it has {} field{}; a schedule has 5 (minute hour day-of-month month day-of-week), 6 (a seconds field first) or 7 (a year field last)",
            fields.len(),
            if fields.len() == 1 { "" } else { "s" }
        ));
    }
    let names = field_names(fields.len());
    // Find the first field that fails alone (the others as `*`).
    for (i, field) in fields.iter().enumerate() {
        let probe: Vec<&str> = (0..fields.len())
            .map(|j| if j == i { *field } else { "*" })
            .collect();
        if let Err(e) = probe.join(" ").parse::<Cron>() {
            return Err(format!(
                "field {} ({}) `{field}` is not valid: {}; it takes {} (also `*`, lists `a,b`, ranges `a-b` and steps `*/n`)",
                i + 1,
                names[i],
                describe(&e),
                field_range(names[i])
            ));
        }
    }
    Err(describe(&problem))
}

/// Whether `cron` has an occurrence after `from` (UTC).
fn fires_after(cron: &Cron, from: Millis) -> bool {
    Timestamp::from_millisecond(from)
        .map(|t| t.to_zoned(TimeZone::UTC))
        .is_ok_and(|z| cron.find_next_occurrence(&z, false).is_ok())
}

/// Why a valid expression never fires after `now`, naming the fields at fault (`0 0 30 2
/// *`: the day of the month never falls in that month); `None` when it fires.
pub fn never_fires(expr: &str, now: Millis) -> Option<String> {
    let cron = parse_cron(expr).ok()?;
    if fires_after(&cron, now) {
        return None;
    }
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if !(5..=7).contains(&fields.len()) {
        return Some("it has no occurrence".to_owned());
    }
    let names = field_names(fields.len());
    // The fields that, left out (as `*`), let it fire.
    let culprits: Vec<usize> = (0..fields.len())
        .filter(|&i| fields[i] != "*")
        .filter(|&i| {
            let probe: Vec<&str> = (0..fields.len())
                .map(|j| if j == i { "*" } else { fields[j] })
                .collect();
            parse_cron(&probe.join(" ")).is_ok_and(|c| fires_after(&c, now))
        })
        .collect();
    let field = |i: usize| format!("field {} ({}) `{}`", i + 1, names[i], fields[i]);
    Some(match culprits.as_slice() {
        [] => "no date matches all of its fields".to_owned(),
        [i] if names[*i] == "year" => format!("{} has no date from now on", field(*i)),
        [i] => format!("{} matches no date the other fields allow", field(*i)),
        [a, b] => format!("{} never meets {}: no date has both", field(*a), field(*b)),
        many => format!(
            "no date matches {} together",
            many.iter()
                .map(|&i| field(i))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// How many times a minute the expression fires at most, when more than once (its seconds
/// field matches several seconds).
pub fn per_minute(expr: &str) -> Option<u32> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if !(6..=7).contains(&fields.len()) {
        return None;
    }
    let cron = parse_cron(&format!("{} * * * * *", fields[0])).ok()?;
    let start = Timestamp::from_second(0).ok()?.to_zoned(TimeZone::UTC);
    let n = (0..60)
        .filter(|&s| {
            start
                .checked_add(jiff::SignedDuration::from_secs(s))
                .is_ok_and(|z| cron.is_time_matching(&z).unwrap_or(false))
        })
        .count() as u32;
    (n > 1).then_some(n)
}

/// croner's message without its type prefix, lower case first.
fn describe(e: &croner::errors::CronError) -> String {
    let text = e.to_string();
    let text = text
        .split_once(": ")
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or(text);
    let text = text.trim_end_matches('.');
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Looks up an IANA time zone name; the error suggests close names.
pub fn zone(name: &str) -> Result<TimeZone, String> {
    TimeZone::get(name).map_err(|_| {
        let db = jiff::tz::db();
        let lower = name.to_lowercase();
        let best = db
            .available()
            .map(|n| {
                let n = n.as_str().to_owned();
                (strsim::jaro_winkler(&lower, &n.to_lowercase()), n)
            })
            .filter(|(score, _)| *score > 0.85)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        match best {
            Some((_, n)) => format!("`{name}` is not a known IANA time zone; did you mean `{n}`?"),
            None => format!("`{name}` is not a known IANA time zone"),
        }
    })
}

impl Schedule {
    /// `timezone`: an IANA name, or `None` for the machine's local zone.
    pub fn new(expr: &str, timezone: Option<&str>) -> Result<Schedule, String> {
        let cron = parse_cron(expr)?;
        let (tz, local) = match timezone {
            Some(name) => (zone(name)?, false),
            None => (TimeZone::system(), true),
        };
        let zone_name = match tz.iana_name() {
            Some(n) => n.to_owned(),
            None if local => "local".to_owned(),
            None => timezone.unwrap_or("local").to_owned(),
        };
        Ok(Schedule {
            cron,
            tz,
            zone_name,
            local,
        })
    }

    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }

    pub fn is_local_zone(&self) -> bool {
        self.local
    }

    fn zoned(&self, ms: Millis) -> Option<Zoned> {
        Timestamp::from_millisecond(ms)
            .ok()
            .map(|t| t.to_zoned(self.tz.clone()))
    }

    /// The first occurrence strictly after `t`.
    pub fn next_after(&self, t: Millis) -> Option<Millis> {
        // Occurrences are whole seconds: the first one after the second holding `t`.
        let start = self.zoned(t.div_euclid(1000) * 1000)?;
        self.cron
            .find_next_occurrence(&start, false)
            .ok()
            .map(|z| z.timestamp().as_millisecond())
    }

    /// The latest occurrence at or before `t`.
    pub fn latest_at_or_before(&self, t: Millis) -> Option<Millis> {
        let start = self.zoned(t.div_euclid(1000) * 1000)?;
        self.cron
            .find_previous_occurrence(&start, true)
            .ok()
            .map(|z| z.timestamp().as_millisecond())
    }

    /// The next `n` occurrences after `t`.
    pub fn upcoming(&self, t: Millis, n: usize) -> Vec<Millis> {
        let mut out = Vec::with_capacity(n);
        let mut at = t;
        while out.len() < n {
            match self.next_after(at) {
                Some(next) => {
                    out.push(next);
                    at = next;
                }
                None => break,
            }
        }
        out
    }

    /// `t` in the schedule's zone, RFC 9557 (`2026-03-29T03:00:00+02:00[Europe/Berlin]`).
    pub fn local_rfc9557(&self, t: Millis) -> String {
        self.zoned(t).map(|z| z.to_string()).unwrap_or_default()
    }

    /// `t` in the schedule's zone for people: `2026-03-29 03:00:00 CEST`.
    pub fn local_short(&self, t: Millis) -> String {
        self.zoned(t)
            .map(|z| z.strftime("%Y-%m-%d %H:%M:%S %Z").to_string())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{parse, rfc3339};

    fn at(s: &str) -> Millis {
        parse(s).expect(s)
    }

    #[test]
    fn a_bad_expression_names_its_field() {
        let e = parse_cron("61 * * * *").expect_err("bad");
        assert!(e.starts_with("field 1 (minute) `61` is not valid"), "{e}");
        assert!(e.contains("0-59"), "{e}");
        let e = parse_cron("0 9 * * MON-XYZ").expect_err("bad");
        assert!(e.contains("field 5 (day-of-week)"), "{e}");
        let e = parse_cron("0 0 25 * * *").expect_err("bad");
        assert!(e.starts_with("field 3 (hour) `25`"), "{e}");
        let e = parse_cron("every day").expect_err("bad");
        assert!(e.starts_with("it has 2 fields"), "{e}");
        let e = parse_cron("@sometimes").expect_err("bad");
        assert!(e.contains("nickname"), "{e}");
        for ok in [
            "0 9 * * 1-5",
            "*/10 * * * * *",
            "@daily",
            "0 0 0 1 1 * 2030",
        ] {
            assert!(parse_cron(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_schedule_that_never_fires_names_its_fields() {
        let now = at("2026-01-02T03:04:05Z");
        let e = never_fires("0 0 30 2 *", now).expect("never");
        assert!(
            e.contains("field 3 (day-of-month) `30`") && e.contains("field 4 (month) `2`"),
            "{e}"
        );
        let e = never_fires("0 0 0 1 1 * 2020", now).expect("past");
        assert!(
            e.contains("field 7 (year) `2020` has no date from now on"),
            "{e}"
        );
        for fires in ["0 0 29 2 *", "0 9 * * 1-5", "@yearly", "*/5 * * * * *"] {
            assert_eq!(never_fires(fires, now), None, "{fires}");
        }
    }

    #[test]
    fn schedules_more_frequent_than_a_minute_are_counted() {
        assert_eq!(per_minute("* * * * * *"), Some(60));
        assert_eq!(per_minute("*/10 * * * * *"), Some(6));
        assert_eq!(per_minute("0,30 * 3 * * *"), Some(2));
        assert_eq!(per_minute("0 * * * * *"), None);
        assert_eq!(per_minute("* * * * *"), None);
        assert_eq!(per_minute("@hourly"), None);
    }

    #[test]
    fn unknown_zones_get_a_suggestion() {
        let e = zone("Europe/Berln").expect_err("bad");
        assert!(e.contains("`Europe/Berlin`"), "{e}");
        assert!(zone("Europe/Berlin").is_ok());
        assert!(zone("Mars/Olympus_Mons").is_err());
    }

    #[test]
    fn occurrences_in_a_zone() {
        let s = Schedule::new("0 9 * * 1-5", Some("Europe/Berlin")).expect("schedule");
        assert_eq!(s.zone_name(), "Europe/Berlin");
        // Friday 2026-01-02 10:00 UTC: the next weekday 09:00 CET is Monday 08:00 UTC.
        let next = s.next_after(at("2026-01-02T10:00:00Z")).expect("next");
        assert_eq!(rfc3339(next), "2026-01-05T08:00:00.000Z");
        assert_eq!(s.local_short(next), "2026-01-05 09:00:00 CET");
        assert_eq!(
            s.local_rfc9557(next),
            "2026-01-05T09:00:00+01:00[Europe/Berlin]"
        );
        // Strictly after, and at or before, an occurrence itself.
        assert_eq!(
            s.next_after(next).map(rfc3339).as_deref(),
            Some("2026-01-06T08:00:00.000Z")
        );
        assert_eq!(s.latest_at_or_before(next), Some(next));
        assert_eq!(
            s.latest_at_or_before(next - 1).map(rfc3339).as_deref(),
            Some("2026-01-02T08:00:00.000Z")
        );
        // A fraction of a second past an occurrence is still after it.
        assert_eq!(
            s.next_after(next + 500).map(rfc3339).as_deref(),
            Some("2026-01-06T08:00:00.000Z")
        );
    }

    #[test]
    fn spring_forward_runs_a_fixed_time_job_once_after_the_gap() {
        // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
        let s = Schedule::new("30 2 * * *", Some("Europe/Berlin")).expect("schedule");
        let days: Vec<String> = s
            .upcoming(at("2026-03-27T12:00:00Z"), 4)
            .into_iter()
            .map(|t| s.local_short(t))
            .collect();
        assert_eq!(
            days,
            [
                "2026-03-28 02:30:00 CET",
                "2026-03-29 03:00:00 CEST",
                "2026-03-30 02:30:00 CEST",
                "2026-03-31 02:30:00 CEST"
            ]
        );
        // Every 30 minutes: the times in the gap are skipped, nothing runs twice.
        let s = Schedule::new("*/30 * * * *", Some("Europe/Berlin")).expect("schedule");
        let night: Vec<String> = s
            .upcoming(at("2026-03-29T00:15:00Z"), 3)
            .into_iter()
            .map(|t| s.local_short(t))
            .collect();
        assert_eq!(
            night,
            [
                "2026-03-29 01:30:00 CET",
                "2026-03-29 03:00:00 CEST",
                "2026-03-29 03:30:00 CEST"
            ]
        );
    }

    #[test]
    fn fall_back_runs_a_fixed_time_job_once_and_a_wildcard_job_in_both_passes() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 happens twice.
        let s = Schedule::new("30 2 * * *", Some("Europe/Berlin")).expect("schedule");
        let runs: Vec<String> = s
            .upcoming(at("2026-10-24T12:00:00Z"), 2)
            .into_iter()
            .map(|t| format!("{} = {}", s.local_short(t), rfc3339(t)))
            .collect();
        assert_eq!(
            runs,
            [
                "2026-10-25 02:30:00 CEST = 2026-10-25T00:30:00.000Z",
                "2026-10-26 02:30:00 CET = 2026-10-26T01:30:00.000Z"
            ]
        );
        let s = Schedule::new("*/30 * * * *", Some("Europe/Berlin")).expect("schedule");
        let night: Vec<String> = s
            .upcoming(at("2026-10-24T23:45:00Z"), 5)
            .into_iter()
            .map(|t| format!("{} = {}", s.local_short(t), rfc3339(t)))
            .collect();
        assert_eq!(
            night,
            [
                "2026-10-25 02:00:00 CEST = 2026-10-25T00:00:00.000Z",
                "2026-10-25 02:30:00 CEST = 2026-10-25T00:30:00.000Z",
                "2026-10-25 02:00:00 CET = 2026-10-25T01:00:00.000Z",
                "2026-10-25 02:30:00 CET = 2026-10-25T01:30:00.000Z",
                "2026-10-25 03:00:00 CET = 2026-10-25T02:00:00.000Z"
            ]
        );
        // Backwards through the repeated hour gives the same instants.
        let back = s.latest_at_or_before(at("2026-10-25T01:59:59Z"));
        assert_eq!(
            back.map(rfc3339).as_deref(),
            Some("2026-10-25T01:30:00.000Z")
        );
    }
}
