//! Times as the pages show them: told relative to the moment the page is drawn for ("just now",
//! "5 minutes ago", "yesterday", "3 days ago", "in 2 hours", then a date), inside a `<time>`
//! element whose `datetime` is the exact instant (RFC 3339) and whose `title` says it in full, in
//! UTC. Worked out on the server from the request's own time, so no page needs a script for it.
//!
//! The moment a page is drawn for is an input of its render function like everything else it
//! shows (a handler reads the clock once, as it gathers the page), so a test draws a page for a
//! fixed moment.

use fermata_store::UnixMillis;
use maud::{Markup, html};

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// `at` shown relative to `now`: a `<time>` element carrying the exact instant.
pub(crate) fn time(at: UnixMillis, now: UnixMillis) -> Markup {
    html! {
        time datetime=(at.to_string()) title=(exact(at)) { (relative(at, now)) }
    }
}

/// An instant the page received as RFC 3339 text (as the schema views carry them) shown like
/// [`time`]; text that is not such an instant is shown as it is.
pub(crate) fn time_text(at: &str, now: UnixMillis) -> Markup {
    match parse_rfc3339(at) {
        Some(instant) => time(instant, now),
        None => html! { (at) },
    }
}

/// How long before or after `now` the instant `at` is, in words: minutes within the hour, hours
/// within the day, "yesterday" or "tomorrow" within two days, days within the week, and the date
/// beyond (with its year).
pub(crate) fn relative(at: UnixMillis, now: UnixMillis) -> String {
    let delta = now.0.saturating_sub(at.0);
    let past = delta >= 0;
    let span = delta.saturating_abs();
    let counted = |count: i64, unit: &str| {
        let unit = if count == 1 {
            unit.to_owned()
        } else {
            format!("{unit}s")
        };
        if past {
            format!("{count} {unit} ago")
        } else {
            format!("in {count} {unit}")
        }
    };
    if span < MINUTE {
        "just now".to_owned()
    } else if span < HOUR {
        counted(span / MINUTE, "minute")
    } else if span < DAY {
        counted(span / HOUR, "hour")
    } else if span < 2 * DAY {
        if past { "yesterday" } else { "tomorrow" }.to_owned()
    } else if span < 7 * DAY {
        counted(span / DAY, "day")
    } else {
        let (year, month, day) = civil(at);
        format!("{day} {} {year}", &MONTHS[month - 1][..3])
    }
}

/// `at` in full, in UTC: "14 November 2023, 22:13:20 UTC".
pub(crate) fn exact(at: UnixMillis) -> String {
    let (year, month, day) = civil(at);
    let seconds = at.0.rem_euclid(DAY) / SECOND;
    format!(
        "{day} {} {year}, {:02}:{:02}:{:02} UTC",
        MONTHS[month - 1],
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// The UTC calendar date of `at`: year, month (1 to 12) and day.
fn civil(at: UnixMillis) -> (i64, usize, i64) {
    // Howard Hinnant's days-to-civil, counting eras of 400 years from 0000-03-01.
    let days = at.0.div_euclid(DAY) + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, usize::try_from(month).unwrap_or(1), day)
}

/// Days from 1970-01-01 to the UTC date `year`-`month`-`day`: the inverse of [`civil`].
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let shifted_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// An instant written `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, as [`UnixMillis`] displays itself.
fn parse_rfc3339(text: &str) -> Option<UnixMillis> {
    let text = text.strip_suffix('Z')?;
    let (date, clock) = text.split_once('T')?;
    let mut date = date.splitn(3, '-');
    let year: i64 = date.next()?.parse().ok()?;
    let month: i64 = date.next()?.parse().ok()?;
    let day: i64 = date.next()?.parse().ok()?;
    let (clock, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut clock = clock.splitn(3, ':');
    let hour: i64 = clock.next()?.parse().ok()?;
    let minute: i64 = clock.next()?.parse().ok()?;
    let second: i64 = clock.next()?.parse().ok()?;
    let millis: i64 = if fraction.is_empty() {
        0
    } else if fraction.bytes().all(|b| b.is_ascii_digit()) {
        format!("{fraction:0<3}")[..3].parse().ok()?
    } else {
        return None;
    };
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour < 24
        && minute < 60
        && second < 61;
    if !valid {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(UnixMillis(
        days * DAY + hour * HOUR + minute * MINUTE + second * SECOND + millis,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2023-11-14T22:13:20.123Z.
    const NOW: UnixMillis = UnixMillis(1_700_000_000_123);

    fn ago(millis: i64) -> String {
        relative(UnixMillis(NOW.0 - millis), NOW)
    }

    #[test]
    fn a_time_is_told_in_the_largest_unit_that_fits() {
        let cases = [
            (0, "just now"),
            (59 * SECOND, "just now"),
            (MINUTE, "1 minute ago"),
            (5 * MINUTE + 59 * SECOND, "5 minutes ago"),
            (59 * MINUTE, "59 minutes ago"),
            (HOUR, "1 hour ago"),
            (23 * HOUR + 59 * MINUTE, "23 hours ago"),
            (DAY, "yesterday"),
            (2 * DAY - 1, "yesterday"),
            (2 * DAY, "2 days ago"),
            (7 * DAY - 1, "6 days ago"),
            (7 * DAY, "7 Nov 2023"),
            (400 * DAY, "10 Oct 2022"),
        ];
        for (millis, expected) in cases {
            assert_eq!(ago(millis), expected, "{millis} ms ago");
        }
    }

    #[test]
    fn a_time_to_come_is_told_the_other_way() {
        let cases = [
            (-30 * SECOND, "just now"),
            (-MINUTE, "in 1 minute"),
            (-3 * HOUR, "in 3 hours"),
            (-DAY - HOUR, "tomorrow"),
            (-3 * DAY, "in 3 days"),
            (-30 * DAY, "14 Dec 2023"),
        ];
        for (millis, expected) in cases {
            assert_eq!(ago(millis), expected, "{millis} ms ago");
        }
    }

    #[test]
    fn the_exact_time_is_in_utc_in_words() {
        assert_eq!(exact(NOW), "14 November 2023, 22:13:20 UTC");
        assert_eq!(exact(UnixMillis(0)), "1 January 1970, 00:00:00 UTC");
        // A leap day, and the last millisecond of a year.
        assert_eq!(
            exact(UnixMillis(951_782_400_000)),
            "29 February 2000, 00:00:00 UTC"
        );
        assert_eq!(
            exact(UnixMillis(1_704_067_199_999)),
            "31 December 2023, 23:59:59 UTC"
        );
    }

    #[test]
    fn the_element_carries_the_instant_and_its_full_time() {
        let html = time(UnixMillis(NOW.0 - 3 * DAY), NOW).into_string();
        assert_eq!(
            html,
            "<time datetime=\"2023-11-11T22:13:20.123Z\" \
             title=\"11 November 2023, 22:13:20 UTC\">3 days ago</time>"
        );
    }

    #[test]
    fn rfc3339_text_is_read_back_and_anything_else_is_shown_as_it_is() {
        for millis in [
            0,
            951_782_400_000,
            NOW.0,
            1_704_067_199_999,
            4_102_444_800_000,
        ] {
            let at = UnixMillis(millis);
            assert_eq!(parse_rfc3339(&at.to_string()), Some(at), "{at}");
        }
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20Z"),
            Some(UnixMillis(1_700_000_000_000))
        );
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.5Z"),
            Some(UnixMillis(1_700_000_000_500))
        );
        for text in [
            "",
            "-",
            "2023-11-14",
            "2023-13-01T00:00:00Z",
            "2023-11-14T22:13:20+01:00",
        ] {
            assert_eq!(parse_rfc3339(text), None, "{text:?}");
        }
        assert_eq!(time_text("soon", NOW).into_string(), "soon");
        assert!(
            time_text("2023-11-14T22:08:20.123Z", NOW)
                .into_string()
                .ends_with(">5 minutes ago</time>")
        );
    }
}
