//! Printing an error with its causes, once each.
//!
//! Many error types (ours, and kube-rs's, reqwest's) write their source into
//! their own message *and* return it from `source()`. A printer that walks
//! the chain (anyhow's `{:#}`) then repeats every cause:
//! "cannot observe …: HTTP 404 …: HTTP 404 …". [`chain`] walks the same
//! chain and leaves out each cause whose text is already said, so every
//! path that prints an error with its causes says each one once.

use std::error::Error;

/// An error and its causes, `a: b: c`, each said once: a cause whose text
/// the message so far already contains is left out.
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// [`chain`] of an [`anyhow::Error`] (its context layers and causes).
pub fn chain_anyhow(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for s in e.chain() {
        let text = s.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Whether some `: `-separated segment of `message` occurs twice (a cause
/// said twice). Segments shorter than 12 characters are not judged (a
/// status code or a word may well recur).
pub fn repeated_segment(message: &str) -> Option<String> {
    let segments: Vec<&str> = message
        .split(": ")
        .map(str::trim)
        .filter(|s| s.len() >= 12)
        .collect();
    for (i, s) in segments.iter().enumerate() {
        if segments[i + 1..].contains(s) {
            return Some((*s).to_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer thing failed: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("HTTP 404 NOT_FOUND: Not found: projects/p/locations/l/clusters/gone")]
    struct Inner;

    #[test]
    fn a_cause_in_the_message_is_not_said_again() {
        let e = Outer(Inner);
        let anyhow_text = format!("{:#}", anyhow::Error::new(Outer(Inner)));
        // anyhow's own chain printer repeats it: this is the bug.
        assert!(repeated_segment(&anyhow_text).is_some(), "{anyhow_text}");
        let once = chain(&e);
        assert_eq!(
            once,
            "outer thing failed: HTTP 404 NOT_FOUND: Not found: projects/p/locations/l/clusters/gone"
        );
        assert_eq!(repeated_segment(&once), None);
        let wrapped = anyhow::Error::new(Outer(Inner)).context("cannot plan");
        let text = chain_anyhow(&wrapped);
        assert_eq!(repeated_segment(&text), None, "{text}");
        assert!(
            text.starts_with("cannot plan: outer thing failed: HTTP 404"),
            "{text}"
        );
    }

    #[test]
    fn a_cause_not_in_the_message_is_added() {
        let e = anyhow::Error::new(Inner).context("cannot observe cluster c");
        assert_eq!(
            chain_anyhow(&e),
            "cannot observe cluster c: HTTP 404 NOT_FOUND: Not found: projects/p/locations/l/clusters/gone"
        );
    }

    /// The error types of every layer that write their cause into their
    /// message and also return it as their source (the doubled chain of
    /// issue 17), printed as the CLI prints them.
    #[test]
    fn every_layer_prints_each_cause_once() {
        use std::io;
        let io_err = || {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                "permission denied for this file",
            )
        };
        let cases: Vec<anyhow::Error> = vec![
            // source: an unreadable spec file, under the CLI's context.
            anyhow::Error::new(crate::source::SourceError::Unreadable {
                path: "specs/a.yaml".into(),
                source: io_err(),
            })
            .context("cannot load the specs"),
            // source: a bounded read's I/O error.
            anyhow::Error::new(crate::source::bounded::BoundedReadError::Io(io_err())),
            // cloud: an API error, as the engine and the executor wrap it.
            anyhow::Error::new(crate::apply::ApplyError::Cloud(
                crate::cloud::CloudError::Api {
                    status: 404,
                    code: "NOT_FOUND".into(),
                    reason: Some("notFound".into()),
                    message: "Not found: projects/p/locations/l/clusters/gone.".into(),
                    method: "container.projects.locations.clusters.nodePools.list".into(),
                },
            )),
            // kube: a missing kubeconfig, seen through the cloud seam.
            anyhow::Error::new(crate::cloud::CloudError::Kube(
                crate::kube::KubeError::Config {
                    endpoint: "10.0.0.1:6443".into(),
                    message: "kubeconfig /home/x/.kube/config: no such file".into(),
                },
            ))
            .context("cannot observe cluster 10.0.0.1:6443"),
            // spec / cycle: a plan refused as a whole.
            anyhow::Error::new(crate::engine::ReconcileError::Plan(
                crate::plan::PlanError::EmptySource { live: 3 },
            )),
        ];
        for e in &cases {
            let text = chain_anyhow(e);
            assert_eq!(repeated_segment(&text), None, "{text}");
        }
    }
}
