//! `slicectl adopt` and `slicectl release`: the shell around
//! [`crate::plan::adopt`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};

use super::args::{Connection, Exec};
use super::planfile::{self, SavedCommand};
use super::{EXIT_ERROR, Session, load_observable, reconcile_in};
use crate::engine;
use crate::plan::adopt::{self, Proposal, Selection};
use crate::plan::{Inventory, Plan, PlanMode, PlanOptions, ResourceId};
use crate::spec::{Fleet, SourceFile};

/// What `slicectl adopt` was asked.
pub struct AdoptArgs {
    /// Spec directory.
    pub dir: PathBuf,
    /// The Target.
    pub target: String,
    /// Which resources.
    pub selection: Selection,
    /// Where the files go.
    pub out: PathBuf,
    /// Overwrite existing files.
    pub force: bool,
    /// Write the files outside `dir` ([`out_within`]).
    pub out_outside_source: bool,
    /// Save the plan here instead of applying it.
    pub plan_out: Option<PathBuf>,
}

/// How a plan is prepared and edited for a command.
type Prepare = Box<dyn Fn(&mut Inventory) + Send + Sync>;
/// See [`Prepare`].
type Edit = Box<dyn Fn(&Inventory, &mut Plan) + Send + Sync>;

/// The preparation and edit of a fresh plan for a saved command: an
/// adoption takes the same live resources by name again and keeps only
/// their adoption; a release keeps only the release. A plain plan is
/// neither prepared nor edited.
pub fn shaping(command: Option<&SavedCommand>, fleet: &Fleet) -> Result<(Prepare, Edit)> {
    match command {
        None => Ok((Box::new(|_| {}), Box::new(|_, _| {}))),
        Some(SavedCommand::Adopt { target, names }) => {
            let Some(t) = fleet.targets.get(target).cloned() else {
                bail!(
                    "the saved adoption names Target {target:?}, which its saved specs do not define; make the plan again"
                );
            };
            let selection = Selection::Names(names.clone());
            let (t2, selection2) = (t.clone(), selection.clone());
            let proposals = move |inv: &Inventory, t: &crate::spec::Target, s: &Selection| {
                adopt::propose(t, inv, &engine::kinds(), s).0
            };
            Ok((
                Box::new(move |inv: &mut Inventory| {
                    let props = proposals(inv, &t, &selection);
                    mark(inv, &props);
                }),
                Box::new(move |inv: &Inventory, plan: &mut Plan| {
                    let props = proposals(inv, &t2, &selection2);
                    adopt::keep_adoptions(plan, &props);
                }),
            ))
        }
        Some(SavedCommand::Release { slices }) => {
            let chosen: BTreeSet<String> = slices.iter().cloned().collect();
            let fleet = fleet.clone();
            Ok((
                Box::new(|_| {}),
                Box::new(move |inv: &Inventory, plan: &mut Plan| {
                    adopt::release(plan, &fleet, inv, &engine::kinds(), &chosen);
                }),
            ))
        }
    }
}

/// Plans `command` without applying it, prints the plan and saves it to
/// `path` with the specs it was made from.
async fn save_plan(
    session: &Session,
    fleet: &Fleet,
    files: &[SourceFile],
    command: SavedCommand,
    path: &Path,
) -> Result<u8> {
    let (prepare, edit) = shaping(Some(&command), fleet)?;
    let opts = PlanOptions::default();
    let (inv, mut plan) =
        engine::observe_prepared_and_plan(fleet, &session.cloud, PlanMode::Apply, &opts, &*prepare)
            .await?;
    edit(&inv, &mut plan);
    plan.summary = plan.count();
    print!(
        "{}",
        crate::plan::human::render(&plan, super::color_stdout())
    );
    planfile::save_command(
        path,
        &plan,
        files,
        planfile::SavedOptions {
            max_destroy: opts.max_destroy,
            allow_empty_source: opts.allow_empty_source,
            allow_unverified_delete: opts.allow_unverified_delete,
        },
        Some(command),
    )?;
    eprintln!(
        "Saved the plan to {}. Apply exactly it with: slicectl apply {}",
        path.display(),
        path.display()
    );
    Ok(if plan.refused.is_empty() {
        super::EXIT_OK
    } else {
        EXIT_ERROR
    })
}

/// The selection the flags make (clap requires exactly one of them).
pub fn selection(names: Vec<String>, selector: Option<String>) -> Result<Selection> {
    if !names.is_empty() {
        return Ok(Selection::Names(names));
    }
    match selector {
        Some(s) => {
            let (k, v) = s.split_once('=').ok_or_else(|| {
                anyhow!("--selector {s:?} is not LABEL=VALUE (e.g. --selector team=llm)")
            })?;
            Ok(Selection::Label(k.to_string(), v.to_string()))
        }
        None => Ok(Selection::All),
    }
}

fn file_of(out: &Path, slice: &str) -> PathBuf {
    out.join(format!("{slice}.yaml"))
}

fn names(p: &Proposal) -> String {
    p.resources
        .iter()
        .map(|r| r.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `path` made absolute with its symlinks resolved, as far as it exists
/// (the rest, not created yet, appended as written).
fn resolved(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut tail = Vec::new();
    let mut at = abs.as_path();
    loop {
        if let Ok(mut real) = at.canonicalize() {
            real.extend(tail.iter().rev());
            return real;
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                tail.push(name.to_os_string());
                at = parent;
            }
            _ => return abs,
        }
    }
}

/// Whether `out` lies inside spec directory `dir` (symlinks resolved).
pub fn out_within(out: &Path, dir: &Path) -> bool {
    resolved(out).starts_with(resolved(dir))
}

/// `slicectl adopt`.
pub async fn adopt(a: AdoptArgs, conn: &Connection, exec: &Exec) -> Result<u8> {
    // Adopting makes the resource slicectl's: from then on an apply (or a
    // controller cycle) of specs that lack its file prunes it as no longer
    // in the specs. Files written outside the source are exactly that.
    if !a.out_outside_source && !out_within(&a.out, &a.dir) {
        bail!(
            "refusing to write the adopted Slice files to {}: it is outside the spec directory {}. Once \
             adopted, a node pool or MIG is slicectl's, and an apply of {} (or a controller reading it) that \
             does not see the new file deletes it as no longer in the specs. Write them under it (e.g. \
             `--out {}`), or, if {} is itself the spec source that will reconcile them, pass \
             --out-outside-source. With a controller running, see docs/adopt.md, \"Adopting with a \
             controller running\"",
            a.out.display(),
            a.dir.display(),
            a.dir.display(),
            a.dir.join("adopted").display(),
            a.out.display()
        );
    }
    let Some(loaded) = load_observable(&a.dir)? else {
        return Ok(EXIT_ERROR);
    };
    let fleet = &loaded.fleet;
    let Some(target) = fleet.targets.get(&a.target) else {
        bail!(
            "no Target named {:?} in the specs under {}: the Targets there are {}",
            a.target,
            a.dir.display(),
            fleet.targets.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    };
    let session = Session::connect(conn, fleet).await?;
    let r = adopt_in(&session, &a, &loaded.files, fleet, target, exec).await;
    session.close().await;
    r
}

async fn adopt_in(
    session: &Session,
    a: &AdoptArgs,
    files: &[SourceFile],
    fleet: &Fleet,
    target: &crate::spec::Target,
    exec: &Exec,
) -> Result<u8> {
    let kinds = engine::kinds();
    let inv = crate::observe::observe(&session.cloud, fleet, engine::registry()).await;
    let unseen: Vec<String> = inv
        .unobserved
        .iter()
        .filter(|(scope, _)| kinds.iter().any(|k| k.scopes(target).contains(scope)))
        .map(|(scope, why)| format!("{scope}: [{}] {}", why.code, why.cause))
        .collect();
    if !unseen.is_empty() {
        bail!(
            "Target {} could not be observed, so nothing can be adopted from it:\n  {}",
            target.name,
            unseen.join("\n  ")
        );
    }
    let (proposals, skipped) = adopt::propose(target, &inv, &kinds, &a.selection);
    for s in &skipped {
        eprintln!("note: {s}");
    }
    let mut failed = !skipped.is_empty() && matches!(a.selection, Selection::Names(_));
    // The spec files, each checked as `validate` checks it. A slice the
    // specs already name (adopted again after a release) needs no file:
    // the plan compares the live pool with that Slice.
    let mut candidates: Vec<(Proposal, Option<String>)> = Vec::new();
    for p in proposals {
        // A Slice in the specs is compared as it is, whatever the live
        // resource would be described as (a released GCE slice's rendered
        // template is not one it could bring).
        let text = match (&p.spec, fleet.slices.get(&p.slice)) {
            (_, Some(s)) => {
                println!(
                    "{} is named by Slice {} in {}: adopted as that Slice, if the plan below shows only labels change; no file is written",
                    names(&p),
                    p.slice,
                    s.location
                );
                Ok(None)
            }
            (Err(reasons), None) => Err(reasons.clone()),
            (Ok(spec), None) => adopt::spec_file(&p.slice, spec, &p.resources)
                .map_err(|e| vec![e])
                .and_then(|t| {
                    let mut with = files.to_vec();
                    with.push(SourceFile {
                        path: file_of(&a.out, &p.slice),
                        text: t.clone(),
                    });
                    crate::spec::load(&with)
                        .map(|_| Some(t))
                        .map_err(|d| crate::spec::report_lines(&d))
                }),
        };
        match text {
            Ok(t) => candidates.push((p, t)),
            Err(reasons) => {
                failed = true;
                println!(
                    "cannot adopt {} as slice {}:\n  - {}",
                    names(&p),
                    p.slice,
                    reasons.join("\n  - ")
                );
            }
        }
    }
    // The plan with every candidate in the fleet: what adopting changes.
    let check = |c: &[(Proposal, Option<String>)]| -> Result<(Fleet, Plan, Vec<Proposal>)> {
        let fleet = extended(files, &a.out, c)?;
        let props: Vec<Proposal> = c.iter().map(|(p, _)| p.clone()).collect();
        let mut inv = inv.clone();
        mark(&mut inv, &props);
        let mut plan = engine::plan_with(&fleet, &inv, PlanMode::Apply, &PlanOptions::default())?;
        adopt::keep_adoptions(&mut plan, &props);
        Ok((fleet, plan, props))
    };
    let (_, plan, _) = check(&candidates)?;
    for r in &plan.refused {
        failed = true;
        println!("cannot adopt: {}", r.message);
    }
    candidates.retain(|(p, _)| !plan.refused.iter().any(|r| r.slice == p.slice));
    if candidates.is_empty() {
        println!("Nothing to adopt.");
        return Ok(EXIT_ERROR);
    }
    write_files(&a.out, &candidates, a.force)?;
    let (fleet, _, props) = check(&candidates)?;
    for p in props.iter().filter(|p| p.manager.is_some()) {
        println!(
            "WARNING: {} ({}): {}",
            p.slice,
            names(p),
            p.manager.as_deref().unwrap_or_default()
        );
    }
    if let Some(path) = &a.plan_out {
        let mut with = files.to_vec();
        with.extend(candidates.iter().filter_map(|(p, t)| {
            Some(SourceFile {
                path: file_of(&a.out, &p.slice),
                text: t.clone()?,
            })
        }));
        let command = SavedCommand::Adopt {
            target: target.name.clone(),
            names: props
                .iter()
                .flat_map(|p| p.resources.iter().map(|r| r.name.clone()))
                .collect(),
        };
        let code = save_plan(session, &fleet, &with, command, path).await?;
        return Ok(if failed { EXIT_ERROR } else { code });
    }
    let prepare = |inv: &mut Inventory| mark(inv, &props);
    let edit = |_: &Inventory, plan: &mut Plan| adopt::keep_adoptions(plan, &props);
    let code = reconcile_in(
        session,
        &fleet,
        PlanMode::Apply,
        PlanOptions::default(),
        exec,
        "adopt",
        &prepare,
        &edit,
    )
    .await?;
    Ok(if failed { EXIT_ERROR } else { code })
}

/// Marks the proposals' resources as being adopted.
fn mark(inv: &mut Inventory, props: &[Proposal]) {
    inv.adopting = props
        .iter()
        .flat_map(|p| p.resources.iter().chain(&p.held).cloned())
        .collect::<BTreeSet<ResourceId>>();
}

/// The specs with the candidates' files added.
fn extended(files: &[SourceFile], out: &Path, c: &[(Proposal, Option<String>)]) -> Result<Fleet> {
    let mut with = files.to_vec();
    with.extend(c.iter().filter_map(|(p, t)| {
        Some(SourceFile {
            path: file_of(out, &p.slice),
            text: t.clone()?,
        })
    }));
    crate::spec::load(&with).map_err(|d| {
        anyhow!(
            "the adopted slices do not validate together with the specs:\n{}",
            crate::spec::report_lines(&d).join("\n")
        )
    })
}

/// Writes the files, never over an existing one without `force`.
fn write_files(out: &Path, c: &[(Proposal, Option<String>)], force: bool) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| {
        format!(
            "cannot create {} for the adopted slices' spec files",
            out.display()
        )
    })?;
    let c: Vec<(&Proposal, &String)> = c
        .iter()
        .filter_map(|(p, t)| Some((p, t.as_ref()?)))
        .collect();
    if c.is_empty() {
        return Ok(());
    }
    let taken: Vec<String> = c
        .iter()
        .map(|(p, _)| file_of(out, &p.slice))
        .filter(|f| f.exists())
        .map(|f| f.display().to_string())
        .collect();
    if !force && !taken.is_empty() {
        bail!(
            "refusing to overwrite {} (pass --force to replace them, or choose another --out); nothing was adopted",
            taken.join(", ")
        );
    }
    for (p, text) in &c {
        let f = file_of(out, &p.slice);
        std::fs::write(&f, text).with_context(|| format!("cannot write {}", f.display()))?;
        println!("wrote {} ({})", f.display(), names(p));
    }
    Ok(())
}

/// `slicectl release`.
pub async fn release(
    dir: &Path,
    slices: Vec<String>,
    plan_out: Option<&Path>,
    conn: &Connection,
    exec: &Exec,
) -> Result<u8> {
    let Some(loaded) = load_observable(dir)? else {
        return Ok(EXIT_ERROR);
    };
    let fleet = &loaded.fleet;
    let chosen: BTreeSet<String> = slices.into_iter().collect();
    let session = Session::connect(conn, fleet).await?;
    if let Some(path) = plan_out {
        let command = SavedCommand::Release {
            slices: chosen.iter().cloned().collect(),
        };
        let r = save_plan(&session, fleet, &loaded.files, command, path).await;
        session.close().await;
        return r;
    }
    let kinds = engine::kinds();
    let edit = |inv: &Inventory, plan: &mut Plan| adopt::release(plan, fleet, inv, &kinds, &chosen);
    let r = reconcile_in(
        &session,
        fleet,
        PlanMode::Apply,
        PlanOptions::default(),
        exec,
        "release",
        &|_| {},
        &edit,
    )
    .await;
    session.close().await;
    let still = adopt::naming(fleet, &chosen);
    if !still.is_empty() {
        println!(
            "\nThese spec files still name released slices. Remove them: while they stay, `slicectl apply` \
             refuses each such slice (name_taken: the live resource is no longer slicectl's) and never \
             recreates or re-adopts it by itself:"
        );
        for s in &still {
            println!("  {s}");
        }
    }
    r
}

#[cfg(test)]
#[path = "adopt/tests.rs"]
mod tests;
