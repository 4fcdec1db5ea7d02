//! Specs from ConfigMaps, read through an API watch: one ConfigMap by name
//! (`--configmap`, kube-runtime's `watch_object`), or every ConfigMap a
//! label selector matches (`--configmap-selector`, kube-runtime's
//! `watcher`), one per team say, read together as one fleet. Data keys are
//! file names, values the files; a file is shown as `CONFIGMAP/KEY`, so
//! errors name the ConfigMap and the key.
//!
//! The watch keeps the latest version in a [`tokio::sync::watch`] channel
//! and sends a change message when the data changed (metadata-only updates
//! do not run a cycle). A ConfigMap that is absent, or was deleted, is
//! [`Snapshot::Absent`]; a selector that matches none is an empty
//! [`Selected`]: either way the controller plans nothing and prunes nothing.
//! One ConfigMap is written whole, but a set is not: a slice moved from one
//! team's ConfigMap to another's, or a ConfigMap deleted and created again,
//! can be read half done, so the set is stamped ([`Selected::files`]) and
//! its destructive steps wait for the settle period, as a directory's do.

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc::UnboundedSender;

use crate::source::SourceError;
use crate::source::entries::{Entry, Listing, Skipped, classify};
use crate::source::stamp::Stamper;
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
        Some(listing_of(name, d))
    }
}

/// The spec files of one ConfigMap's data, as `NAME/KEY`, and the keys
/// skipped (see [`Snapshot::files`]).
fn listing_of(name: &str, data: &BTreeMap<String, Vec<u8>>) -> Result<Listing, SourceError> {
    let mut listing = Listing::default();
    for (k, v) in data {
        let path = PathBuf::from(format!("{name}/{k}"));
        match classify(k, false) {
            Entry::Spec => match std::str::from_utf8(v) {
                Ok(text) => listing.files.push(SourceFile {
                    path,
                    text: text.to_string(),
                }),
                Err(e) => {
                    return Err(SourceError::NotUtf8 {
                        path,
                        offset: e.valid_up_to(),
                    });
                }
            },
            Entry::Skipped(reason) => listing.skipped.push(Skipped { path, reason }),
            Entry::Dir | Entry::Other | Entry::Internal => {}
        }
    }
    Ok(listing)
}

/// The ConfigMaps a label selector matches now, by name, each as its data
/// (`data` and `binaryData`, as [`Snapshot::Data`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selected(pub BTreeMap<String, BTreeMap<String, Vec<u8>>>);

impl Selected {
    /// Every matching ConfigMap's spec files, as `NAME/KEY`, read as one
    /// fleet, and the keys skipped; `None` when none matches (a missing
    /// source: nothing is planned or pruned). The listing is stamped with a
    /// hash of every file's path and text, so the settle period sees a set
    /// that is still changing ([`crate::cycle::settle`]).
    pub fn files(&self) -> Option<Result<Listing, SourceError>> {
        if self.0.is_empty() {
            return None;
        }
        let mut all = Listing::default();
        for (name, data) in &self.0 {
            match listing_of(name, data) {
                Ok(l) => {
                    all.files.extend(l.files);
                    all.skipped.extend(l.skipped);
                }
                Err(e) => return Some(Err(e)),
            }
        }
        // ConfigMap names have no `/`, so `NAME/KEY` sorts by name, then key.
        all.files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut stamper = Stamper::new();
        for f in &all.files {
            stamper.file(&f.path, &f.text, None);
        }
        all.stamp = stamper.finish();
        Some(Ok(all))
    }
}

/// What a ConfigMap the API answered holds (`data` and `binaryData`).
pub(crate) fn snapshot(cm: Option<ConfigMap>) -> Snapshot {
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

/// Watches every ConfigMap matching `selector` in `api`'s namespace until
/// `changes` closes. `latest` gets every version of the set (`None` until
/// the first complete list); `changes` a message each time the data of the
/// set changed after that. A relist (the watch restarted) replaces the set
/// only once complete, so a restart never shows a partial set.
pub async fn watch_selected(
    api: Api<ConfigMap>,
    selector: String,
    latest: tokio::sync::watch::Sender<Option<Selected>>,
    changes: UnboundedSender<()>,
) {
    let stream = watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    futures::pin_mut!(stream);
    let mut current = Selected::default();
    let mut relist: Option<Selected> = None;
    let mut reported = false;
    let name_of = |cm: &ConfigMap| cm.metadata.name.clone().unwrap_or_default();
    let data_of = |cm: ConfigMap| match snapshot(Some(cm)) {
        Snapshot::Data(d) => d,
        Snapshot::Absent => BTreeMap::new(),
    };
    loop {
        let item = tokio::select! {
            () = changes.closed() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else {
            tracing::error!(selector = %selector, "the ConfigMap watch ended; only the periodic resync runs cycles now");
            return;
        };
        match item {
            Ok(Event::Init) => relist = Some(Selected::default()),
            Ok(Event::InitApply(cm)) => {
                if let Some(set) = relist.as_mut() {
                    set.0.insert(name_of(&cm), data_of(cm));
                }
            }
            Ok(Event::InitDone) => {
                reported = false;
                if let Some(set) = relist.take() {
                    current = set;
                    publish(&selector, &current, &latest, &changes);
                }
            }
            Ok(Event::Apply(cm)) => {
                current.0.insert(name_of(&cm), data_of(cm));
                publish(&selector, &current, &latest, &changes);
            }
            Ok(Event::Delete(cm)) => {
                current.0.remove(&name_of(&cm));
                publish(&selector, &current, &latest, &changes);
            }
            Err(e) => {
                // Retried with backoff; the last set read stays in force.
                if !reported {
                    tracing::warn!(selector = %selector, error = %e, "cannot watch the spec ConfigMaps; retrying (the last set read stays in force)");
                    reported = true;
                }
            }
        }
    }
}

/// Publishes the set when it changed, and asks for a cycle unless it is
/// the first read.
fn publish(
    selector: &str,
    now: &Selected,
    latest: &tokio::sync::watch::Sender<Option<Selected>>,
    changes: &UnboundedSender<()>,
) {
    let first = latest.borrow().is_none();
    if latest.borrow().as_ref() == Some(now) {
        return;
    }
    let names: Vec<&str> = now.0.keys().map(String::as_str).collect();
    tracing::info!(
        selector = %selector,
        configmaps = ?names,
        "spec ConfigMaps {}",
        if first { "read" } else { "changed" }
    );
    latest.send_replace(Some(now.clone()));
    if !first {
        let _ = changes.send(());
    }
}

#[cfg(test)]
#[path = "configmap/tests.rs"]
mod tests;
