//! Spec files from a committed git revision (`reconcile DIR --git-ref
//! REF`): the tree of the commit REF names, at DIR's place in its
//! repository, instead of DIR's working files.
//!
//! A commit is atomic by construction: whatever rewrites the working files
//! (a `git pull` or `git checkout` of a large file, an editor, `rsync`), the
//! tree of a commit is complete or absent, never half written. This is why
//! Flux reconciles *artifacts* (a tarball of one revision) rather than a
//! working tree.
//!
//! Security: a spec directory is untrusted input, and a repository's own
//! configuration (`core.fsmonitor`, hooks, filters, `core.pager`, …) can
//! make the `git` CLI run commands. So slicectl never runs `git`: it reads
//! objects with `gix`, built with `sha1` only (none of its `command`,
//! `attributes`/filters, `credentials` or network-client features), opened
//! *isolated* (only the repository's own config file is read, for object
//! format and the like: no system, user or environment config, no include
//! files, and the `git` binary is never asked where its config lives). It
//! reads references and objects only; no worktree, index, filter or hook
//! is touched, and no process is started (the one process-spawning crate
//! gix links, `gix-command` through its transport, serves fetch and push,
//! never called here). `a_repositorys_config_runs_no_command` proves it
//! against a repository whose config points every such hook at a script.
//!
//! Which entries are spec files is [`super::entries::classify`]'s rule, the
//! same as for a directory. A symlink in the tree named like a spec file is
//! an error (it is not followed: its target could be outside the commit),
//! as a special file is in a directory.

use std::path::{Path, PathBuf};

use super::SourceError;
use super::entries::{Entry, Listing, Skipped, classify};
use super::stamp::Stamp;
use crate::spec::{MAX_FILE_BYTES, ShownPath, SourceFile};

/// A revision of the specs under `dir`, as `git` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRef {
    /// The spec directory (in a git work tree, or a bare repository's
    /// directory).
    pub dir: PathBuf,
    /// The revision: a reference (`HEAD`, `main`, `origin/main`,
    /// `refs/tags/v1`) or a full commit id.
    pub reference: String,
}

/// The commit a [`GitRef`] resolved to, and what was read from its tree.
#[derive(Debug, Clone)]
pub struct Revision {
    /// The commit id (hex).
    pub commit: String,
    /// The spec files and skipped entries; the stamp is the id of DIR's
    /// tree in the commit.
    pub listing: Listing,
}

fn git_error(path: &Path, message: impl Into<String>) -> SourceError {
    SourceError::Git {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The repository holding `dir`, opened isolated (module documentation),
/// and `dir`'s path inside its work tree.
fn open(dir: &Path) -> Result<(gix::Repository, PathBuf), SourceError> {
    let canonical =
        std::fs::canonicalize(dir).map_err(|source| SourceError::opening(dir, source))?;
    let isolated = gix::open::Options::isolated();
    let repo = gix::ThreadSafeRepository::discover_opts(
        &canonical,
        gix::discover::upwards::Options::default(),
        gix::sec::trust::Mapping {
            full: isolated.clone(),
            reduced: isolated,
        },
    )
    .map_err(|e| {
        git_error(
            dir,
            format!(
                "is not inside a git repository ({e}); --git-ref reads the specs from a commit, so DIR must be in a git work tree (or drop --git-ref to read its files)"
            ),
        )
    })?
    .to_thread_local();
    let root = repo
        .workdir()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| repo.git_dir().to_path_buf());
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let rel = canonical
        .strip_prefix(&root)
        .map(Path::to_path_buf)
        .map_err(|_| {
            git_error(
                dir,
                format!(
                    "is not inside the work tree of the repository at {} (a bare repository, or a .git directory itself?); pass a directory of the work tree",
                    ShownPath(&root)
                ),
            )
        })?;
    Ok((repo, rel))
}

/// The commit `reference` names in `repo`.
fn commit_of<'r>(
    repo: &'r gix::Repository,
    dir: &Path,
    reference: &str,
) -> Result<gix::Commit<'r>, SourceError> {
    let unknown = |e: &dyn std::fmt::Display| {
        git_error(
            dir,
            format!(
                "the revision {reference:?} is not known in its repository ({e}); name a branch (main), a remote branch (origin/main), a tag, HEAD or a full commit id"
            ),
        )
    };
    if let Ok(id) = gix::ObjectId::from_hex(reference.as_bytes()) {
        return repo
            .find_object(id)
            .and_then(|o| o.peel_to_commit())
            .map_err(|e| unknown(&e));
    }
    let mut r = repo.find_reference(reference).map_err(|e| unknown(&e))?;
    r.peel_to_commit().map_err(|e| {
        git_error(
            dir,
            format!("the revision {reference:?} does not name a commit ({e})"),
        )
    })
}

/// The id of the commit `r` names now (cheap: no tree is read), for a
/// watch loop to notice that the reference moved.
pub fn resolve(r: &GitRef) -> Result<String, SourceError> {
    let (repo, _) = open(&r.dir)?;
    Ok(commit_of(&repo, &r.dir, &r.reference)?
        .id
        .to_hex()
        .to_string())
}

/// Reads the spec files under `r.dir` from the tree of the commit
/// `r.reference` names. Files are shown as `DIR/path` (as a directory read
/// shows them), relative to the current directory when possible.
pub fn read(r: &GitRef) -> Result<Revision, SourceError> {
    let (repo, rel) = open(&r.dir)?;
    let commit = commit_of(&repo, &r.dir, &r.reference)?;
    let short = commit.id.to_hex_with_len(12).to_string();
    let root = commit.tree().map_err(|e| {
        git_error(
            &r.dir,
            format!("cannot read the tree of commit {short}: {e}"),
        )
    })?;
    let tree = if rel.as_os_str().is_empty() {
        root
    } else {
        let entry = root
            .lookup_entry_by_path(&rel)
            .map_err(|e| git_error(&r.dir, format!("cannot read the tree of commit {short}: {e}")))?
            .ok_or_else(|| {
                git_error(
                    &r.dir,
                    format!(
                        "is not in commit {short} ({} at {:?}): commit the directory, or name a revision that has it",
                        ShownPath(&rel),
                        r.reference
                    ),
                )
            })?;
        if !entry.mode().is_tree() {
            return Err(git_error(
                &r.dir,
                format!(
                    "is not a directory in commit {short} ({:?}); expected a directory of *.yaml spec files",
                    r.reference
                ),
            ));
        }
        repo.find_tree(entry.object_id()).map_err(|e| {
            git_error(
                &r.dir,
                format!("cannot read the tree of commit {short}: {e}"),
            )
        })?
    };
    let stamp = Stamp::of_id(tree.id.to_hex().to_string());
    let cwd = std::env::current_dir().ok();
    let shown_root = crate::source::dir::display_path(&r.dir, cwd.as_deref());
    let mut listing = Listing {
        stamp,
        ..Listing::default()
    };
    walk(&repo, &tree, &shown_root, &short, &mut listing)?;
    listing.files.sort_by(|a, b| a.path.cmp(&b.path));
    listing.skipped.sort();
    Ok(Revision {
        commit: commit.id.to_hex().to_string(),
        listing,
    })
}

fn walk(
    repo: &gix::Repository,
    tree: &gix::Tree<'_>,
    shown: &Path,
    short: &str,
    out: &mut Listing,
) -> Result<(), SourceError> {
    let broken = |e: &dyn std::fmt::Display| {
        git_error(
            shown,
            format!("cannot read the tree of commit {short}: {e}"),
        )
    };
    for entry in tree.iter() {
        let entry = entry.map_err(|e| broken(&e))?;
        let name = entry.filename().to_string();
        let path = shown.join(&name);
        let mode = entry.mode();
        match classify(&name, mode.is_tree() || mode.is_commit()) {
            Entry::Dir if mode.is_commit() => out.skipped.push(Skipped {
                path,
                reason: "a git submodule: not read (its commit is another repository's)".into(),
            }),
            Entry::Dir => {
                let sub = repo.find_tree(entry.object_id()).map_err(|e| broken(&e))?;
                walk(repo, &sub, &path, short, out)?;
            }
            Entry::Spec if !mode.is_blob() => {
                return Err(SourceError::NotRegularFile {
                    path,
                    kind: format!(
                        "a symlink in commit {short} (not followed with --git-ref: its target could lie outside the commit)"
                    ),
                });
            }
            Entry::Spec => {
                let id = entry.object_id();
                let size = repo.find_header(id).map_err(|e| broken(&e))?.size();
                if size > u64::try_from(MAX_FILE_BYTES).unwrap_or(u64::MAX) {
                    return Err(SourceError::TooLarge {
                        path,
                        limit: MAX_FILE_BYTES,
                    });
                }
                let blob = repo.find_blob(id).map_err(|e| broken(&e))?;
                let text =
                    String::from_utf8(blob.data.clone()).map_err(|e| SourceError::NotUtf8 {
                        path: path.clone(),
                        offset: e.utf8_error().valid_up_to(),
                    })?;
                out.files.push(SourceFile { path, text });
            }
            Entry::Skipped(reason) => out.skipped.push(Skipped { path, reason }),
            Entry::Other | Entry::Internal => {}
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "git/tests.rs"]
mod tests;
