//! Specs from one ConfigMap, read through an API watch (kube-runtime's
//! `watch_object`): its data keys are file names, its values the files.
//!
//! The watch keeps the latest version in a [`tokio::sync::watch`] channel
//! and sends a change message when the data changed (metadata-only updates
//! do not run a cycle). A ConfigMap that is absent, or was deleted, is
//! [`Snapshot::Absent`]: the controller plans nothing and prunes nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::UnboundedSender;

use crate::source::entries::{Entry, Listing, Skipped, classify};
use crate::spec::SourceFile;

/// What the ConfigMap holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// It does not exist.
    Absent,
    /// Its `data`: key → value.
    Data(BTreeMap<String, String>),
}

impl Snapshot {
    /// The spec files it holds, as `NAME/KEY` (the path diagnostics show),
    /// and the keys skipped with a reason, `None` when it is absent. Which
    /// keys are spec files is the rule of every source,
    /// [`crate::source::entries::classify`].
    pub fn files(&self, name: &str) -> Option<Listing> {
        let Snapshot::Data(d) = self else {
            return None;
        };
        let mut listing = Listing::default();
        for (k, v) in d {
            let path = PathBuf::from(format!("{name}/{k}"));
            match classify(k, false) {
                Entry::Spec => listing.files.push(SourceFile {
                    path,
                    text: v.clone(),
                }),
                Entry::Skipped(reason) => listing.skipped.push(Skipped { path, reason }),
                Entry::Dir | Entry::Other | Entry::Internal => {}
            }
        }
        Some(listing)
    }
}

fn snapshot(cm: Option<ConfigMap>) -> Snapshot {
    match cm {
        None => Snapshot::Absent,
        Some(cm) => Snapshot::Data(cm.data.unwrap_or_default().into_iter().collect()),
    }
}

/// Watches ConfigMap `name` in `api`'s namespace until `changes` closes.
/// `latest` gets every version (`None` until the first is read); `changes`
/// a message each time the data changed after the first read.
pub async fn watch(
    api: Api<ConfigMap>,
    name: String,
    latest: tokio::sync::watch::Sender<Option<Snapshot>>,
    changes: UnboundedSender<()>,
) {
    let stream = watcher::watch_object(api, &name).default_backoff();
    futures::pin_mut!(stream);
    let mut reported = false;
    loop {
        let item = tokio::select! {
            () = changes.closed() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else {
            tracing::error!(configmap = %name, "the ConfigMap watch ended; only the periodic resync runs cycles now");
            return;
        };
        match item {
            Ok(cm) => {
                reported = false;
                let now = snapshot(cm);
                let first = latest.borrow().is_none();
                let changed = latest.borrow().as_ref() != Some(&now);
                if changed {
                    tracing::info!(
                        configmap = %name,
                        present = !matches!(now, Snapshot::Absent),
                        "spec ConfigMap {}",
                        if first { "read" } else { "changed" }
                    );
                    latest.send_replace(Some(now));
                    if !first {
                        let _ = changes.send(());
                    }
                }
            }
            Err(e) => {
                // Retried with backoff; the last version read stays in force.
                if !reported {
                    tracing::warn!(configmap = %name, error = %e, "cannot watch the spec ConfigMap; retrying (the last version read stays in force)");
                    reported = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_file_names_and_only_spec_files_count() {
        let s = Snapshot::Data(BTreeMap::from([
            ("b.yaml".to_string(), "B".to_string()),
            ("a.yml".to_string(), "A".to_string()),
            ("README.md".to_string(), "x".to_string()),
        ]));
        let f = s.files("specs").unwrap().files;
        let paths: Vec<_> = f.iter().map(|f| f.path.display().to_string()).collect();
        assert_eq!(paths, vec!["specs/a.yml", "specs/b.yaml"]);
        assert_eq!(f[1].text, "B");
        assert!(Snapshot::Absent.files("specs").is_none());
        assert_eq!(snapshot(None), Snapshot::Absent);
        assert_eq!(
            snapshot(Some(ConfigMap::default())),
            Snapshot::Data(BTreeMap::new())
        );
    }
}
