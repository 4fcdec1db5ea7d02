//! Where a cycle's specs come from: a directory (a checkout, or a mounted
//! ConfigMap read as one version) or a ConfigMap through an API watch. Each
//! lists its entries by the one rule of [`crate::source::entries`]; the
//! cycle then resolves them against the last good versions.

use std::path::PathBuf;

use crate::controller::configmap::{Selected, Snapshot};
use crate::source::git::GitRef;
use crate::source::stamp::Stamp;
use crate::source::{Listing, SourceError};
use crate::spec::ShownPath;

/// A source of spec files, read once per cycle.
pub trait SpecSource {
    /// Where the specs come from, for people.
    fn describe(&self) -> String;
    /// The spec files now, and the entries skipped; `Ok(None)` when the
    /// source does not exist (nothing is planned or pruned then).
    fn read(&self) -> Result<Option<Listing>, SourceError>;
    /// Whether a read can see the source half written (working files), so
    /// that steps destroying capacity wait for it to settle
    /// ([`crate::cycle::settle`]). A ConfigMap (one object, written whole)
    /// and a git commit are atomic: they do not.
    fn settles(&self) -> bool {
        false
    }
    /// The source stamped again (read again), `None` when it cannot be
    /// read now.
    fn restamp(&self) -> Option<Stamp> {
        self.read().ok().flatten().map(|l| l.stamp)
    }
}

/// A spec directory.
#[derive(Debug, Clone)]
pub struct DirSource {
    /// The directory.
    pub dir: PathBuf,
}

impl SpecSource for DirSource {
    fn describe(&self) -> String {
        ShownPath(&self.dir).to_string()
    }

    fn read(&self) -> Result<Option<Listing>, SourceError> {
        match crate::source::list_dir(&self.dir) {
            Ok(f) => Ok(Some(f)),
            Err(SourceError::Missing { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn settles(&self) -> bool {
        true
    }
}

/// A spec directory read from a committed revision (`--git-ref`): atomic
/// by construction ([`crate::source::git`]).
#[derive(Debug, Clone)]
pub struct GitSource {
    /// The directory and the revision.
    pub git: GitRef,
}

impl SpecSource for GitSource {
    fn describe(&self) -> String {
        format!("{} at {}", ShownPath(&self.git.dir), self.git.reference)
    }

    fn read(&self) -> Result<Option<Listing>, SourceError> {
        match crate::source::git::read(&self.git) {
            Ok(rev) => {
                tracing::debug!(
                    target: crate::watch::LOG_TARGET,
                    dir = %ShownPath(&self.git.dir),
                    reference = %self.git.reference,
                    commit = %rev.commit,
                    files = rev.listing.files.len(),
                    "read the specs from a commit"
                );
                Ok(Some(rev.listing))
            }
            Err(SourceError::Missing { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// One ConfigMap, as its API watch ([`crate::controller::configmap::watch`])
/// last saw it.
#[derive(Debug, Clone)]
pub struct ConfigMapSource {
    /// The ConfigMap's name.
    pub name: String,
    /// The latest version (`None` until the first is read).
    pub latest: tokio::sync::watch::Receiver<Option<Snapshot>>,
}

impl SpecSource for ConfigMapSource {
    fn describe(&self) -> String {
        format!("ConfigMap {}", self.name)
    }

    fn read(&self) -> Result<Option<Listing>, SourceError> {
        self.latest
            .borrow()
            .as_ref()
            .and_then(|s| s.files(&self.name))
            .transpose()
    }
}

/// Every ConfigMap a label selector matches, as their API watch
/// ([`crate::controller::configmap::watch_selected`]) last saw them: one
/// fleet, files shown as `CONFIGMAP/KEY`. None matching is a missing source.
/// A set is not written at once (a slice moved between two ConfigMaps, a
/// ConfigMap deleted and created again), so it settles like a directory.
#[derive(Debug, Clone)]
pub struct ConfigMapSetSource {
    /// The label selector.
    pub selector: String,
    /// The latest set (`None` until the first complete list).
    pub latest: tokio::sync::watch::Receiver<Option<Selected>>,
}

impl SpecSource for ConfigMapSetSource {
    fn describe(&self) -> String {
        format!("ConfigMaps matching {}", self.selector)
    }

    fn read(&self) -> Result<Option<Listing>, SourceError> {
        self.latest
            .borrow()
            .as_ref()
            .and_then(Selected::files)
            .transpose()
    }

    fn settles(&self) -> bool {
        true
    }
}

/// The controller's source: a mounted directory (`--dir`) or a ConfigMap;
/// `reconcile --watch`'s: a directory, or its committed revision.
#[derive(Debug, Clone)]
pub enum AnySource {
    /// `--dir`.
    Dir(DirSource),
    /// `--git-ref`.
    Git(GitSource),
    /// `--configmap`.
    ConfigMap(ConfigMapSource),
    /// `--configmap-selector`.
    ConfigMaps(ConfigMapSetSource),
}

impl SpecSource for AnySource {
    fn describe(&self) -> String {
        match self {
            AnySource::Dir(s) => s.describe(),
            AnySource::Git(s) => s.describe(),
            AnySource::ConfigMap(s) => s.describe(),
            AnySource::ConfigMaps(s) => s.describe(),
        }
    }

    fn settles(&self) -> bool {
        match self {
            AnySource::Dir(s) => s.settles(),
            AnySource::Git(s) => s.settles(),
            AnySource::ConfigMap(s) => s.settles(),
            AnySource::ConfigMaps(s) => s.settles(),
        }
    }

    fn read(&self) -> Result<Option<Listing>, SourceError> {
        match self {
            AnySource::Dir(s) => s.read(),
            AnySource::Git(s) => s.read(),
            AnySource::ConfigMap(s) => s.read(),
            AnySource::ConfigMaps(s) => s.read(),
        }
    }
}
