//! Renders a plan for people: symbols, a reason on every action,
//! `# forces replacement` on the exact field, a unified diff of each changed
//! resource and a summary line. ANSI styling only when asked (the CLI asks
//! only on a terminal without NO_COLOR).

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};
use serde_json::Value;
use similar::TextDiff;

use super::{Action, ActionKind, Plan, PlanMode};

struct Painter {
    color: bool,
}

impl Painter {
    fn paint(&self, style: Style, s: &str) -> String {
        if self.color {
            format!("{style}{s}{style:#}")
        } else {
            s.to_string()
        }
    }
}

fn green() -> Style {
    Style::new().fg_color(Some(AnsiColor::Green.into()))
}
fn yellow() -> Style {
    Style::new().fg_color(Some(AnsiColor::Yellow.into()))
}
fn red() -> Style {
    Style::new().fg_color(Some(AnsiColor::Red.into()))
}
fn cyan() -> Style {
    Style::new().fg_color(Some(AnsiColor::Cyan.into()))
}
fn bold() -> Style {
    Style::new().bold()
}

fn symbol(a: ActionKind) -> (&'static str, Style, &'static str) {
    match a {
        ActionKind::Create => ("  +", green(), "will be created"),
        ActionKind::Update => ("  ~", yellow(), "will be updated in place"),
        ActionKind::Replace => ("-/+", red(), "must be replaced"),
        ActionKind::Delete => ("  -", red(), "will be destroyed"),
        ActionKind::Wait => ("  …", cyan(), "has an operation in flight"),
    }
}

/// Text values longer than this are shown by size and digest (a startup
/// script); `plan --output json` carries them whole.
const LONG_TEXT: usize = 512;

/// A value with its long texts shortened for reading.
fn shortened(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() > LONG_TEXT => {
            use sha2::{Digest, Sha256};
            let digest = hex::encode(&Sha256::digest(s.as_bytes())[..8]);
            Value::from(format!("<{} bytes, sha256 {digest}…>", s.len()))
        }
        Value::Array(a) => Value::Array(a.iter().map(shortened).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), shortened(v))).collect())
        }
        other => other.clone(),
    }
}

fn pretty(v: &Option<Value>) -> String {
    match v {
        Some(v) => serde_json::to_string_pretty(&shortened(v)).unwrap_or_default() + "\n",
        None => String::new(),
    }
}

fn render_action(out: &mut String, p: &Painter, a: &Action) {
    let (sym, style, verb) = symbol(a.action);
    let _ = writeln!(
        out,
        "  {} {verb}",
        p.paint(bold(), &format!("# {}", a.address()))
    );
    let _ = writeln!(out, "  # {}", a.reason_text());
    if let Some(d) = &a.disruption {
        let _ = writeln!(
            out,
            "  # {} {}",
            p.paint(yellow().bold(), "busy replica:"),
            d.describe()
        );
    }
    if let Some(op) = &a.operation {
        let _ = writeln!(out, "  # waits first for operation {op}");
    }
    let _ = writeln!(
        out,
        "{} {} {:?} in {}",
        p.paint(style, sym),
        a.id.kind,
        a.id.name,
        a.id.scope
    );
    for c in &a.changes {
        let before = c
            .before
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_else(|| "(unset)".into());
        let after = c
            .after
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_else(|| "(unset)".into());
        let marker = if c.forces_replacement {
            format!("  {}", p.paint(red(), "# forces replacement"))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "      {} {}: {before} → {after}{marker}",
            p.paint(yellow(), "~"),
            c.path
        );
    }
    let before = pretty(&a.before);
    let after = pretty(&a.desired.as_ref().map(|b| b.to_json()));
    let body = match a.action {
        ActionKind::Create => prefixed(p, &after, "+", green()),
        ActionKind::Delete => prefixed(p, &before, "-", red()),
        ActionKind::Update | ActionKind::Replace => unified(p, &before, &after),
        ActionKind::Wait => String::new(),
    };
    for line in body.lines() {
        let _ = writeln!(out, "      {line}");
    }
    out.push('\n');
}

fn prefixed(p: &Painter, text: &str, sign: &str, style: Style) -> String {
    text.lines()
        .map(|l| p.paint(style, &format!("{sign} {l}")) + "\n")
        .collect()
}

fn unified(p: &Painter, before: &str, after: &str) -> String {
    let diff = TextDiff::from_lines(before, after);
    let text = diff
        .unified_diff()
        .context_radius(2)
        .header("live", "desired")
        .to_string();
    text.lines()
        .map(|l| {
            let styled = if l.starts_with('+') && !l.starts_with("+++") {
                p.paint(green(), l)
            } else if l.starts_with('-') && !l.starts_with("---") {
                p.paint(red(), l)
            } else if l.starts_with("@@") {
                p.paint(cyan(), l)
            } else {
                l.to_string()
            };
            styled + "\n"
        })
        .collect()
}

/// Renders the whole plan.
pub fn render(plan: &Plan, color: bool) -> String {
    let p = Painter { color };
    let mut out = String::new();
    if !plan.unmanaged.is_empty() {
        let _ = writeln!(out, "Unmanaged resources (shown, never changed):");
        for u in &plan.unmanaged {
            let _ = writeln!(out, "  {} {:?} in {}: {}", u.kind, u.name, u.scope, u.note);
        }
        out.push('\n');
    }
    if !plan.unjoined.is_empty() {
        let _ = writeln!(
            out,
            "Not joined (waiting on VMs slicectl does not bootstrap; no change):"
        );
        for u in &plan.unjoined {
            let _ = writeln!(out, "  {} {:?} in {}: {}", u.kind, u.name, u.scope, u.note);
        }
        out.push('\n');
    }
    render_refusals(&mut out, &p, plan);
    render_preflight(&mut out, &p, plan);
    render_workloads(&mut out, &p, plan);
    render_unobserved(&mut out, &p, plan);
    render_held(&mut out, &p, plan);
    for r in &plan.released {
        let kept = if r.cordon_kept.is_empty() {
            String::new()
        } else {
            format!(
                " ({} was cordoned before the drain, not by slicectl: its cordon stays, only the drain label goes)",
                r.cordon_kept.join(", ")
            )
        };
        let _ = writeln!(
            out,
            "{} Nodes {} in {} were cordoned for a drain that no step takes any more (its step is gone or held): they are uncordoned{kept}.\n",
            p.paint(green().bold(), "Released:"),
            r.nodes.join(", "),
            r.kube
        );
    }
    for d in &plan.deferred {
        let _ = writeln!(
            out,
            "{} {} left out of this plan ({} resource(s)): {}\n",
            p.paint(yellow().bold(), "Deferred:"),
            d.scope,
            d.resources,
            d.reason
        );
    }
    for r in &plan.renames {
        let (label, color) = if r.declared {
            ("Renamed:", green().bold())
        } else {
            ("Looks renamed:", yellow().bold())
        };
        let _ = writeln!(out, "{} {}", p.paint(color, label), r.message);
        if !r.addresses.is_empty() {
            let _ = writeln!(out, "  affects {}", r.addresses.join(", "));
        }
        out.push('\n');
    }
    if plan.actions.is_empty() {
        let msg = if !plan.held.is_empty() && plan.refused.is_empty() && !plan.left_unobserved() {
            p.paint(
                yellow().bold(),
                &format!(
                    "Nothing to do now: {} step(s) held until their slice replicas may be disrupted.",
                    plan.held.len()
                ),
            )
        } else if !plan.refused.is_empty()
            && plan.refused.iter().all(|r| r.code == super::SETTLING)
            && !plan.left_unobserved()
        {
            p.paint(
                yellow().bold(),
                &format!(
                    "Nothing to do now: {} step(s) wait until the specs settle.",
                    plan.refused.len()
                ),
            )
        } else if !plan.refused.is_empty() {
            p.paint(
                red().bold(),
                &format!(
                    "Nothing to do but {} refused change(s): the live TPU slices do not match the specs.",
                    plan.refused.len()
                ),
            )
        } else if plan.left_unobserved() {
            p.paint(
                yellow().bold(),
                &format!(
                    "No changes for what was observed; {} target(s) could not be observed (above).",
                    plan.unobserved.len()
                ),
            )
        } else {
            p.paint(
                green().bold(),
                "No changes. The live TPU slices match the specs.",
            )
        };
        let _ = writeln!(out, "{msg}");
        return out;
    }
    let _ = writeln!(
        out,
        "slicectl will perform the following actions{}:\n",
        if plan.mode == PlanMode::Destroy {
            " (destroy)"
        } else {
            ""
        }
    );
    for a in &plan.actions {
        render_action(&mut out, &p, a);
    }
    out.push_str(&summary_line(plan, &p));
    out.push('\n');
    out
}

/// The workload source: slices JobSets ask for, kept, released, refused,
/// and JobSets left alone.
fn render_workloads(out: &mut String, p: &Painter, plan: &Plan) {
    let d = &plan.demand;
    if d.slices.is_empty()
        && d.kept.is_empty()
        && d.released.is_empty()
        && d.refused.is_empty()
        && d.skipped.is_empty()
    {
        return;
    }
    heading(
        out,
        p,
        cyan().bold(),
        "Workload slices (asked for by pending JobSets):",
    );
    for s in &d.slices {
        if let Some(o) = &s.workload {
            let _ = writeln!(
                out,
                "  + {} (node pool {}) for jobset {} (job-key {}): {} {} {}",
                s.name,
                s.spec.node_pool_name.as_deref().unwrap_or(&s.name),
                o.jobset_ref(),
                o.job_key.chars().take(12).collect::<String>(),
                s.spec.accelerator,
                s.shape.topology,
                s.spec.capacity.kind.as_str()
            );
        }
    }
    for k in &d.kept {
        let _ = writeln!(out, "  = {} kept (jobset {}): {}", k.pool, k.jobset, k.why);
    }
    for r in &d.released {
        let _ = writeln!(out, "  - {} released: {}", r.pool, r.why);
    }
    for r in &d.refused {
        let _ = writeln!(
            out,
            "  {} jobset {}/{} [{}]: {}",
            p.paint(red().bold(), "refused"),
            r.namespace,
            r.jobset,
            r.code,
            r.message
        );
    }
    for s in &d.skipped {
        let _ = writeln!(out, "  ~ jobset {} left alone: {}", s.jobset, s.why);
    }
    out.push('\n');
}

/// A section's heading, painted.
/// Quota and reservation preflight: per region and metric, and per
/// reservation, what the creates and replacements need against what is left.
fn render_preflight(out: &mut String, p: &Painter, plan: &Plan) {
    let pf = &plan.preflight;
    if pf.is_empty() {
        return;
    }
    heading(
        out,
        p,
        bold(),
        "Preflight (quotas and reservations, read before anything is sent):",
    );
    let mark = |short: bool| {
        if short {
            p.paint(red().bold(), "✗")
        } else {
            p.paint(green(), "✓")
        }
    };
    for q in &pf.quotas {
        let _ = writeln!(
            out,
            "  {} {} in {} (project {}): the plan needs {} chips; the quota has {} left (limit {}, usage {}{})",
            mark(!q.refused.is_empty()),
            q.key.metric,
            q.key.region,
            q.key.project,
            q.needed,
            q.left,
            q.limit,
            q.usage,
            match q.usage_from {
                Some(crate::plan::preflight::USAGE_FROM_MONITORING) =>
                    " from Cloud Monitoring; limit from Cloud Quotas",
                Some(_) => " observed; limit from Cloud Quotas",
                None => "",
            }
        );
        refused_under(out, &q.refused);
    }
    for r in &pf.reservations {
        let _ = writeln!(
            out,
            "  {} reservation {} in {} (project {}): the plan needs {} VMs; {} of {} free ({} in use)",
            mark(!r.refused.is_empty()),
            r.key.name,
            r.key.zone,
            r.key.project,
            r.needed,
            r.free,
            r.count,
            r.in_use
        );
        refused_under(out, &r.refused);
    }
    for u in &pf.unchecked {
        let _ = writeln!(out, "  {} {}: {}", p.paint(yellow(), "?"), u.address, u.why);
    }
    for w in &pf.warnings {
        let _ = writeln!(out, "  {} {w}", p.paint(yellow().bold(), "Warning:"));
    }
    out.push('\n');
}

/// The addresses a quota or reservation refused, under its line.
fn refused_under(out: &mut String, refused: &[String]) {
    if !refused.is_empty() {
        let _ = writeln!(out, "      refused: {}", refused.join(", "));
    }
}

fn heading(out: &mut String, p: &Painter, style: Style, text: &str) {
    let _ = writeln!(out, "{}", p.paint(style, text));
}

/// One step a section lists: its mark, what it would do to which resource,
/// its code, and the message under it.
fn step_line(
    out: &mut String,
    p: &Painter,
    (style, mark): (Style, &str),
    (action, kind, name, scope): (ActionKind, &str, &str, &super::Scope),
    (code, message): (&str, &str),
) {
    let _ = writeln!(
        out,
        "  {} {} {kind} {name:?} in {scope} [{code}]\n      {message}",
        p.paint(style, mark),
        action.as_str(),
    );
}

/// Targets that could not be observed: no action for any of their slices.
fn render_unobserved(out: &mut String, p: &Painter, plan: &Plan) {
    if !plan.left_unobserved() {
        return;
    }
    heading(
        out,
        p,
        yellow().bold(),
        "Not observed (no action for these; nothing is pruned from what was not seen):",
    );
    for u in &plan.unobserved {
        let _ = writeln!(
            out,
            "  {} target {} in {} [{}]\n      {}",
            p.paint(yellow(), "?"),
            u.target,
            u.scope,
            u.why.code,
            u.why.cause
        );
        let slices = if u.slices.is_empty() {
            "none".to_string()
        } else {
            u.slices.join(", ")
        };
        let _ = write!(out, "      slices not observed: {slices}");
        if u.untouched > 0 {
            let _ = write!(
                out,
                " ({} live resource(s) seen and left untouched)",
                u.untouched
            );
        }
        out.push('\n');
    }
    for u in &plan.undiscovered {
        let _ = writeln!(
            out,
            "  {} left-behind {} resources in project {} [{}]: nothing there is pruned\n      {}",
            p.paint(yellow(), "?"),
            u.backend,
            u.project,
            u.why.code,
            u.why.cause
        );
    }
    out.push('\n');
}

/// Refused changes, first: they are what a reviewer must act on. Steps
/// held until the specs settle ([`super::SETTLING`]) are apart: they run
/// later by themselves.
fn render_refusals(out: &mut String, p: &Painter, plan: &Plan) {
    let (settling, refused): (Vec<&super::Refusal>, Vec<&super::Refusal>) =
        plan.refused.iter().partition(|r| r.code == super::SETTLING);
    if !settling.is_empty() {
        heading(
            out,
            p,
            yellow().bold(),
            "Held until the specs settle (planned again when the settle period is over; the rest of the plan goes ahead):",
        );
        for r in &settling {
            step_line(
                out,
                p,
                (yellow(), "~"),
                (r.action, r.kind, &r.name, &r.scope),
                (&r.code, &r.message),
            );
        }
        out.push('\n');
    }
    if refused.is_empty() {
        return;
    }
    heading(
        out,
        p,
        red().bold(),
        "Refused changes (never applied; the rest of the plan goes ahead):",
    );
    for r in refused {
        step_line(
            out,
            p,
            (red(), "!"),
            (r.action, r.kind, &r.name, &r.scope),
            (&r.code, &r.message),
        );
    }
    out.push('\n');
}

/// Steps held by a disruption policy: busy replicas, with their pods.
fn render_held(out: &mut String, p: &Painter, plan: &Plan) {
    if plan.held.is_empty() {
        return;
    }
    heading(
        out,
        p,
        yellow().bold(),
        "Held (busy slice replicas; these steps run by themselves once allowed, the rest of the plan goes ahead):",
    );
    for h in &plan.held {
        step_line(
            out,
            p,
            (yellow(), "="),
            (h.action, h.kind, &h.name, &h.scope),
            (h.code, &h.message),
        );
    }
    out.push('\n');
}

fn summary_line(plan: &Plan, p: &Painter) -> String {
    let s = plan.count();
    let s = &s;
    let mut line = format!(
        "Plan: {} to create, {} to update in place, {} to replace, {} to destroy.",
        s.create, s.update, s.replace, s.delete
    );
    if s.wait > 0 {
        line.push_str(&format!(" {} in-flight operation(s) to wait on.", s.wait));
    }
    if s.refused > 0 {
        line.push_str(&format!(" {} refused.", s.refused));
    }
    if s.unobserved > 0 {
        line.push_str(&format!(" {} slice(s) not observed.", s.unobserved));
    }
    if s.held > 0 {
        line.push_str(&format!(" {} held (busy).", s.held));
    }
    p.paint(bold(), &line)
}
