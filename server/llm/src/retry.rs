//! Retry policy: exponential backoff with full jitter.

use std::time::Duration;

use rand::Rng;

/// How [`crate::LlmClient`] retries retryable failures.
///
/// Full jitter (a uniform wait between zero and the exponential ceiling) spreads the retries of
/// many concurrent workflows hitting the same rate limit, instead of having them retry in lockstep.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Total attempts including the first one; 1 disables retries.
    pub max_attempts: u32,
    /// Ceiling of the first backoff.
    pub initial_backoff: Duration,
    /// Ceiling of any backoff (a provider's Retry-After may still ask for longer).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 4, initial_backoff: Duration::from_millis(250), max_backoff: Duration::from_secs(8) }
    }
}

impl RetryPolicy {
    /// A policy that makes a single attempt.
    pub fn no_retries() -> Self {
        Self { max_attempts: 1, ..Self::default() }
    }

    /// The upper bound of the wait after failed attempt number `attempt` (1-based):
    /// `min(max_backoff, initial_backoff * 2^(attempt-1))`.
    pub fn backoff_ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(30);
        let ceiling = self.initial_backoff.saturating_mul(1u32 << exponent);
        ceiling.min(self.max_backoff)
    }

    /// A random wait in `[0, backoff_ceiling(attempt)]` (full jitter).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.backoff_ceiling(attempt);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }

    /// The wait before the next attempt: the jittered backoff, but at least what the provider asked for.
    pub fn wait_before_retry(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let jittered = self.backoff(attempt);
        match retry_after {
            Some(asked) => jittered.max(asked),
            None => jittered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_policy() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts, 4);
        assert_eq!(p.initial_backoff, Duration::from_millis(250));
        assert_eq!(p.max_backoff, Duration::from_secs(8));
    }

    #[test]
    fn ceiling_grows_exponentially_and_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff_ceiling(1), Duration::from_millis(250));
        assert_eq!(p.backoff_ceiling(2), Duration::from_millis(500));
        assert_eq!(p.backoff_ceiling(3), Duration::from_secs(1));
        assert_eq!(p.backoff_ceiling(6), Duration::from_secs(8));
        assert_eq!(p.backoff_ceiling(100), Duration::from_secs(8));
    }

    #[test]
    fn jittered_backoff_stays_within_bounds() {
        let p = RetryPolicy::default();
        for attempt in 1..8 {
            for _ in 0..200 {
                let d = p.backoff(attempt);
                assert!(d <= p.backoff_ceiling(attempt), "attempt {attempt}: {d:?}");
            }
        }
        // Full jitter actually varies.
        let samples: std::collections::HashSet<_> = (0..50).map(|_| p.backoff(4)).collect();
        assert!(samples.len() > 1);
    }

    #[test]
    fn retry_after_is_a_floor() {
        let p = RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        };
        for _ in 0..50 {
            assert!(p.wait_before_retry(1, Some(Duration::from_secs(1))) >= Duration::from_secs(1));
        }
        assert!(p.wait_before_retry(1, None) <= Duration::from_millis(2));
    }

    #[test]
    fn zero_backoff_is_fine() {
        let p = RetryPolicy { max_attempts: 2, initial_backoff: Duration::ZERO, max_backoff: Duration::ZERO };
        assert_eq!(p.backoff(1), Duration::ZERO);
    }
}
