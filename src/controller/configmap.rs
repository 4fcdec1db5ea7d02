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

use crate::source::SourceError;
use crate::source::entries::{Entry, Listing, Skipped, classify};
use crate::spec::SourceFile;

/// What the ConfigMap holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Snapshot {
    /// It does not exist.
    Absent,
    /// Its `data` and `binaryData` (key → bytes), as the kubelet mounts
    /// both: a `binaryData` key named like a spec file is a spec file too.
    Data(BTreeMap<String, Vec<u8>>),
}

impl Snapshot {
    /// The spec files it holds, as `NAME/KEY` (the path diagnostics show),
    /// and the keys skipped with a reason, `None` when it is absent. Which
    /// keys are spec files is the rule of every source,
    /// [`crate::source::entries::classify`]. A spec file that is not UTF-8
    /// (a `binaryData` key) is an error, as it is in a mounted directory.
    pub fn files(&self, name: &str) -> Option<Result<Listing, SourceError>> {
        let Snapshot::Data(d) = self else {
            return None;
        };
        let mut listing = Listing::default();
        for (k, v) in d {
            let path = PathBuf::from(format!("{name}/{k}"));
            match classify(k, false) {
                Entry::Spec => match String::from_utf8(v.clone()) {
                    Ok(text) => listing.files.push(SourceFile { path, text }),
                    Err(e) => {
                        return Some(Err(SourceError::NotUtf8 {
                            path,
                            offset: e.utf8_error().valid_up_to(),
                        }));
                    }
                },
                Entry::Skipped(reason) => listing.skipped.push(Skipped { path, reason }),
                Entry::Dir | Entry::Other | Entry::Internal => {}
            }
        }
        Some(Ok(listing))
    }
}

fn snapshot(cm: Option<ConfigMap>) -> Snapshot {
    match cm {
        None => Snapshot::Absent,
        Some(cm) => Snapshot::Data(
            cm.data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .chain(
                    cm.binary_data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0)),
                )
                .collect(),
        ),
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
            ("b.yaml".to_string(), b"B".to_vec()),
            ("a.yml".to_string(), b"A".to_vec()),
            ("README.md".to_string(), b"x".to_vec()),
        ]));
        let f = s.files("specs").unwrap().unwrap().files;
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

    /// The kubelet mounts `binaryData` keys as files, so the API reads them
    /// by the same rule: a spec-named one is a spec file (an error when it is
    /// not UTF-8, as in a mounted directory).
    #[test]
    fn binary_data_keys_are_read_like_mounted_files() {
        use k8s_openapi::ByteString;
        let cm = |bytes: &[u8]| ConfigMap {
            data: Some(BTreeMap::from([("a.yaml".to_string(), "A".to_string())])),
            binary_data: Some(BTreeMap::from([
                ("b.yaml".to_string(), ByteString(bytes.to_vec())),
                ("blob.bin".to_string(), ByteString(vec![0xff])),
            ])),
            ..ConfigMap::default()
        };
        let listing = snapshot(Some(cm(b"B"))).files("specs").unwrap().unwrap();
        let texts: Vec<_> = listing.files.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, vec!["A", "B"]);
        let err = snapshot(Some(cm(b"B\xff")))
            .files("specs")
            .unwrap()
            .unwrap_err();
        assert!(
            matches!(&err, SourceError::NotUtf8 { offset: 1, path } if path.ends_with("specs/b.yaml")),
            "{err}"
        );
    }
}
