//! The instance template kind: one global template per bootstrapped `gce`
//! slice replica, carrying the machine type, disk, network, capacity model
//! and the startup script with its metadata. Templates are immutable: any
//! change replaces the slice replica. Templates have no labels, so
//! ownership is written into the description.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::render::{self, template_projection};
use crate::apply::{ApplyError, KindExec, Observed, StepOp, StepOutcome};
use crate::cloud::{Cloud, CloudError};
use crate::plan::hash;
use crate::plan::kind::body_as;
use crate::plan::ownership::Ownership;
use crate::plan::{Action, Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, Scope};
use crate::resource::ProjectRef;
use crate::resource::compute::{self, InstanceTemplate};

/// The kind's name.
pub const KIND: KindId = KindId("instance_template");

/// The instance template kind.
#[derive(Debug, Clone, Copy)]
pub struct InstanceTemplates;

fn template(b: &Body) -> Option<&InstanceTemplate> {
    body_as::<InstanceTemplate>(b)
}

fn ownership_of(t: &InstanceTemplate) -> Option<Ownership> {
    Ownership::from_description_named(
        t.description.as_deref()?,
        &t.name,
        crate::spec::names::instance_template,
    )
}

/// The template name a compute operation targets.
pub fn operation_target(op: &compute::Operation) -> Option<&str> {
    let link = op.target_link.as_deref()?;
    let (head, name) = link.rsplit_once('/')?;
    head.ends_with("/instanceTemplates").then_some(name)
}

/// The template as shown: what was sent (output-only fields dropped).
fn shown(t: &InstanceTemplate) -> Value {
    let mut v = serde_json::to_value(InstanceTemplate {
        name: t.name.clone(),
        description: t.description.clone(),
        properties: t.properties.clone(),
        ..Default::default()
    })
    .unwrap_or(Value::Null);
    hash::remove_path(&mut v, "properties.metadata.fingerprint");
    hash::remove_path(&mut v, "properties.metadata.kind");
    // The startup script is long: show its digest, not its text.
    if let Some(items) = v
        .pointer_mut("/properties/metadata/items")
        .and_then(Value::as_array_mut)
    {
        for i in items.iter_mut() {
            if i["key"] == crate::bootstrap::STARTUP_SCRIPT_KEY
                && let Some(text) = i["value"].as_str()
            {
                i["value"] = Value::from(format!("<startup script, {} bytes>", text.len()));
            }
        }
    }
    v
}

impl Kind for InstanceTemplates {
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        t.spec
            .gce
            .as_ref()
            .map(|_| {
                Scope::Global(crate::resource::ProjectRef {
                    project: t.spec.project.clone(),
                })
            })
            .into_iter()
            .collect()
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "instance template"
    }

    fn depends_on(&self) -> &'static [KindId] {
        &[crate::kinds::workload_policy::KIND]
    }

    fn lists_unmanaged(&self) -> bool {
        false // a project holds many unrelated templates
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let Some(r) = render::render(ctx.target, &ctx.stem_slice(), ctx.replica) else {
            return Vec::new();
        };
        let Some(t) = r.template else {
            return Vec::new();
        };
        vec![ctx.desired(KIND, Scope::Global(r.project), t.name.clone(), t)]
    }

    fn name(&self, live: &Body) -> String {
        template(live).map(|t| t.name.clone()).unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        ownership_of(template(live)?)
    }

    fn state(&self, _live: &Body) -> LiveState {
        LiveState::Ok
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(d), Some(l)) = (template(&desired.body), template(live)) else {
            return Comparison::Equal;
        };
        let want = template_projection(d);
        let changes = hash::diff(&template_projection(l), &want, true);
        if hash::stale(ownership_of(l).as_ref(), &hash::spec_hash(&want), &changes) {
            let hash_only = changes.is_empty();
            Comparison::Replace { changes, hash_only }
        } else {
            Comparison::Equal
        }
    }

    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        template(live).map(shown).unwrap_or(Value::Null)
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<InstanceTemplate>(json)
            .map(|t| Arc::new(t) as Body)
            .map_err(|e| e.to_string())
    }

    fn fingerprint_view(&self, live: &Body) -> Value {
        template(live).map(shown).unwrap_or(Value::Null)
    }
}

fn project_of(a: &Action) -> Result<&ProjectRef, ApplyError> {
    match &a.id.scope {
        Scope::Global(p) => Ok(p),
        _ => Err(ApplyError::Scope(a.address())),
    }
}

#[async_trait]
impl KindExec for InstanceTemplates {
    fn kind(&self) -> KindId {
        KIND
    }

    fn observes(&self, scope: &Scope) -> bool {
        matches!(scope, Scope::Global(_))
    }

    async fn observe(&self, cloud: &Cloud, scope: &Scope) -> Result<Observed, CloudError> {
        let Scope::Global(p) = scope else {
            return Ok(Observed::default());
        };
        let (templates, ops) = tokio::try_join!(
            cloud.compute.list_instance_templates(p),
            cloud.compute.list_global_operations(p)
        )?;
        Ok(Observed::new(
            scope,
            templates,
            crate::kinds::compute_operation_records(scope, &ops, operation_target),
        ))
    }

    async fn execute(
        &self,
        cloud: &Cloud,
        _sched: &crate::apply::schedule::Scheduler,
        a: &Action,
        op: StepOp,
    ) -> Result<StepOutcome, ApplyError> {
        let p = project_of(a)?;
        let timeout = a.timeout.max(std::time::Duration::from_secs(1));
        let started = match op {
            StepOp::WaitInFlight => {
                super::global_operation(p, a.operation.as_deref().unwrap_or_default())
            }
            StepOp::Create => {
                let t = a
                    .desired
                    .as_ref()
                    .and_then(body_as::<InstanceTemplate>)
                    .ok_or_else(|| ApplyError::Body(a.address()))?;
                match cloud.compute.insert_instance_template(p, t).await {
                    Ok(op) => op,
                    Err(e) if e.is_already_exists() => {
                        // Ours from an interrupted apply, another run's
                        // (maybe still being inserted), or someone else's.
                        let ops = cloud.compute.list_global_operations(p).await?;
                        let link =
                            format!("projects/{}/global/instanceTemplates/{}", p.project, t.name);
                        let live = match cloud.compute.get_instance_template(&link).await {
                            Ok(l) => Some(ownership_of(&l)),
                            Err(e) if e.is_not_found() => None,
                            Err(e) => return Err(e.into()),
                        };
                        return super::after_conflict(
                            cloud,
                            a,
                            &ops,
                            operation_target,
                            live,
                            ownership_of(t),
                            timeout,
                        )
                        .await;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            // Immutable: never updated in place; no cleanup.
            StepOp::Update | StepOp::Cleanup => return Ok(StepOutcome::Done),
            StepOp::Delete => match cloud.compute.delete_instance_template(p, &a.id.name).await {
                Ok(op) => op,
                Err(e) if e.is_not_found() => return Ok(StepOutcome::AlreadyGone),
                Err(e) => return Err(e.into()),
            },
        };
        cloud.compute.wait_operation(&started, timeout).await?;
        Ok(StepOutcome::Done)
    }
}
