//! The one request path every call goes through: token, send, decode the
//! success JSON or Google's error envelope, and retry retryable failures with
//! jittered exponential backoff.

use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
// `bytes::Bytes`, as reqwest hands out body chunks (axum re-exports it).
use axum::body::Bytes;
use reqwest::Method;
use reqwest::header::CONTENT_TYPE;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Inner;
use super::error::{CloudError, api_error, snippet};

/// Observes every HTTP exchange with Google: the API method id
/// (`container.projects.locations.clusters.nodePools.create`) and the
/// response code (`"200"`, `"429"`, …, or `"transport"` when no response
/// came). The controller counts requests with it; nothing else is passed
/// (no URL, no body, no token).
pub type RequestObserver = dyn Fn(&str, &str) + Send + Sync;

static OBSERVER: std::sync::OnceLock<Box<RequestObserver>> = std::sync::OnceLock::new();

/// Installs the process-wide [`RequestObserver`]; `false` when one is
/// already installed (the first stays).
pub fn set_request_observer(observer: Box<RequestObserver>) -> bool {
    OBSERVER.set(observer).is_ok()
}

fn observe(api_method: &str, code: &str) {
    if let Some(o) = OBSERVER.get() {
        o(api_method, code);
    }
}

/// Whether a request reads or changes state (for the request counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// GET, list, operation polls.
    Read,
    /// Create, update, delete.
    Write,
}

/// One logical API call. Retries resend exactly this request, so a
/// `requestId` added once stays the same across retries.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) query: Vec<(&'static str, String)>,
    pub(crate) body: Option<Vec<u8>>,
    /// API method id, e.g. `container.projects.locations.clusters.nodePools.create`.
    pub(crate) api_method: &'static str,
    pub(crate) access: Access,
}

impl Request {
    /// A request with no body or query.
    pub(crate) fn new(method: Method, api_method: &'static str, url: String) -> Request {
        let access = if method == Method::GET {
            Access::Read
        } else {
            Access::Write
        };
        Request {
            method,
            url,
            query: Vec::new(),
            body: None,
            api_method,
            access,
        }
    }

    /// Overrides the read/write classification.
    pub(crate) fn access(mut self, access: Access) -> Request {
        self.access = access;
        self
    }

    /// Adds a query parameter.
    pub(crate) fn query(mut self, key: &'static str, value: impl Into<String>) -> Request {
        self.query.push((key, value.into()));
        self
    }

    /// Sets a JSON body (serialised once).
    pub(crate) fn json<B: Serialize + ?Sized>(mut self, body: &B) -> Result<Request, CloudError> {
        let bytes = serde_json::to_vec(body).map_err(|e| {
            CloudError::InvalidInput(format!("{}: cannot encode body: {e}", self.api_method))
        })?;
        self.body = Some(bytes);
        Ok(self)
    }

    /// Adds a fresh `requestId` UUID (compute writes): the server treats retries
    /// carrying the same id as one request.
    pub(crate) fn with_request_id(self) -> Request {
        self.query("requestId", uuid::Uuid::new_v4().to_string())
    }

    /// The `requestId` query parameter, if any.
    #[cfg(test)]
    pub(crate) fn request_id(&self) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| *k == "requestId")
            .map(|(_, v)| v.as_str())
    }
}

impl Inner {
    /// Sends `req`, retrying retryable errors per the client's [`super::RetryPolicy`].
    pub(crate) async fn call<T: DeserializeOwned + Send + 'static>(
        &self,
        req: &Request,
    ) -> Result<T, CloudError> {
        let backoff = ExponentialBuilder::default()
            .with_jitter()
            .with_min_delay(self.retry.min_delay)
            .with_max_delay(self.retry.max_delay)
            .with_max_times(self.retry.max_attempts.saturating_sub(1) as usize);
        (|| self.attempt::<T>(req))
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(CloudError::is_retryable)
            .notify(|err: &CloudError, delay: Duration| {
                self.stats.record_retry();
                tracing::debug!(
                    method = req.api_method,
                    error = %err,
                    delay_ms = delay.as_millis() as u64,
                    "retrying Google Cloud call"
                );
            })
            .await
    }

    /// One HTTP exchange.
    async fn attempt<T: DeserializeOwned + Send + 'static>(
        &self,
        req: &Request,
    ) -> Result<T, CloudError> {
        let token = self.tokens.token().await?;
        let mut rb = self.http.request(req.method.clone(), &req.url);
        if !req.query.is_empty() {
            rb = rb.query(&req.query);
        }
        if let Some(token) = token {
            // bearer_auth marks the header sensitive, so it never shows in Debug output.
            rb = rb.bearer_auth(token);
        }
        if let Some(body) = &req.body {
            rb = rb
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
        } else if matches!(req.method, Method::POST | Method::PUT | Method::PATCH) {
            // Google answers 411 to a bodiless POST without `Content-Length: 0`.
            rb = rb.body(Vec::new());
        }
        if req.access == Access::Write
            && let Some(limiter) = &self.writes
        {
            limiter.until_key_ready(&project_of_url(&req.url)).await;
        }
        self.stats.record(req.access);
        let started = Instant::now();
        let transport = |source: reqwest::Error| CloudError::Transport {
            method: req.api_method.to_string(),
            url: req.url.clone(),
            source: source.without_url(),
        };
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                observe(req.api_method, "transport");
                return Err(transport(e));
            }
        };
        let status = resp.status();
        observe(req.api_method, status.as_str());
        let log = || {
            tracing::debug!(
                method = req.api_method,
                http_method = %req.method,
                url = %req.url,
                status = status.as_u16(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "Google Cloud call"
            );
        };
        let decode = |head: &[u8], source| CloudError::Decode {
            method: req.api_method.to_string(),
            url: req.url.clone(),
            snippet: snippet(head, 200),
            source,
        };
        if status.is_success() && resp.content_length().is_none_or(|n| n > STREAM_ABOVE) {
            // A large answer (a list of thousands of node pools, a
            // location's operations) is decoded as it arrives, so its text
            // is never held whole beside what it decodes to.
            let parsed = decode_streamed::<T, _>(resp).await;
            log();
            return match parsed {
                Streamed::Done(v) => Ok(v),
                Streamed::Cut(e) => Err(transport(e)),
                Streamed::Invalid { head, source } => Err(decode(&head, source)),
            };
        }
        let body = resp.bytes().await.map_err(transport)?;
        log();
        if status.is_success() {
            serde_json::from_slice(&body).map_err(|source| decode(&body, source))
        } else {
            Err(api_error(status.as_u16(), &body, req.api_method))
        }
    }
}

/// Answers longer than this (or of unknown length) are decoded as they
/// arrive ([`decode_streamed`]); shorter ones are read whole first.
pub(crate) const STREAM_ABOVE: u64 = 256 * 1024;

/// Bytes [`decode_streamed`]'s decoder reads from the chunks at a time.
const READ_BUFFER: usize = 64 * 1024;

/// How a streamed answer ended.
enum Streamed<T> {
    /// Decoded.
    Done(T),
    /// The transfer broke off.
    Cut(reqwest::Error),
    /// Not the JSON expected; `head` is its first bytes.
    Invalid {
        head: Vec<u8>,
        source: serde_json::Error,
    },
}

/// Decodes a response body as its chunks arrive: the chunks are handed,
/// a few at a time, to a blocking thread that decodes from them, so the
/// memory held is what the body decodes to plus a few chunks, not the whole
/// text (a 10,000-pool list is 17 MB of JSON). A transfer that breaks off is
/// [`Streamed::Cut`] whatever the decoder made of the part it saw.
async fn decode_streamed<T, R>(mut resp: R) -> Streamed<T>
where
    T: DeserializeOwned + Send + 'static,
    R: ChunkSource,
{
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    let decoder = tokio::task::spawn_blocking(move || {
        let mut reader = ChunkReader {
            rx,
            chunk: Bytes::new(),
            at: 0,
            head: Vec::new(),
        };
        // Buffered: serde_json's reader takes one byte at a time, which
        // `BufReader` serves from its buffer without a call per byte.
        let mut buffered = std::io::BufReader::with_capacity(READ_BUFFER, &mut reader);
        let r = serde_json::from_reader::<_, T>(&mut buffered);
        drop(buffered);
        (r, reader.head)
    });
    let mut cut = None;
    loop {
        match resp.next_chunk().await {
            Ok(Some(c)) => {
                // The decoder stopped (an error, or trailing bytes): no need
                // to read on.
                if tx.send(c).await.is_err() {
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                cut = Some(e);
                break;
            }
        }
    }
    drop(tx);
    let joined = decoder.await;
    if let Some(e) = cut {
        return Streamed::Cut(e);
    }
    match joined {
        Ok((Ok(v), _)) => Streamed::Done(v),
        Ok((Err(source), head)) => Streamed::Invalid { head, source },
        // The decoder panicked (a bug in a Deserialize impl): raise it here.
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Where [`decode_streamed`] takes chunks from (a response; a test's list).
pub(crate) trait ChunkSource: Send {
    /// The next chunk, `None` at the end.
    fn next_chunk(
        &mut self,
    ) -> impl std::future::Future<Output = Result<Option<Bytes>, reqwest::Error>> + Send;
}

impl ChunkSource for reqwest::Response {
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, reqwest::Error> {
        self.chunk().await
    }
}

/// A blocking `Read` over the chunks of a body as they arrive, keeping the
/// first bytes for error messages.
struct ChunkReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    chunk: Bytes,
    at: usize,
    head: Vec<u8>,
}

impl std::io::Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at >= self.chunk.as_ref().len() {
            match self.rx.blocking_recv() {
                Some(c) => {
                    self.chunk = c;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let rest = &self.chunk.as_ref()[self.at..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        if self.head.len() < 200 {
            let keep = (200 - self.head.len()).min(n);
            self.head.extend_from_slice(&rest[..keep]);
        }
        self.at += n;
        Ok(n)
    }
}

/// The project a request URL names (`…/projects/P/…`), the key of the
/// per-project write limit; empty when it names none.
fn project_of_url(url: &str) -> String {
    url.split_once("/projects/")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
#[path = "http_stream/tests.rs"]
mod stream_tests;

#[cfg(test)]
#[path = "http/tests.rs"]
mod tests;
