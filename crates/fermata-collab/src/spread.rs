//! Spreading a room's periodic writes: a deadline that comes a fixed time after a room's first
//! edit would come at the same moment for every room opened together (after a restart, or when
//! a class starts typing), and their writes (history sessions, search indexing) would reach the
//! database in one wave that stalls everyone's commits behind it. Each room draws its own
//! period once, between the fixed one and half as much again, and the waves spread out.

use std::time::Duration;

use rand::Rng;

/// `period` stretched by a random share of up to a half, drawn anew on each call.
pub(crate) fn spread(period: Duration) -> Duration {
    period + period.mul_f64(rand::thread_rng().gen_range(0.0..0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spread_period_stays_within_half_as_much_again() {
        let period = Duration::from_secs(10);
        let drawn: Vec<Duration> = (0..200).map(|_| spread(period)).collect();
        assert!(drawn.iter().all(|d| *d >= period && *d < period * 3 / 2));
        assert!(
            drawn.iter().any(|d| *d != drawn[0]),
            "every room drew the same"
        );
    }
}
