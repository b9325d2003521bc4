//! Reading the counts and durations of one table of the configuration file, each within the
//! bounds its call site gives: the one place a count or a duration is checked, so every such
//! error names the key in full (`http.body_grace`), where the file is, and the bounds.

use std::fmt::Display;
use std::ops::{RangeBounds, RangeFrom, RangeInclusive};
use std::time::Duration;

use super::{ConfigError, Origin};

/// The durations a setting takes, and how a message says so.
#[derive(Debug)]
pub(super) struct Durations {
    pub(super) range: RangeInclusive<Duration>,
    /// The range and an example, as they follow "is not a duration" ("between 1m and 30d,
    /// such as 24h").
    pub(super) shown: &'static str,
}

/// The counts a setting takes (`1..`, `1..=64`), and how a message says so.
pub(super) trait Counts<T>: RangeBounds<T> {
    fn shown(&self) -> String;
}

impl<T: Display> Counts<T> for RangeFrom<T> {
    fn shown(&self) -> String {
        format!("at least {}", self.start)
    }
}

impl<T: Display> Counts<T> for RangeInclusive<T> {
    fn shown(&self) -> String {
        format!("{} to {}", self.start(), self.end())
    }
}

/// One table of the file: `name` (`http`; empty for the top level) and where it was read from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Table<'a> {
    name: &'a str,
    origin: &'a Origin,
}

impl<'a> Table<'a> {
    pub(super) fn new(name: &'a str, origin: &'a Origin) -> Self {
        Table { name, origin }
    }

    fn error(&self, key: &str, problem: String) -> ConfigError {
        let setting = if self.name.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.name)
        };
        ConfigError::new(setting, self.origin.clone(), problem)
    }

    /// The count `key` was given, if it was, refused unless it is within `bounds`. It is read as
    /// written (a signed number, say) so that a value of the wrong sign is refused here, naming
    /// the key, like any other out of bounds.
    pub(super) fn count<V, T>(
        &self,
        key: &str,
        value: Option<V>,
        bounds: impl Counts<T>,
    ) -> Result<Option<T>, ConfigError>
    where
        T: TryFrom<V> + PartialOrd,
    {
        value
            .map(|value| {
                T::try_from(value)
                    .ok()
                    .filter(|count| bounds.contains(count))
                    .ok_or_else(|| self.error(key, format!("must be {}", bounds.shown())))
            })
            .transpose()
    }

    /// The duration `key` was given, if it was, refused unless it parses and is within `bounds`.
    pub(super) fn duration(
        &self,
        key: &str,
        text: Option<&str>,
        bounds: &Durations,
    ) -> Result<Option<Duration>, ConfigError> {
        text.map(|text| {
            // Dropped on purpose: the message names the setting and the form it takes.
            humantime::parse_duration(text)
                .ok()
                .filter(|duration| bounds.range.contains(duration))
                .ok_or_else(|| {
                    self.error(key, format!("`{text}` is not a duration {}", bounds.shown))
                })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_key_in_full_and_the_bounds() {
        let origin = Origin::Default;
        let http = Table::new("http", &origin);
        assert_eq!(
            http.count::<i64, usize>("n", Some(3), 1..=4).unwrap(),
            Some(3)
        );
        assert_eq!(http.count::<usize, usize>("n", None, 1..).unwrap(), None);
        for (value, problem) in [
            (0, "must be 1 to 4"),
            (5, "must be 1 to 4"),
            (-1, "must be 1 to 4"),
        ] {
            let error = http
                .count::<i64, usize>("n", Some(value), 1..=4)
                .unwrap_err();
            assert_eq!(
                (error.setting.as_str(), error.problem.as_str()),
                ("http.n", problem)
            );
        }
        let error = http.count::<u32, u32>("n", Some(0), 1..).unwrap_err();
        assert_eq!(error.problem, "must be at least 1");

        let top = Table::new("", &origin);
        let ttls = Durations {
            range: Duration::from_secs(60)..=Duration::from_secs(3600),
            shown: "between 1m and 1h, such as 5m",
        };
        assert_eq!(
            top.duration("ttl", Some("5m"), &ttls).unwrap(),
            Some(Duration::from_secs(300))
        );
        for text in ["30s", "2h", "soon"] {
            let error = top.duration("ttl", Some(text), &ttls).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "invalid setting `ttl` (default): `{text}` is not a duration between 1m and 1h, such as 5m"
                )
            );
        }
    }
}
