//! Google Cloud REST clients: GKE (container v1) node pools and operations,
//! Compute Engine (compute v1) resource policies and operations.
//!
//! One [`CloudClient`] (cheap to clone) holds the HTTP client, endpoints,
//! token source, retry and poll policies and request counters. Calls are
//! grouped by API: [`CloudClient::gke`] and [`CloudClient::compute`].
//! Every request goes through one path (`http.rs`) that retries 429, 5xx,
//! transport errors and GKE's "incompatible operation" with jittered
//! exponential backoff; compute writes carry a `requestId` that stays the
//! same across retries. Operations that finish with an error are returned as
//! [`CloudError::OperationFailed`], never as success.

pub mod api;
pub mod auth;
pub mod compute;
pub mod endpoints;
pub mod error;
/// The in-memory recording fake (unit tests, and integration tests through
/// the `test-support` feature; not in the product).
#[cfg(any(test, feature = "test-support"))]
pub mod fake;
pub mod gke;
mod http;
#[path = "list/tests.rs"]
mod list_tests;
mod poller;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use api::{Cloud, ComputeService, GkeService};

pub use auth::{AccessTokenFile, GcpAuth, NoAuth, StaticToken, TokenSource};
pub use compute::{ComputeApi, ComputeScope};
pub use endpoints::{API_ENDPOINT_ENV, Endpoints};
pub use error::{CloudError, STOCKOUT_CODES};
pub use gke::{ClusterRef, GkeApi};
pub use http::{RequestObserver, set_request_observer};

use http::Access;

/// Retries of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = no retries).
    pub max_attempts: u32,
    /// First backoff delay (before jitter).
    pub min_delay: Duration,
    /// Largest backoff delay (before jitter).
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 8,
            min_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Polling of long-running operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollPolicy {
    /// Least delay between two lists of a location's operations while
    /// operations there are waited on. Between the two bounds, the delay is
    /// 10 % of the youngest waiter's age ([`poll_delay`], `poller.rs`).
    pub min_interval: Duration,
    /// Largest delay between polls.
    pub max_interval: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        PollPolicy {
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(30),
        }
    }
}

impl PollPolicy {
    /// Millisecond polling for tests against the simulator.
    pub fn fast_for_tests() -> PollPolicy {
        PollPolicy {
            min_interval: Duration::from_millis(5),
            max_interval: Duration::from_millis(50),
        }
    }
}

/// How to build a [`CloudClient`].
#[derive(Clone)]
pub struct ClientOptions {
    /// `--api-endpoint` (env `SLICECTL_API_ENDPOINT`): one server for both APIs.
    pub api_endpoint: Option<String>,
    /// Retries of each request.
    pub retry: RetryPolicy,
    /// Operation polling.
    pub poll: PollPolicy,
    /// Token source; `None` chooses: `NoAuth` for a loopback `api_endpoint`,
    /// otherwise `GcpAuth` (discovered lazily on the first call).
    pub token_source: Option<Arc<dyn TokenSource>>,
    /// `--allow-insecure-http` (env `SLICECTL_ALLOW_INSECURE_HTTP`): allow a
    /// token source that sends credentials with a plain `http` `api_endpoint`
    /// that is not loopback. Without it [`CloudClient::new`] refuses, so the
    /// access token never travels unencrypted by accident.
    pub allow_insecure_http: bool,
    /// `User-Agent` header.
    pub user_agent: String,
    /// HTTP timeout of an ordinary request.
    pub request_timeout: Duration,
    /// `maxResults` of compute list calls (Google's maximum is 500).
    pub page_size: u32,
    /// Client-side limit on writes per project; `None`: unlimited.
    pub write_rate: Option<WriteRate>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            api_endpoint: None,
            retry: RetryPolicy::default(),
            poll: PollPolicy::default(),
            token_source: None,
            allow_insecure_http: false,
            user_agent: format!("slicectl/{}", env!("CARGO_PKG_VERSION")),
            request_timeout: Duration::from_secs(60),
            page_size: 500,
            write_rate: Some(WriteRate::default()),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("api_endpoint", &self.api_endpoint)
            .field("retry", &self.retry)
            .field("poll", &self.poll)
            .field(
                "token_source",
                &self.token_source.as_ref().map(|_| "<injected>"),
            )
            .field("allow_insecure_http", &self.allow_insecure_http)
            .field("user_agent", &self.user_agent)
            .field("request_timeout", &self.request_timeout)
            .field("page_size", &self.page_size)
            .field("write_rate", &self.write_rate)
            .finish()
    }
}

/// Request counters (every HTTP attempt counts, retries included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestStats {
    /// GETs, lists and operation polls.
    pub reads: u64,
    /// Creates, updates, deletes.
    pub writes: u64,
    /// Attempts that were retries of an earlier failed attempt.
    pub retries: u64,
}

#[derive(Debug, Default)]
struct Counters {
    reads: AtomicU64,
    writes: AtomicU64,
    retries: AtomicU64,
}

impl Counters {
    fn record(&self, access: Access) {
        match access {
            Access::Read => self.reads.fetch_add(1, Ordering::Relaxed),
            Access::Write => self.writes.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn record_retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }
}

pub(crate) struct Inner {
    http: reqwest::Client,
    endpoints: Endpoints,
    tokens: Arc<dyn TokenSource>,
    retry: RetryPolicy,
    poll: PollPolicy,
    page_size: u32,
    stats: Counters,
    writes: Option<governor::DefaultKeyedRateLimiter<String>>,
    /// Waiters on GKE operations, one list per location per tick.
    gke_ops: poller::Poller<crate::resource::gke::Operation>,
    /// Waiters on Compute operations, one list per zone, region or global
    /// scope per tick.
    compute_ops: poller::Poller<crate::resource::compute::Operation>,
}

/// The client-side limit on writes per project: a token bucket refilled at
/// `per_second`, holding at most `burst` (every write attempt, retries
/// included, takes a token).
///
/// The default, 20 writes/s with bursts of 40, stays well inside GKE's
/// documented project rate limit — "The default rate limit for the
/// Kubernetes Engine API is 3000 requests per min" (50/s, reads and writes
/// together; <https://cloud.google.com/kubernetes-engine/quotas>) — leaving
/// room for reads and for other clients of the project, and inside Compute
/// Engine's per-project mutation rate quotas
/// (<https://cloud.google.com/compute/api-quota>).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteRate {
    /// Tokens added per second.
    pub per_second: f64,
    /// Bucket size.
    pub burst: u32,
}

impl Default for WriteRate {
    fn default() -> Self {
        WriteRate {
            per_second: 20.0,
            burst: 40,
        }
    }
}

impl WriteRate {
    fn limiter(self) -> Result<governor::DefaultKeyedRateLimiter<String>, CloudError> {
        let invalid = || {
            CloudError::InvalidInput(format!(
                "the write rate must be a positive number of writes per second and the burst at least 1, not {} and {}",
                self.per_second, self.burst
            ))
        };
        if !(self.per_second.is_finite() && self.per_second > 0.0) {
            return Err(invalid());
        }
        let burst = std::num::NonZeroU32::new(self.burst).ok_or_else(invalid)?;
        let quota = governor::Quota::with_period(Duration::from_secs_f64(1.0 / self.per_second))
            .ok_or_else(invalid)?
            .allow_burst(burst);
        Ok(governor::RateLimiter::keyed(quota))
    }
}

/// The Google Cloud client (cheap to clone; clones share counters).
#[derive(Clone)]
pub struct CloudClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for CloudClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudClient")
            .field("endpoints", &self.inner.endpoints)
            .field("retry", &self.inner.retry)
            .field("poll", &self.inner.poll)
            .finish_non_exhaustive()
    }
}

/// Idle connections kept per host between requests.
const IDLE_CONNECTIONS: usize = 4;

impl CloudClient {
    /// Builds a client. Never needs credentials: with `GcpAuth` they are
    /// looked up on the first call.
    ///
    /// Refuses ([`CloudError::InvalidInput`]) a token source that sends
    /// credentials together with a plain `http` endpoint that is not loopback,
    /// unless `allow_insecure_http`; with it, warns that the token travels
    /// unencrypted. Nothing is sent over the network either way.
    pub fn new(opts: ClientOptions) -> Result<CloudClient, CloudError> {
        // reqwest is built with `rustls-no-provider`: install ring once per process.
        // An error only means a provider is already installed, which is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let endpoints = Endpoints::new(opts.api_endpoint.as_deref())?;
        if opts.retry.max_attempts == 0 {
            return Err(CloudError::InvalidInput(
                "retry.max_attempts must be at least 1".into(),
            ));
        }
        if opts.page_size == 0 || opts.page_size > 500 {
            return Err(CloudError::InvalidInput(format!(
                "page_size must be 1..=500, not {}",
                opts.page_size
            )));
        }
        let http = reqwest::Client::builder()
            .user_agent(opts.user_agent.clone())
            .connect_timeout(Duration::from_secs(10))
            .timeout(opts.request_timeout)
            // An observation opens a connection per list (14 for a
            // 10,000-slice fleet in 10 clusters), and each keeps the read
            // buffer its list grew (up to 400 KB) while it idles in the pool:
            // 5 MB of the plan's heap peak. A few idle connections serve
            // what follows (apply's writes, the polls); more are opened when
            // needed.
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            .build()
            .map_err(|e| CloudError::InvalidInput(format!("cannot build HTTP client: {e}")))?;
        let tokens: Arc<dyn TokenSource> = match opts.token_source {
            Some(t) => t,
            None if endpoints.loopback => Arc::new(NoAuth),
            None => Arc::new(GcpAuth::new()),
        };
        if check_transport(&endpoints, tokens.as_ref(), opts.allow_insecure_http)? {
            tracing::warn!(
                endpoint = %endpoints.container,
                "--allow-insecure-http: the Google access token is sent unencrypted over plain http to a host that is not loopback"
            );
        }
        tracing::debug!(container = %endpoints.container, compute = %endpoints.compute, "Google Cloud client");
        Ok(CloudClient {
            inner: Arc::new(Inner {
                http,
                endpoints,
                tokens,
                retry: opts.retry,
                poll: opts.poll,
                page_size: opts.page_size,
                stats: Counters::default(),
                writes: opts.write_rate.map(WriteRate::limiter).transpose()?,
                gke_ops: poller::Poller::default(),
                compute_ops: poller::Poller::default(),
            }),
        })
    }

    /// GKE (container v1) calls.
    pub fn gke(&self) -> GkeApi<'_> {
        GkeApi::new(&self.inner)
    }

    /// Compute Engine (compute v1) calls.
    pub fn compute(&self) -> ComputeApi<'_> {
        ComputeApi::new(&self.inner)
    }

    /// True when this client sends its access token unencrypted (plain `http`
    /// to a host that is not loopback, allowed by `allow_insecure_http`).
    pub fn credentials_in_clear(&self) -> bool {
        self.inner.endpoints.credentials_in_clear() && self.inner.tokens.sends_credentials()
    }

    /// The source of the Google access token this client sends (GKE
    /// clusters' Kubernetes APIs accept the same token, as
    /// `gke-gcloud-auth-plugin` sends it).
    pub fn token_source(&self) -> Arc<dyn TokenSource> {
        self.inner.tokens.clone()
    }

    /// The endpoints in use.
    pub fn endpoints(&self) -> &Endpoints {
        &self.inner.endpoints
    }

    /// Requests sent so far (by this client and its clones).
    pub fn stats(&self) -> RequestStats {
        let c = &self.inner.stats;
        RequestStats {
            reads: c.reads.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
        }
    }
}

/// Whether credentials may go to `endpoints`: `Ok(true)` when they would
/// travel in clear text and `allow_insecure_http` allows it, `Ok(false)` when
/// they are safe (TLS, loopback, or a source that sends none), an error otherwise.
fn check_transport(
    endpoints: &Endpoints,
    tokens: &dyn TokenSource,
    allow_insecure_http: bool,
) -> Result<bool, CloudError> {
    if !endpoints.credentials_in_clear() || !tokens.sends_credentials() {
        return Ok(false);
    }
    if allow_insecure_http {
        return Ok(true);
    }
    Err(CloudError::InvalidInput(format!(
        "refusing to send Google Cloud credentials to --api-endpoint {:?}: it is plain http to a host \
         that is not loopback, so the access token would travel unencrypted. Use an https URL, a \
         loopback address (127.0.0.1, [::1], localhost) for a local simulator or proxy, or pass \
         --allow-insecure-http (SLICECTL_ALLOW_INSECURE_HTTP=true) to send it anyway",
        endpoints.container.trim_end_matches('/')
    )))
}

/// The delay before the next poll of an operation that has been waited on
/// for `elapsed`: a tenth of that, at least `min_interval` and at most
/// `max_interval`, less a random jitter of up to a quarter. So an operation of
/// latency L is seen DONE within max(`min_interval`, 10 % of L) of finishing,
/// while the reads stay logarithmic in L up to `max_interval`, then linear
/// at one per `max_interval` (about 150 reads for an hour with the defaults).
pub(crate) fn poll_delay(p: &PollPolicy, elapsed: Duration) -> Duration {
    let base = elapsed
        .mul_f64(0.1)
        .clamp(p.min_interval, p.max_interval.max(p.min_interval));
    base.mul_f64(1.0 - rand::random::<f64>() * 0.25)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
