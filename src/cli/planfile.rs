//! Saved plans (`plan --out FILE`, `apply FILE`).
//!
//! A plan file holds the plan, the spec files it was made from and the
//! safety options it was made with, sealed by a digest. `apply FILE` never
//! trusts the file's actions: it checks the digest (an edited file is
//! refused), loads the embedded specs, observes the same places again,
//! plans again with every guard (ownership, preventDestroy, the destroy cap,
//! the empty source) and executes only when that fresh plan is exactly the
//! saved one.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use serde_json::Value;

use crate::plan::{FORMAT_VERSION, Plan, PlanOptions};
use crate::spec::{ShownPath, SourceFile};

const KIND: &str = "slicectl-plan";

/// Largest plan file written or read (64 MiB): the specs it embeds, JSON
/// escaped, and the plan. It is read as a regular file of at most this
/// size, never as a FIFO or a device.
pub const MAX_PLAN_FILE_BYTES: usize = 64 * 1024 * 1024;
/// Version of the plan file's envelope (2: specs, options and digest embedded).
const FILE_VERSION: u32 = 2;

/// The safety options a plan was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedOptions {
    /// `--max-destroy`.
    pub max_destroy: usize,
    /// `--allow-empty-source`.
    pub allow_empty_source: bool,
    /// `--allow-unverified-delete` (absent in files saved before it existed).
    #[serde(default)]
    pub allow_unverified_delete: bool,
}

impl From<SavedOptions> for PlanOptions {
    fn from(o: SavedOptions) -> PlanOptions {
        PlanOptions {
            max_destroy: o.max_destroy,
            allow_empty_source: o.allow_empty_source,
            allow_unverified_delete: o.allow_unverified_delete,
            disrupt: false,
        }
    }
}

/// One spec file as it was when the plan was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedSpec {
    /// Path as shown in diagnostics.
    pub path: String,
    /// Text.
    pub text: String,
}

/// The command a plan file was saved by, when not `plan`: `apply FILE`
/// shapes its fresh plan the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedCommand {
    /// `slicectl adopt … --plan-out`: these live resources of this Target.
    Adopt {
        /// The Target.
        target: String,
        /// The node pools or MIGs adopted (by name).
        names: Vec<String>,
    },
    /// `slicectl release … --plan-out`: these slices.
    Release {
        /// The slices.
        slices: Vec<String>,
    },
}

/// The sealed content of a plan file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Body {
    kind: String,
    file_version: u32,
    format_version: u32,
    /// Absent in a plain plan (and in files saved before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<SavedCommand>,
    options: SavedOptions,
    specs: Vec<SavedSpec>,
    /// The published JSON of the plan (`plan --output json`).
    plan: Value,
}

/// A plan file: the body and its digest.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct File {
    #[serde(flatten)]
    body: Body,
    digest: String,
}

/// A loaded, digest-checked plan file.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedPlan {
    /// The options it was made with.
    pub options: SavedOptions,
    /// The spec files it was made from.
    pub specs: Vec<SourceFile>,
    /// The observed fingerprint the plan was made from.
    pub observed_fingerprint: String,
    /// What the saved plan does and refuses ([`Plan::effect`]).
    pub effect: Value,
    /// The command that saved it, when not `plan`.
    pub command: Option<SavedCommand>,
}

fn digest(body: &Body) -> Result<String> {
    let bytes = serde_json::to_vec(body).context("cannot serialise the plan")?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Writes the plan file.
pub fn save(path: &Path, plan: &Plan, specs: &[SourceFile], options: SavedOptions) -> Result<()> {
    save_command(path, plan, specs, options, None)
}

/// Writes the plan file of `command` (`None`: `plan`).
pub fn save_command(
    path: &Path,
    plan: &Plan,
    specs: &[SourceFile],
    options: SavedOptions,
    command: Option<SavedCommand>,
) -> Result<()> {
    let body = Body {
        kind: KIND.to_string(),
        file_version: FILE_VERSION,
        format_version: FORMAT_VERSION,
        command,
        options,
        specs: specs
            .iter()
            .map(|f| SavedSpec {
                path: f.path.display().to_string(),
                text: f.text.clone(),
            })
            .collect(),
        plan: plan.to_json(),
    };
    let file = File {
        digest: digest(&body)?,
        body,
    };
    let text = serde_json::to_string_pretty(&file)?;
    if text.len() > MAX_PLAN_FILE_BYTES {
        bail!(
            "the plan file would be {} bytes, more than the {MAX_PLAN_FILE_BYTES} bytes (64 MiB) `apply PLANFILE` reads; \
             apply from the spec directory instead, or split the fleet",
            text.len()
        );
    }
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the plan file {}", path.display()))
}

/// Reads a plan file and checks its digest.
pub fn load(path: &Path) -> Result<SavedPlan> {
    let limit = u64::try_from(MAX_PLAN_FILE_BYTES).unwrap_or(u64::MAX);
    let bytes = crate::source::bounded::read_regular(path, limit)
        .with_context(|| format!("cannot read the plan file {}", ShownPath(path)))?;
    decode(path, &bytes)
}

/// Reads the bytes of the plan file `path` and checks its digest.
pub fn decode(path: &Path, bytes: &[u8]) -> Result<SavedPlan> {
    let head: serde_json::Value = serde_json::from_slice(bytes).with_context(|| {
        format!(
            "{} is not a slicectl plan file (expected the output of `slicectl plan --out`)",
            ShownPath(path)
        )
    })?;
    let kind = head.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let version = head.get("file_version").and_then(|v| v.as_u64());
    if kind != KIND || version != Some(u64::from(FILE_VERSION)) {
        bail!(
            "{} is not a plan file this slicectl reads (kind {kind:?}, file version {}; expected {KIND:?} version {FILE_VERSION}); \
             make it again with `slicectl plan DIR --out {}`",
            ShownPath(path),
            version.map_or("none".to_string(), |v| v.to_string()),
            ShownPath(path)
        );
    }
    let file: File = serde_json::from_value(head).with_context(|| {
        format!(
            "{} is damaged: it does not have the shape of a slicectl plan file",
            ShownPath(path)
        )
    })?;
    let published_version = file.body.plan.get("format_version").and_then(Value::as_u64);
    if file.body.format_version != FORMAT_VERSION
        || published_version != Some(u64::from(FORMAT_VERSION))
    {
        bail!(
            "{} holds a plan of format {}; this slicectl reads format {FORMAT_VERSION}",
            ShownPath(path),
            file.body.format_version
        );
    }
    if digest(&file.body)? != file.digest {
        bail!(
            "{} was edited after `slicectl plan --out` wrote it (its digest does not match its content); \
             refusing to apply it. Make the plan again with `slicectl plan DIR --out {}`",
            ShownPath(path),
            ShownPath(path)
        );
    }
    Ok(SavedPlan {
        options: file.body.options,
        specs: file
            .body
            .specs
            .into_iter()
            .map(|s| SourceFile {
                path: PathBuf::from(s.path),
                text: s.text,
            })
            .collect(),
        observed_fingerprint: file
            .body
            .plan
            .get("observed_fingerprint")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        effect: crate::plan::view::effect(&file.body.plan),
        command: file.body.command,
    })
}

/// `bytes` (a plan file's JSON) sealed again with the digest of its own
/// content, `None` when it does not have a plan file's shape: what the
/// fuzz target uses to reach past the digest check.
#[cfg(any(test, feature = "test-support"))]
pub(crate) fn reseal(bytes: &[u8]) -> Option<Vec<u8>> {
    let file: File = serde_json::from_slice(bytes).ok()?;
    let sealed = File {
        digest: digest(&file.body).ok()?,
        body: file.body,
    };
    serde_json::to_vec_pretty(&sealed).ok()
}

#[cfg(test)]
#[path = "planfile/tests.rs"]
mod tests;
