//! Deterministic fault injection: one ChaCha8 draw per API request (in
//! arrival order) decides 429 / 503, one draw per node pool create decides a
//! stockout, and an optional token bucket limits writes per second.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Which faults the simulator injects. All rates are probabilities in `[0, 1]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    /// Probability that any API request gets 429 RESOURCE_EXHAUSTED (rateLimitExceeded).
    pub rate_429: f64,
    /// Probability that any API request gets 503 UNAVAILABLE.
    pub rate_503: f64,
    /// Reject a GKE write on a cluster while another operation RUNs on it
    /// (400 FAILED_PRECONDITION "Cluster is running incompatible operation …").
    pub incompatible_operation: bool,
    /// Probability that a node pool create operation ends in a GCE stockout.
    pub stockout_rate: f64,
    /// Writes per second (token bucket, burst of one second); excess writes get 429.
    pub write_rate_limit: Option<f64>,
}

/// What the per-request draw decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestFault {
    None,
    RateLimited,
    Unavailable,
}

/// The seeded fault state.
#[derive(Debug)]
pub(crate) struct Faults {
    pub config: FaultConfig,
    rng: ChaCha8Rng,
    bucket: Option<TokenBucket>,
}

impl Faults {
    pub fn new(config: FaultConfig, seed: u64) -> Self {
        let bucket = config.write_rate_limit.map(TokenBucket::new);
        Self {
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            bucket,
        }
    }

    /// Replaces the configuration (keeps the random stream position).
    pub fn set(&mut self, config: FaultConfig) {
        self.bucket = config.write_rate_limit.map(TokenBucket::new);
        self.config = config;
    }

    /// Exactly one draw per API request, whatever the rates.
    pub fn draw_request(&mut self) -> RequestFault {
        let u: f64 = self.rng.random();
        if u < self.config.rate_429 {
            RequestFault::RateLimited
        } else if u < self.config.rate_429 + self.config.rate_503 {
            RequestFault::Unavailable
        } else {
            RequestFault::None
        }
    }

    /// Exactly one draw per node pool create.
    pub fn draw_stockout(&mut self) -> bool {
        let u: f64 = self.rng.random();
        u < self.config.stockout_rate
    }

    /// Takes a write token; false when the write rate limit is exceeded.
    pub fn take_write_token(&mut self, now: Instant) -> bool {
        match &mut self.bucket {
            Some(b) => b.take(now),
            None => true,
        }
    }
}

/// A token bucket refilled at `rate` tokens/second, holding at most
/// `max(rate, 1)` tokens.
#[derive(Debug)]
struct TokenBucket {
    rate: f64,
    capacity: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    fn new(rate: f64) -> Self {
        let capacity = rate.max(1.0);
        Self {
            rate: rate.max(0.0),
            capacity,
            tokens: capacity,
            last: None,
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(self.capacity);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_decisions() {
        let cfg = FaultConfig {
            rate_429: 0.3,
            rate_503: 0.2,
            ..Default::default()
        };
        let mut a = Faults::new(cfg.clone(), 7);
        let mut b = Faults::new(cfg, 7);
        let da: Vec<_> = (0..64).map(|_| a.draw_request()).collect();
        let db: Vec<_> = (0..64).map(|_| b.draw_request()).collect();
        assert_eq!(da, db);
        assert!(da.contains(&RequestFault::RateLimited));
        assert!(da.contains(&RequestFault::Unavailable));
        assert!(da.contains(&RequestFault::None));
    }

    #[test]
    fn bucket_limits_burst_then_refills() {
        let mut f = Faults::new(
            FaultConfig {
                write_rate_limit: Some(2.0),
                ..Default::default()
            },
            1,
        );
        let t0 = Instant::now();
        assert!(f.take_write_token(t0));
        assert!(f.take_write_token(t0));
        assert!(!f.take_write_token(t0));
        assert!(f.take_write_token(t0 + std::time::Duration::from_millis(600)));
    }
}
