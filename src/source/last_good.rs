//! The last good version of each spec file, so that in watch mode one broken
//! file does not stop the fleet (design §5).
//!
//! Per file path, [`LastGood`] keeps the last text that parsed and validated
//! as part of a valid fleet. Loading the directory as it is now:
//!
//! - a file that is **present but invalid** (its diagnostics are located in
//!   it) is replaced by its last good text, so everything it defined stays
//!   exactly as it was (nothing it defined is deleted or replaced); a file
//!   that never was good contributes nothing, and is reported as *left out*
//!   (the caller must not prune while any file is left out: what it defines
//!   is unknown);
//! - a file that is **absent** from the listing is a deletion: its last good
//!   text is forgotten and what it defined is pruned (subject to the guards).
//!   A file that cannot be *read* is not absent: reading the directory fails
//!   as a whole and nothing is planned (see [`crate::source::SourceError`]);
//! - a valid file that only fails together with the held versions (it uses
//!   a Target the broken file defined, or defines a name the held version
//!   still defines) is held at its own last good text too, until the set is
//!   valid.
//!
//! The located diagnostics of the files as they are now are returned every
//! time, so they are reported until fixed.

use std::collections::{BTreeMap, BTreeSet};
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;

use crate::spec::{self, Diagnostic, Fleet, SourceFile};

/// The last good text of each spec file.
#[derive(Debug, Default, Clone)]
pub struct LastGood {
    texts: BTreeMap<PathBuf, String>,
    /// What the files of `texts` loaded to, when the last resolve loaded
    /// every file as it was, clean: a controller reads the same files on
    /// every resync, and the next resolve of the very same texts reuses
    /// this instead of parsing them again (parsing is most of a cycle's
    /// cost that grows with the whole fleet, not a shard of it).
    clean: Option<Fleet>,
}

/// The fleet in force after [`LastGood::resolve`].
#[derive(Debug)]
pub struct Resolved {
    /// The valid fleet to reconcile towards.
    pub fleet: Fleet,
    /// The files it was loaded from (held files with their last good text).
    pub files: Vec<SourceFile>,
    /// Every problem of the files as they are now (empty when all are valid).
    pub diagnostics: Vec<Diagnostic>,
    /// Files invalid now (or valid only together with a broken one) whose
    /// last good version is in force.
    pub held: Vec<PathBuf>,
    /// Files invalid now that never were good: they contribute nothing, and
    /// nothing may be pruned while any is left out.
    pub left_out: Vec<PathBuf>,
}

impl Resolved {
    /// Whether every file is in force as it is now.
    pub fn clean(&self) -> bool {
        self.diagnostics.is_empty() && self.held.is_empty() && self.left_out.is_empty()
    }
}

/// No valid fleet could be composed from the files and their last good
/// versions (e.g. a held file uses a Target whose file was deleted): nothing
/// may be planned.
#[derive(Debug)]
pub struct Unresolvable {
    /// Every problem of the files as they are now.
    pub diagnostics: Vec<Diagnostic>,
}

impl LastGood {
    /// An empty store (nothing is known good yet).
    pub fn new() -> Self {
        LastGood::default()
    }

    /// The last good text of `path`, if any.
    pub fn get(&self, path: &std::path::Path) -> Option<&str> {
        self.texts.get(path).map(String::as_str)
    }

    /// Resolves the files as they are now into the fleet in force (see the
    /// module documentation), and records what is good now.
    pub fn resolve(&mut self, current: &[SourceFile]) -> Result<Resolved, Unresolvable> {
        if let Some(fleet) = self.clean.as_ref().filter(|_| self.unchanged(current)) {
            tracing::debug!(
                files = current.len(),
                "spec files unchanged: their fleet is reused"
            );
            return Ok(Resolved {
                fleet: fleet.clone(),
                files: current.to_vec(),
                diagnostics: Vec::new(),
                held: Vec::new(),
                left_out: Vec::new(),
            });
        }
        self.clean = None;
        let present: BTreeSet<&PathBuf> = current.iter().map(|f| &f.path).collect();
        // A file absent from the listing is a deletion.
        self.texts.retain(|p, _| present.contains(p));
        let diagnostics = match spec::load(current) {
            Ok(fleet) => {
                self.record(current.iter());
                self.clean = Some(fleet.clone());
                return Ok(Resolved {
                    fleet,
                    files: current.to_vec(),
                    diagnostics: Vec::new(),
                    held: Vec::new(),
                    left_out: Vec::new(),
                });
            }
            Err(d) => d,
        };
        let mut all = diagnostics.clone();
        let mut suspect = located_in(&diagnostics, &present);
        loop {
            let composed = self.compose(current, &suspect);
            match spec::load(&composed) {
                Ok(fleet) => {
                    self.record(current.iter().filter(|f| !suspect.contains(&f.path)));
                    return Ok(self.resolved(current, fleet, composed, all, &suspect));
                }
                Err(d) => {
                    let more: BTreeSet<PathBuf> = located_in(&d, &present)
                        .difference(&suspect)
                        .cloned()
                        .collect();
                    if more.is_empty() {
                        break;
                    }
                    // Why these files are held too: their problems against
                    // the held versions.
                    all.extend(d.into_iter().filter(|x| more.contains(&x.location.file)));
                    suspect.extend(more);
                }
            }
        }
        // Last resort: every file that has a last good version, at that
        // version; new files left out.
        let every: BTreeSet<PathBuf> = present.iter().map(|p| (*p).clone()).collect();
        let composed = self.compose(current, &every);
        all.sort();
        all.dedup();
        match spec::load(&composed) {
            Ok(fleet) if !composed.is_empty() => {
                Ok(self.resolved(current, fleet, composed, all, &every))
            }
            _ => Err(Unresolvable { diagnostics: all }),
        }
    }

    /// Whether `current` is exactly the files last recorded: the same
    /// paths, the same texts.
    fn unchanged(&self, current: &[SourceFile]) -> bool {
        current.len() == self.texts.len()
            && current
                .iter()
                .all(|f| self.texts.get(&f.path).is_some_and(|t| *t == f.text))
    }

    fn record<'a>(&mut self, files: impl Iterator<Item = &'a SourceFile>) {
        for f in files {
            self.texts.insert(f.path.clone(), f.text.clone());
        }
    }

    /// The files now, each suspect one at its last good text (or left out).
    fn compose(&self, current: &[SourceFile], suspect: &BTreeSet<PathBuf>) -> Vec<SourceFile> {
        current
            .iter()
            .filter_map(|f| {
                if !suspect.contains(&f.path) {
                    return Some(f.clone());
                }
                self.texts.get(&f.path).map(|text| SourceFile {
                    path: f.path.clone(),
                    text: text.clone(),
                })
            })
            .collect()
    }

    fn resolved(
        &self,
        current: &[SourceFile],
        fleet: Fleet,
        files: Vec<SourceFile>,
        mut diagnostics: Vec<Diagnostic>,
        suspect: &BTreeSet<PathBuf>,
    ) -> Resolved {
        diagnostics.sort();
        diagnostics.dedup();
        let (held, left_out): (Vec<PathBuf>, Vec<PathBuf>) = suspect
            .iter()
            .cloned()
            .partition(|p| self.texts.contains_key(p));
        // Held means: what is in force differs from what the file says now.
        let held = held
            .into_iter()
            .filter(|p| {
                let now = current
                    .iter()
                    .find(|f| &f.path == p)
                    .map(|f| f.text.as_str());
                now != self.texts.get(p).map(String::as_str)
            })
            .collect();
        Resolved {
            fleet,
            files,
            diagnostics,
            held,
            left_out,
        }
    }
}

/// The present files the diagnostics are located in.
fn located_in(diagnostics: &[Diagnostic], present: &BTreeSet<&PathBuf>) -> BTreeSet<PathBuf> {
    diagnostics
        .iter()
        .map(|d| &d.location.file)
        .filter(|f| present.contains(f))
        .cloned()
        .collect()
}

#[cfg(test)]
#[path = "last_good/tests.rs"]
mod tests;
