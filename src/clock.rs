//! Wall-clock time, pinnable for tests and reproducible pipelines.
//!
//! `AXOCOATL_NOW` pins the clock: an RFC 3339 UTC time (`2026-01-02T03:04:05Z`) or
//! milliseconds since the epoch. Every reading of a pinned clock returns the same instant.

use axocoatl_store::civil::{civil_from_days, days_from_civil};
use std::time::{SystemTime, UNIX_EPOCH};

pub use axocoatl_store::ledger::record::Millis;

pub const NOW_ENV: &str = "AXOCOATL_NOW";

/// Milliseconds since the Unix epoch.
pub fn now() -> Millis {
    if let Some(pinned) = std::env::var(NOW_ENV).ok().and_then(|v| parse(&v)) {
        return pinned;
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as Millis)
        .unwrap_or(0)
}

/// Parses milliseconds or `YYYY-MM-DDTHH:MM:SS[.fff]Z`.
pub fn parse(s: &str) -> Option<Millis> {
    let s = s.trim();
    if let Ok(ms) = s.parse::<Millis>() {
        return Some(ms);
    }
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = s.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-');
    let (y, m, day) = (
        d.next()?.parse::<i64>().ok()?,
        d.next()?.parse::<i64>().ok()?,
        d.next()?.parse::<i64>().ok()?,
    );
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':');
    let (hh, mm, ss) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    Some(((days_from_civil(y, m, day) * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339(ms: Millis) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let secs = rem / 1000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        rem % 1000
    )
}

/// `YYYY-MM-DD` (UTC).
pub fn date(ms: Millis) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(86_400_000));
    format!("{y:04}-{m:02}-{d:02}")
}

/// A short human form: `YYYY-MM-DD HH:MM` (UTC).
pub fn short(ms: Millis) -> String {
    // Written digit by digit: a listing of 1,000 turns formatted each time twice (the full
    // RFC 3339 form, then its parts), a tenth of `history -s`.
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, m, d) = civil_from_days(days);
    let (hh, mm) = (rem / 3_600_000, rem / 60_000 % 60);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}");
    }
    let mut out = *b"0000-00-00 00:00";
    for (at, value, width) in [(0, y, 4), (5, m, 2), (8, d, 2), (11, hh, 2), (14, mm, 2)] {
        let mut v = value;
        for i in (at..at + width).rev() {
            out[i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            "1970-01-01T00:00:00.000Z",
            "2026-11-29T21:18:52.123Z",
            "2000-02-29T23:59:59.999Z",
        ] {
            let ms = parse(s).expect(s);
            assert_eq!(rfc3339(ms), s);
        }
        assert_eq!(
            parse("2026-01-02T03:04:05Z"),
            parse("2026-01-02T03:04:05.000Z")
        );
        assert_eq!(date(0), "1970-01-01");
        for ms in [
            0,
            59_999,
            60_000,
            1_767_225_600_000,
            253_402_300_799_999,
            -1,
            -86_400_001,
        ] {
            let full = rfc3339(ms);
            assert_eq!(
                short(ms),
                format!("{} {}", &full[..10], &full[11..16]),
                "{ms}"
            );
        }
        assert_eq!(short(253_402_300_800_000), "10000-01-01 00:00");
        assert_eq!(parse("86400000"), Some(86_400_000));
        assert_eq!(parse("2026-13-01T00:00:00Z"), None);
    }
}
