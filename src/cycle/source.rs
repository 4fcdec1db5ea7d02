//! Where a cycle's specs come from: a directory (a checkout, or a mounted
//! ConfigMap read as one version) or a ConfigMap through an API watch. Each
//! lists its entries by the one rule of [`crate::source::entries`]; the
//! cycle then resolves them against the last good versions.

use std::path::PathBuf;

use crate::controller::configmap::Snapshot;
use crate::source::{Listing, SourceError};
use crate::spec::ShownPath;

/// A source of spec files, read once per cycle.
pub trait SpecSource {
    /// Where the specs come from, for people.
    fn describe(&self) -> String;
    /// The spec files now, and the entries skipped; `Ok(None)` when the
    /// source does not exist (nothing is planned or pruned then).
    fn read(&self) -> Result<Option<Listing>, SourceError>;
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

/// The controller's source: a mounted directory (`--dir`) or a ConfigMap.
#[derive(Debug, Clone)]
pub enum AnySource {
    /// `--dir`.
    Dir(DirSource),
    /// `--configmap`.
    ConfigMap(ConfigMapSource),
}

impl SpecSource for AnySource {
    fn describe(&self) -> String {
        match self {
            AnySource::Dir(s) => s.describe(),
            AnySource::ConfigMap(s) => s.describe(),
        }
    }

    fn read(&self) -> Result<Option<Listing>, SourceError> {
        match self {
            AnySource::Dir(s) => s.read(),
            AnySource::ConfigMap(s) => s.read(),
        }
    }
}
