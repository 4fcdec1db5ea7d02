//! The GCE metadata server of simulated VMs (one loopback listener per VM).
//!
//! It speaks the protocol of `http://metadata.google.internal/computeMetadata/v1/`
//! as documented in "Querying VM metadata"
//! (cloud.google.com/compute/docs/metadata/querying-metadata), "Wait for
//! changes" (…/metadata/querying-metadata#waitforchange), "Set and query
//! guest attributes" (…/metadata/manage-guest-attributes), and the behaviour
//! the public metadata-emulator tests and Google's clients pin
//! (gcp-api.md §5: GoogleCloudPlatform/guest-agent `metadata/metadata.go`,
//! googleapis/google-cloud-go `compute/metadata/metadata.go`):
//!
//! * every request needs `Metadata-Flavor: Google` (403 otherwise), and a
//!   request carrying `X-Forwarded-For` is refused (403), as Google does to
//!   stop proxied (SSRF) requests; every response carries
//!   `Metadata-Flavor: Google` and an `ETag`;
//! * a leaf is served as text (`alt=text`, the default) or JSON (`alt=json`);
//!   a directory lists its entries one per line (subdirectories with a
//!   trailing `/`), or with `recursive=true` its whole subtree as JSON
//!   (default) or as `path value` lines (`alt=text`); `alt` other than
//!   `json`/`text`, or `alt` on a non-recursive directory, is 400;
//! * the ETag is 16 hex characters, a hash of what is served: the same for
//!   `alt=text`/`alt=json` and with or without a trailing slash, different for
//!   a directory with and without `recursive`, and back to its old value when
//!   the value is restored;
//! * `wait_for_change=true` blocks until the value's ETag changes; with
//!   `last_etag` it returns at once when the current ETag differs;
//!   `timeout_sec=N` returns the current value after N seconds; on a
//!   directory it needs `recursive=true` (400 otherwise);
//! * `instance/guest-attributes/NS/KEY` is VM-writable with PUT, readable with
//!   GET and removable with DELETE (the control plane reads it back with
//!   `instances.getGuestAttributes`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

/// What one VM's metadata server serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmMetadata {
    /// `project/project-id`.
    pub project_id: String,
    /// `project/numeric-project-id`.
    pub numeric_project_id: String,
    /// Short zone name (served as `instance/zone` = `projects/NUM/zones/ZONE`).
    pub zone: String,
    /// `instance/name`.
    pub name: String,
    /// `instance/id`.
    pub id: String,
    /// Short machine type (served as `instance/machine-type` = `projects/NUM/machineTypes/MT`).
    pub machine_type: String,
    /// `instance/attributes/…`: the instance's custom metadata (template
    /// metadata plus `setMetadata` writes).
    pub attributes: BTreeMap<String, String>,
}

/// Guest attributes a VM wrote (`PUT instance/guest-attributes/NS/KEY`),
/// keyed `NS/KEY`; the compute simulator serves them back through
/// `instances.getGuestAttributes`.
pub type GuestAttributes = std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>;

/// A running metadata server.
#[derive(Debug)]
pub struct MetadataServer {
    /// Where it listens (what `GCE_METADATA_HOST` is set to).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetadataServer {
    /// Starts a server for one VM on 127.0.0.1 (ephemeral port) serving the
    /// current value of `rx`; `wait_for_change` requests wake when it changes.
    /// Guest attributes written by the VM land in `guest`.
    pub async fn start(
        rx: watch::Receiver<VmMetadata>,
        guest: GuestAttributes,
    ) -> std::io::Result<MetadataServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .fallback(handle)
            .with_state(AppState { rx, guest });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(%addr, error = %e, "metadata server stopped");
            }
        });
        Ok(MetadataServer { addr, task })
    }

    /// `http://ADDR/computeMetadata/v1/`, the base URL clients use.
    pub fn base_url(&self) -> String {
        format!("http://{}/computeMetadata/v1/", self.addr)
    }
}

impl Drop for MetadataServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct AppState {
    rx: watch::Receiver<VmMetadata>,
    guest: GuestAttributes,
}

const PREFIX: &str = "/computeMetadata/v1";

// ------------------------------------------------------------------ tree

/// A node of the metadata tree: directories map a path segment to the
/// child's JSON name (camelCase for Google's own entries, as the recursive
/// JSON spells them: `machine-type` → `machineType`) and the child.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Dir(Vec<(String, String, Node)>),
    Leaf(Value),
}

impl Node {
    fn dir(entries: Vec<(&str, &str, Node)>) -> Node {
        Node::Dir(
            entries
                .into_iter()
                .map(|(p, j, n)| (p.to_owned(), j.to_owned(), n))
                .collect(),
        )
    }

    fn lookup(&self, segments: &[&str]) -> Option<&Node> {
        match segments.split_first() {
            None => Some(self),
            Some((first, rest)) => match self {
                Node::Dir(entries) => entries
                    .iter()
                    .find(|(p, _, _)| p == first)
                    .and_then(|(_, _, n)| n.lookup(rest)),
                Node::Leaf(_) => None,
            },
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Node::Leaf(v) => v.clone(),
            Node::Dir(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(_, j, n)| (j.clone(), n.to_json()))
                    .collect(),
            ),
        }
    }

    /// `alt=text`: a leaf's raw value; a directory's entries one per line,
    /// or (recursive) `relative/path value` lines.
    fn to_text(&self, recursive: bool) -> String {
        match self {
            Node::Leaf(Value::String(s)) => s.clone(),
            Node::Leaf(v) => v.to_string(),
            Node::Dir(entries) if !recursive => entries
                .iter()
                .map(|(p, _, n)| match n {
                    Node::Dir(_) => format!("{p}/\n"),
                    Node::Leaf(_) => format!("{p}\n"),
                })
                .collect(),
            Node::Dir(_) => {
                let mut out = String::new();
                self.flatten("", &mut out);
                out
            }
        }
    }

    fn flatten(&self, prefix: &str, out: &mut String) {
        match self {
            Node::Leaf(_) => {
                out.push_str(&format!("{prefix} {}\n", self.to_text(false)));
            }
            Node::Dir(entries) => {
                for (p, _, n) in entries {
                    let path = if prefix.is_empty() {
                        p.clone()
                    } else {
                        format!("{prefix}/{p}")
                    };
                    n.flatten(&path, out);
                }
            }
        }
    }
}

/// A number when the text is one (the recursive JSON has `"id": 123`), else
/// the text.
fn number_or_string(s: &str) -> Value {
    s.parse::<u64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::String(s.to_owned()))
}

fn leaf(s: impl Into<String>) -> Node {
    Node::Leaf(Value::String(s.into()))
}

fn tree(md: &VmMetadata) -> Node {
    let num = &md.numeric_project_id;
    let attributes = Node::Dir(
        md.attributes
            .iter()
            .map(|(k, v)| (k.clone(), k.clone(), leaf(v.clone())))
            .collect(),
    );
    // The internal DNS name of a VM on zonal DNS:
    // VM_NAME.ZONE.c.PROJECT_ID.internal (cloud.google.com/compute/docs/internal-dns).
    let hostname = format!("{}.{}.c.{}.internal", md.name, md.zone, md.project_id);
    let instance = Node::dir(vec![
        ("attributes", "attributes", attributes),
        ("hostname", "hostname", leaf(hostname)),
        ("id", "id", Node::Leaf(number_or_string(&md.id))),
        (
            "machine-type",
            "machineType",
            leaf(format!("projects/{num}/machineTypes/{}", md.machine_type)),
        ),
        ("name", "name", leaf(md.name.clone())),
        (
            "zone",
            "zone",
            leaf(format!("projects/{num}/zones/{}", md.zone)),
        ),
    ]);
    let project = Node::dir(vec![
        ("attributes", "attributes", Node::Dir(Vec::new())),
        (
            "numeric-project-id",
            "numericProjectId",
            Node::Leaf(number_or_string(num)),
        ),
        ("project-id", "projectId", leaf(md.project_id.clone())),
    ]);
    Node::dir(vec![
        ("instance", "instance", instance),
        ("project", "project", project),
    ])
}

/// The ETag of what a path serves: 16 hex characters of a SHA-256 over the
/// canonical path (no trailing slash), whether a directory is served
/// recursively, and the JSON form of the value (so `alt` does not matter and
/// the tag reverts with the value).
fn etag(path: &str, node: &Node, recursive: bool) -> String {
    let recursive = recursive && matches!(node, Node::Dir(_));
    let mut h = Sha256::new();
    h.update(path.trim_end_matches('/').as_bytes());
    h.update([0, u8::from(recursive), 0]);
    h.update(node.to_json().to_string().as_bytes());
    hex::encode(&h.finalize()[..8])
}

// ------------------------------------------------------------- requests

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alt {
    Json,
    Text,
}

#[derive(Debug, Default)]
struct Query {
    alt: Option<Alt>,
    recursive: bool,
    wait_for_change: bool,
    last_etag: Option<String>,
    timeout: Option<Duration>,
}

fn parse_bool(name: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" | "" => Ok(false),
        _ => Err(format!("invalid value for {name}: {v}")),
    }
}

fn parse_query(q: Option<&str>) -> Result<Query, String> {
    let mut out = Query::default();
    for (k, v) in url::form_urlencoded::parse(q.unwrap_or_default().as_bytes()) {
        match k.as_ref() {
            "alt" => {
                out.alt = Some(match v.as_ref() {
                    "json" => Alt::Json,
                    "text" => Alt::Text,
                    other => return Err(format!("invalid alt: {other}")),
                })
            }
            "recursive" => out.recursive = parse_bool("recursive", &v)?,
            "wait_for_change" => out.wait_for_change = parse_bool("wait_for_change", &v)?,
            // guest-agent sends last_etag=NONE before it has one.
            "last_etag" => out.last_etag = Some(v.into_owned()),
            "timeout_sec" => {
                let secs: u64 = v
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("invalid timeout_sec: {v}"))?;
                out.timeout = Some(Duration::from_secs(secs));
            }
            _ => {}
        }
    }
    Ok(out)
}

fn reply(status: StatusCode, content_type: &str, etag: Option<&str>, body: String) -> Response {
    let mut resp = (status, body).into_response();
    let h = resp.headers_mut();
    h.insert("metadata-flavor", HeaderValue::from_static("Google"));
    h.insert(
        header::SERVER,
        HeaderValue::from_static("Metadata Server for VM"),
    );
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(t).ok()) {
        h.insert(header::ETAG, tag);
    }
    resp
}

fn error(status: StatusCode, message: &str) -> Response {
    reply(
        status,
        "text/html; charset=UTF-8",
        None,
        format!("{message}\n"),
    )
}

async fn handle(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // "Requests must include the header Metadata-Flavor: Google … the
    // metadata server rejects requests that contain X-Forwarded-For"
    // (querying-metadata, "Parts of a metadata request").
    if headers.get("metadata-flavor").map(HeaderValue::as_bytes) != Some(b"Google") {
        return error(
            StatusCode::FORBIDDEN,
            "Missing Metadata-Flavor:Google header.",
        );
    }
    if headers.contains_key("x-forwarded-for") {
        return error(
            StatusCode::FORBIDDEN,
            "Request had an X-Forwarded-For header and cannot be served.",
        );
    }
    let path = uri.path();
    let Some(rest) = path.strip_prefix(PREFIX) else {
        return error(StatusCode::NOT_FOUND, "Not Found");
    };
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    if !rest.is_empty() && !path.starts_with(&format!("{PREFIX}/")) {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let trimmed = rest.trim_end_matches('/');
    let segments: Vec<&str> = if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    };
    if segments.iter().any(|s| s.is_empty()) {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    if segments.first() == Some(&"instance") && segments.get(1) == Some(&"guest-attributes") {
        return guest_attributes(&state.guest, &method, &segments[2..], body);
    }
    if method != Method::GET {
        return error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    let query = match parse_query(uri.query()) {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    serve(state.rx, trimmed, &segments, &query).await
}

/// Renders the node at `segments` of the current metadata, or a 404/400.
fn render(md: &VmMetadata, path: &str, segments: &[&str], q: &Query) -> Result<Rendered, Reject> {
    let t = tree(md);
    let node = t
        .lookup(segments)
        .ok_or(Reject(StatusCode::NOT_FOUND, "Not Found"))?;
    let is_dir = matches!(node, Node::Dir(_));
    if is_dir && !q.recursive && q.alt.is_some() {
        return Err(Reject(
            StatusCode::BAD_REQUEST,
            "alt is only supported on a leaf or with recursive=true",
        ));
    }
    if is_dir && !q.recursive && q.wait_for_change {
        return Err(Reject(
            StatusCode::BAD_REQUEST,
            "Non-recursive directory listings do not support wait_for_change.",
        ));
    }
    let tag = etag(path, node, q.recursive);
    let json = matches!(
        (is_dir, q.recursive, q.alt),
        (_, _, Some(Alt::Json)) | (true, true, None)
    );
    let (content_type, body) = if json {
        ("application/json", node.to_json().to_string())
    } else {
        ("text/plain", node.to_text(q.recursive))
    };
    Ok(Rendered {
        etag: tag,
        content_type,
        body,
    })
}

/// A refused request: status and message.
#[derive(Debug, Clone, Copy)]
struct Reject(StatusCode, &'static str);

impl Reject {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

struct Rendered {
    etag: String,
    content_type: &'static str,
    body: String,
}

impl Rendered {
    fn into_response(self) -> Response {
        reply(
            StatusCode::OK,
            self.content_type,
            Some(&self.etag),
            self.body,
        )
    }
}

async fn serve(
    mut rx: watch::Receiver<VmMetadata>,
    path: &str,
    segments: &[&str],
    q: &Query,
) -> Response {
    let first = {
        let md = rx.borrow_and_update();
        render(&md, path, segments, q)
    };
    let first = match first {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    if !q.wait_for_change {
        return first.into_response();
    }
    // "If the ETag differs from last_etag, the server returns immediately"
    // (querying-metadata#etags); otherwise wait for a change of this value.
    let baseline = match &q.last_etag {
        Some(last) if *last != first.etag => return first.into_response(),
        Some(last) => last.clone(),
        None => first.etag.clone(),
    };
    let wait = async {
        loop {
            if rx.changed().await.is_err() {
                // The VM is gone: nothing will change any more.
                std::future::pending::<()>().await;
            }
            let now = {
                let md = rx.borrow_and_update();
                render(&md, path, segments, q)
            };
            match now {
                Ok(r) if r.etag == baseline => continue,
                Ok(r) => return r.into_response(),
                // The value was deleted (404) while waiting.
                Err(r) => return r.into_response(),
            }
        }
    };
    match q.timeout {
        // "timeout_sec … returns the current value after that many seconds".
        Some(t) => match tokio::time::timeout(t, wait).await {
            Ok(resp) => resp,
            Err(_) => {
                let md = rx.borrow();
                match render(&md, path, segments, q) {
                    Ok(r) => r.into_response(),
                    Err(r) => r.into_response(),
                }
            }
        },
        None => wait.await,
    }
}

/// Guest attribute namespaces and keys follow the metadata key rule,
/// `[a-zA-Z0-9-_]+` (compute v1 `Metadata.items[].key`).
fn valid_guest_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() < 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn guest_attributes(
    guest: &GuestAttributes,
    method: &Method,
    segments: &[&str],
    body: Bytes,
) -> Response {
    if !segments.iter().all(|s| valid_guest_name(s)) {
        return error(StatusCode::BAD_REQUEST, "invalid guest attribute path");
    }
    let mut map = guest.lock().unwrap_or_else(|e| e.into_inner());
    match (method, segments) {
        (&Method::PUT, [ns, key]) => {
            let Ok(value) = String::from_utf8(body.to_vec()) else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "guest attribute value is not UTF-8",
                );
            };
            map.insert(format!("{ns}/{key}"), value);
            reply(StatusCode::OK, "text/plain", None, String::new())
        }
        (&Method::GET, [ns, key]) => match map.get(&format!("{ns}/{key}")) {
            Some(v) => reply(StatusCode::OK, "text/plain", None, v.clone()),
            None => error(StatusCode::NOT_FOUND, "Not Found"),
        },
        (&Method::DELETE, [ns, key]) => match map.remove(&format!("{ns}/{key}")) {
            Some(_) => reply(StatusCode::OK, "text/plain", None, String::new()),
            None => error(StatusCode::NOT_FOUND, "Not Found"),
        },
        // Directory listings: namespaces (with `/`), or a namespace's keys.
        (&Method::GET, []) => {
            let mut namespaces: Vec<&str> = map
                .keys()
                .filter_map(|k| k.split_once('/').map(|(n, _)| n))
                .collect();
            namespaces.dedup();
            let body = namespaces.iter().map(|n| format!("{n}/\n")).collect();
            reply(StatusCode::OK, "text/plain", None, body)
        }
        (&Method::GET, [ns]) => {
            let prefix = format!("{ns}/");
            let keys: String = map
                .keys()
                .filter_map(|k| k.strip_prefix(&prefix))
                .map(|k| format!("{k}\n"))
                .collect();
            if keys.is_empty() {
                error(StatusCode::NOT_FOUND, "Not Found")
            } else {
                reply(StatusCode::OK, "text/plain", None, keys)
            }
        }
        (&Method::GET | &Method::PUT | &Method::DELETE, _) => {
            error(StatusCode::NOT_FOUND, "Not Found")
        }
        _ => error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md() -> VmMetadata {
        VmMetadata {
            project_id: "example-project".to_owned(),
            numeric_project_id: "123456789012".to_owned(),
            zone: "us-central1-a".to_owned(),
            name: "vm-0".to_owned(),
            id: "4242".to_owned(),
            machine_type: "ct5p-hightpu-4t".to_owned(),
            attributes: [("a".to_owned(), "1".to_owned())].into_iter().collect(),
        }
    }

    #[test]
    fn tree_serves_google_paths_and_json_names() {
        let t = tree(&md());
        let get = |p: &str| {
            t.lookup(&p.split('/').collect::<Vec<_>>())
                .map(|n| n.to_text(false))
        };
        assert_eq!(
            get("instance/zone").as_deref(),
            Some("projects/123456789012/zones/us-central1-a")
        );
        assert_eq!(
            get("instance/machine-type").as_deref(),
            Some("projects/123456789012/machineTypes/ct5p-hightpu-4t")
        );
        assert_eq!(get("instance/id").as_deref(), Some("4242"));
        assert_eq!(
            get("instance/hostname").as_deref(),
            Some("vm-0.us-central1-a.c.example-project.internal")
        );
        assert_eq!(
            get("project/numeric-project-id").as_deref(),
            Some("123456789012")
        );
        assert_eq!(get("instance/attributes/a").as_deref(), Some("1"));
        assert_eq!(get("instance/attributes/b"), None);
        let json = t
            .lookup(&["instance"])
            .map(Node::to_json)
            .unwrap_or_default();
        assert_eq!(
            json["machineType"],
            "projects/123456789012/machineTypes/ct5p-hightpu-4t"
        );
        assert_eq!(json["id"], 4242);
        assert_eq!(json["attributes"]["a"], "1");
    }

    #[test]
    fn directory_text_lists_entries_and_flattens_recursively() {
        let t = tree(&md());
        let inst = t
            .lookup(&["instance"])
            .cloned()
            .unwrap_or(Node::Dir(vec![]));
        assert_eq!(
            inst.to_text(false),
            "attributes/\nhostname\nid\nmachine-type\nname\nzone\n"
        );
        let attrs = t
            .lookup(&["instance", "attributes"])
            .cloned()
            .unwrap_or(Node::Dir(vec![]));
        assert_eq!(attrs.to_text(true), "a 1\n");
    }

    #[test]
    fn etag_rules() {
        let t = tree(&md());
        let attrs = t
            .lookup(&["instance", "attributes"])
            .cloned()
            .unwrap_or(Node::Dir(vec![]));
        let a = etag("instance/attributes", &attrs, true);
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a, etag("instance/attributes/", &attrs, true));
        assert_ne!(a, etag("instance/attributes", &attrs, false));
        let mut changed = md();
        changed.attributes.insert("b".to_owned(), "2".to_owned());
        let t2 = tree(&changed);
        let attrs2 = t2
            .lookup(&["instance", "attributes"])
            .cloned()
            .unwrap_or(Node::Dir(vec![]));
        assert_ne!(a, etag("instance/attributes", &attrs2, true));
        // A leaf: recursive does not matter.
        let name = t
            .lookup(&["instance", "name"])
            .cloned()
            .unwrap_or(Node::Dir(vec![]));
        assert_eq!(
            etag("instance/name", &name, true),
            etag("instance/name", &name, false)
        );
    }

    #[test]
    fn query_parsing() {
        let q = parse_query(Some(
            "alt=json&recursive=true&wait_for_change=true&last_etag=abc&timeout_sec=5",
        ))
        .unwrap_or_default();
        assert_eq!(q.alt, Some(Alt::Json));
        assert!(q.recursive && q.wait_for_change);
        assert_eq!(q.last_etag.as_deref(), Some("abc"));
        assert_eq!(q.timeout, Some(Duration::from_secs(5)));
        assert!(parse_query(Some("alt=xml")).is_err());
        assert!(parse_query(Some("timeout_sec=0")).is_err());
        assert!(parse_query(Some("timeout_sec=x")).is_err());
        assert!(parse_query(Some("recursive=maybe")).is_err());
    }
}
