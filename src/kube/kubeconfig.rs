//! Loading the kubeconfig a Target names, without letting a spec run code or
//! leak a credential.
//!
//! A spec is untrusted: it arrives in a pull request, and `slicectl plan` on
//! pull requests is the usual GitOps flow, on a machine that holds Google
//! credentials. A kubeconfig can run programs (`users[].user.exec`, and the
//! old `auth-provider`s that call `cmd-path`) and read arbitrary files
//! (`tokenFile`, whose content is then *sent* to the kubeconfig's server;
//! `client-certificate`, `client-key`, `certificate-authority`). So:
//!
//! - A kubeconfig **the operator names** is trusted and used as kubectl
//!   would: `$KUBECONFIG`'s entries, `~/.kube/config`, the default used when
//!   a Target names none, and every `--trust-kubeconfig PATH`.
//! - A kubeconfig **only a spec names** (any other path, e.g. a file added to
//!   the spec repository next to the YAML) may not use a credential plugin,
//!   an auth provider, or any file reference: its credentials are inline
//!   (`token`, `client-certificate-data`, `client-key-data`,
//!   `certificate-authority-data`). Otherwise the Target is refused, with
//!   where it is named and what to do.
//! - Either way the file is read as a regular file of at most
//!   [`MAX_KUBECONFIG_BYTES`] ([`crate::source::bounded`]), and no error ever
//!   quotes its content (a kubeconfig holds keys and tokens): a parse error
//!   gives only the line and column.

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

use crate::source::bounded::{BoundedReadError, read_regular};
use crate::spec::Location;

/// Largest kubeconfig slicectl reads (kubeconfigs are a few KiB; a cap keeps
/// `/dev/zero`-like files and mistakes from eating memory).
pub const MAX_KUBECONFIG_BYTES: u64 = 1024 * 1024;

/// Where a kubeconfig path came from, for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The Target that names it.
    pub target: String,
    /// Where that Target's document starts.
    pub location: Location,
}

/// The kubeconfigs the operator named: trusted with credential plugins and
/// file references.
#[derive(Debug, Clone, Default)]
pub struct TrustedKubeconfigs {
    /// Canonical paths.
    paths: Vec<PathBuf>,
}

impl TrustedKubeconfigs {
    /// `$KUBECONFIG`'s entries, `~/.kube/config`, and `extra` (the
    /// `--trust-kubeconfig` flags). Paths that do not exist are left out
    /// (nothing can be read from them anyway).
    pub fn from_env(extra: &[PathBuf]) -> Self {
        let mut candidates: Vec<PathBuf> = extra.to_vec();
        candidates.extend(env_kubeconfigs());
        candidates.extend(home_kubeconfig());
        TrustedKubeconfigs {
            paths: candidates
                .iter()
                .filter_map(|p| std::fs::canonicalize(p).ok())
                .collect(),
        }
    }

    /// Whether `path` is one of them (compared after resolving symlinks).
    pub fn trusts(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|c| self.paths.contains(&c))
    }
}

/// The entries of `$KUBECONFIG` (none when it is unset or empty).
pub(crate) fn env_kubeconfigs() -> Vec<PathBuf> {
    std::env::var_os("KUBECONFIG")
        .filter(|v| !v.is_empty())
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default()
}

/// `~/.kube/config`, when `$HOME` is set.
pub(crate) fn home_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

/// Reads and parses a kubeconfig. `trusted`: named by the operator (see the
/// module docs). Errors never quote the file.
pub fn load(path: &Path, trusted: bool) -> Result<Kubeconfig, String> {
    let bytes = read_regular(path, MAX_KUBECONFIG_BYTES).map_err(|e| match e {
        BoundedReadError::NotFound => "no such file".to_owned(),
        e => e.to_string(),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    let kubeconfig = parse(&text)?;
    if trusted {
        // kube-rs resolves the file references of a trusted kubeconfig
        // relative to its directory, as kubectl does; it reads the file again
        // (already checked to be a small regular file).
        return Kubeconfig::read_from(path).map_err(|_| {
            "cannot be read as a kubeconfig (details withheld: a kubeconfig holds credentials)"
                .to_owned()
        });
    }
    let problems = untrusted_problems(&kubeconfig);
    if problems.is_empty() {
        Ok(kubeconfig)
    } else {
        Err(format!(
            "{}. slicectl runs credential plugins and reads the files a kubeconfig refers to only when \
             the operator names that kubeconfig (KUBECONFIG, ~/.kube/config, or --trust-kubeconfig PATH), \
             never because a spec names it: embed the credentials in it (token, client-certificate-data, \
             client-key-data, certificate-authority-data), or pass --trust-kubeconfig {} if you, the \
             operator, vouch for this file",
            problems.join("; "),
            path.display()
        ))
    }
}

/// Parses kubeconfig YAML (every document, merged as kubectl does). A
/// parse error says only where: its message could quote a key or a token.
pub(crate) fn parse(text: &str) -> Result<Kubeconfig, String> {
    let docs: Vec<Kubeconfig> = serde_saphyr::from_multiple(text).map_err(|e| {
        let at = e
            .location()
            .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
            .unwrap_or_default();
        format!(
            "is not a valid kubeconfig: YAML error{at} (the message is withheld: a kubeconfig holds credentials)"
        )
    })?;
    docs.into_iter()
        .try_fold(Kubeconfig::default(), Kubeconfig::merge)
        .map_err(|_| "is not a valid kubeconfig: its documents cannot be merged".to_owned())
}

/// What a kubeconfig only a spec names may not contain: each credential
/// plugin, auth provider and file reference, by user or cluster name.
pub fn untrusted_problems(k: &Kubeconfig) -> Vec<String> {
    let mut out = Vec::new();
    for named in &k.auth_infos {
        let Some(a) = &named.auth_info else { continue };
        let user = &named.name;
        if let Some(exec) = &a.exec {
            out.push(format!(
                "user {user:?} runs a credential plugin (exec command {:?})",
                exec.command.as_deref().unwrap_or("")
            ));
        }
        if let Some(p) = &a.auth_provider {
            out.push(format!(
                "user {user:?} uses the auth provider {:?} (which may run a command)",
                p.name
            ));
        }
        for (field, value) in [
            ("tokenFile", &a.token_file),
            ("client-certificate", &a.client_certificate),
            ("client-key", &a.client_key),
        ] {
            if value.is_some() {
                out.push(format!("user {user:?} reads a file ({field})"));
            }
        }
    }
    for named in &k.clusters {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            out.push(format!(
                "cluster {:?} reads a file (certificate-authority)",
                named.name
            ));
        }
    }
    out
}

#[cfg(test)]
#[path = "kubeconfig/tests.rs"]
mod tests;
