//! Compute Engine's `aggregatedList` (`GET projects/P/aggregated/KIND`),
//! one implementation for every kind the simulator serves: instance
//! templates, MIGs, instances, resource policies and operations.
//!
//! The wire format, as Compute Engine answers it (method reference, e.g.
//! <https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList>,
//! and the `*AggregatedList` / `*ScopedList` schemas of the discovery
//! document):
//! - `items` is a map keyed by scope (`zones/us-central2-b`,
//!   `regions/us-central2`, `global`); each value holds the scope's
//!   resources under the kind's field (`instances`, `instanceGroupManagers`,
//!   …) or, for a scope with nothing on this page, a `warning` with code
//!   `NO_RESULTS_ON_PAGE`, the message "There are no results for scope
//!   'SCOPE' on this page." and `data: [{key: "scope", value: SCOPE}]`
//!   (the `*ScopedList.warning` schema and its `code` enum). Every scope
//!   the project can see is listed (`includeAllScopes`: "every visible scope
//!   for each scope type"); the simulator's visible scopes are the zones its
//!   TPU catalogue offers ([`crate::tpu::GENERATIONS`]), their regions, and
//!   any scope that holds a resource.
//! - `maxResults` (0 to 500, default 500) and `pageToken` page the whole
//!   aggregated result, not each scope; `nextPageToken` is set while more
//!   remain.
//! - `returnPartialSuccess` and `includeAllScopes` are booleans; with every
//!   scope reachable there is no `unreachables` entry.
//! - `filter` narrows the resources (see [`Filter`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::compute::page_of;
use super::errors::ApiError;
use super::server::Ctx;
use super::tpu;

/// Which scope types a kind lives in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScopeTypes {
    pub zones: bool,
    pub regions: bool,
    pub global: bool,
}

/// One kind's aggregated list: its `kind` string, the field that holds its
/// resources in a scoped list, and the collection name in the URL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Aggregate {
    pub kind: &'static str,
    pub field: &'static str,
    pub collection: &'static str,
    pub scopes: ScopeTypes,
}

/// Reservations (`ReservationAggregatedList`): zonal.
pub(crate) const RESERVATIONS: Aggregate = Aggregate {
    kind: "compute#reservationAggregatedList",
    field: "reservations",
    collection: "reservations",
    scopes: ScopeTypes {
        zones: true,
        regions: false,
        global: false,
    },
};

/// Resource policies (`ResourcePolicyAggregatedList`): regional.
pub(crate) const POLICIES: Aggregate = Aggregate {
    kind: "compute#resourcePolicyAggregatedList",
    field: "resourcePolicies",
    collection: "resourcePolicies",
    scopes: ScopeTypes {
        zones: false,
        regions: true,
        global: false,
    },
};

/// Instances (`InstanceAggregatedList`): zonal.
pub(crate) const INSTANCES: Aggregate = Aggregate {
    kind: "compute#instanceAggregatedList",
    field: "instances",
    collection: "instances",
    scopes: ScopeTypes {
        zones: true,
        regions: false,
        global: false,
    },
};

/// MIGs (`InstanceGroupManagerAggregatedList`): zonal (regional MIGs are
/// not served).
pub(crate) const MIGS: Aggregate = Aggregate {
    kind: "compute#instanceGroupManagerAggregatedList",
    field: "instanceGroupManagers",
    collection: "instanceGroupManagers",
    scopes: ScopeTypes {
        zones: true,
        regions: false,
        global: false,
    },
};

/// Instance templates (`InstanceTemplateAggregatedList`): global and
/// regional (regional templates are not served, their scopes are listed
/// empty).
pub(crate) const TEMPLATES: Aggregate = Aggregate {
    kind: "compute#instanceTemplateAggregatedList",
    field: "instanceTemplates",
    collection: "instanceTemplates",
    scopes: ScopeTypes {
        zones: false,
        regions: true,
        global: true,
    },
};

/// Operations (`OperationAggregatedList`, method
/// `compute.globalOperations.aggregatedList`): every scope type.
pub(crate) const OPERATIONS: Aggregate = Aggregate {
    kind: "compute#operationAggregatedList",
    field: "operations",
    collection: "operations",
    scopes: ScopeTypes {
        zones: true,
        regions: true,
        global: true,
    },
};

/// The scope key (`zones/Z`, `regions/R`, `global`) of a resource path or
/// link containing `projects/P/…`.
pub(crate) fn scope_of(path: &str) -> Option<String> {
    let rest = path
        .split_once("/projects/")
        .map_or_else(|| path.strip_prefix("projects/"), |(_, rest)| Some(rest))?;
    let mut segs = rest.split('/').skip(1);
    match segs.next()? {
        "global" => Some("global".into()),
        t @ ("zones" | "regions") => Some(format!("{t}/{}", segs.next()?)),
        _ => None,
    }
}

/// [`aggregated_list`] over a store keyed by resource path
/// (`projects/P/{zones/Z|regions/R|global}/…`): the resources of `project`
/// that `keep` accepts, each in the scope its path names.
pub(crate) fn of_store<'a, R: 'a>(
    ctx: &Ctx,
    project: &str,
    agg: Aggregate,
    store: impl IntoIterator<Item = (&'a String, &'a R)>,
    keep: impl Fn(&R) -> bool,
    render: impl Fn(&str, &R) -> Value,
) -> Result<Value, ApiError> {
    let prefix = format!("projects/{project}/");
    let items = store
        .into_iter()
        .filter(|(k, r)| k.starts_with(&prefix) && keep(r))
        .filter_map(|(k, r)| Some((scope_of(k)?, render(k, r))))
        .collect();
    aggregated_list(ctx, project, agg, items)
}

/// The scopes the simulator's project can see for `types`.
fn visible_scopes(types: ScopeTypes) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for g in tpu::GENERATIONS {
        for zone in g.zones {
            if types.zones {
                out.insert(format!("zones/{zone}"));
            }
            if types.regions {
                out.insert(format!("regions/{}", tpu::region_of(zone)));
            }
        }
    }
    if types.global {
        out.insert("global".into());
    }
    out
}

/// A boolean query parameter, as Google's front end parses one (`true` /
/// `false`, any case; gcloud sends `True`). Anything else is a 400 naming
/// the field (Google's "Invalid value at 'FIELD' (TYPE_BOOL)").
fn bool_param(ctx: &Ctx, name: &str, field: &str) -> Result<bool, ApiError> {
    match ctx.query(name) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") || v.is_empty() => Ok(false),
        Some(v) => Err(ApiError::invalid(
            "invalid",
            format!("Invalid value at '{field}' (TYPE_BOOL), \"{v}\""),
        )),
    }
}

/// `GET projects/P/aggregated/KIND`: `resources` are `(scope, resource)`
/// pairs (scope as [`scope_of`] gives it).
pub(crate) fn aggregated_list(
    ctx: &Ctx,
    project: &str,
    agg: Aggregate,
    resources: Vec<(String, Value)>,
) -> Result<Value, ApiError> {
    bool_param(ctx, "returnPartialSuccess", "return_partial_success")?;
    bool_param(ctx, "includeAllScopes", "include_all_scopes")?;
    let filter = Filter::parse(ctx.query("filter").unwrap_or(""))?;
    let mut resources: Vec<(String, Value)> = resources
        .into_iter()
        .filter(|(_, v)| filter.matches(v))
        .collect();
    resources.sort_by(|(a, x), (b, y)| {
        (a.as_str(), x["name"].as_str()).cmp(&(b.as_str(), y["name"].as_str()))
    });
    let mut scopes = visible_scopes(agg.scopes);
    scopes.extend(resources.iter().map(|(s, _)| s.clone()));
    let tagged: Vec<Value> = resources
        .into_iter()
        .map(|(scope, v)| json!([scope, v]))
        .collect();
    let (page, next) = page_of(ctx, tagged)?;
    let mut items: BTreeMap<String, Value> = BTreeMap::new();
    for entry in page {
        if let Value::Array(mut pair) = entry
            && pair.len() == 2
        {
            let v = pair.pop().unwrap_or(Value::Null);
            let scope = pair.pop().and_then(|s| s.as_str().map(str::to_string));
            if let Some(scope) = scope {
                let list = items
                    .entry(scope)
                    .or_insert_with(|| json!({ agg.field: [] }));
                if let Some(list) = list.get_mut(agg.field).and_then(Value::as_array_mut) {
                    list.push(v);
                }
            }
        }
    }
    for scope in scopes {
        items.entry(scope.clone()).or_insert_with(|| {
            json!({"warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": format!("There are no results for scope '{scope}' on this page."),
                "data": [{"key": "scope", "value": scope}],
            }})
        });
    }
    let collection = format!("projects/{project}/aggregated/{}", agg.collection);
    let mut out = json!({
        "kind": agg.kind,
        "id": collection,
        "items": items,
        "selfLink": format!("{}/{collection}", ctx.compute_api()),
    });
    if let Some(t) = next {
        out["nextPageToken"] = json!(t);
    }
    Ok(out)
}

/// A list `filter`, the subset of Compute Engine's two filter languages
/// (`filter` in the method reference above) that clients send for these
/// kinds: one comparison, or several in parentheses (ANDed, optionally
/// joined by `AND`). A comparison is `FIELD OP VALUE` with a dotted field
/// path (`labels.team`, `status`). AIP-160 operators `=` and `!=` compare the
/// whole value (quotes optional; `:*` tests presence); the older `eq` / `ne`
/// take an RE2 regular expression that must match the entire field. The two
/// languages "cannot be mixed in one request". Anything else is refused with
/// Google's "Invalid list filter expression" rather than ignored, so a
/// filter the simulator does not understand never returns too much.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    terms: Vec<Term>,
}

#[derive(Debug)]
struct Term {
    path: Vec<String>,
    op: Op,
}

#[derive(Debug)]
enum Op {
    Eq(String),
    Ne(String),
    Present,
    Re(regex::Regex),
    NotRe(regex::Regex),
}

fn bad_filter(filter: &str) -> ApiError {
    ApiError::invalid(
        "invalid",
        format!("Invalid value for field 'filter': '{filter}'. Invalid list filter expression."),
    )
}

impl Filter {
    pub(crate) fn parse(filter: &str) -> Result<Self, ApiError> {
        let text = filter.trim();
        if text.is_empty() {
            return Ok(Self::default());
        }
        let parts: Vec<&str> = if text.starts_with('(') {
            let mut parts = Vec::new();
            let mut rest = text;
            while !rest.is_empty() {
                let inner = rest.strip_prefix('(').ok_or_else(|| bad_filter(filter))?;
                let end = inner.find(')').ok_or_else(|| bad_filter(filter))?;
                parts.push(&inner[..end]);
                rest = inner[end + 1..].trim_start();
                rest = rest.strip_prefix("AND").unwrap_or(rest).trim_start();
            }
            parts
        } else {
            vec![text]
        };
        let terms = parts
            .into_iter()
            .map(|p| Term::parse(p).ok_or_else(|| bad_filter(filter)))
            .collect::<Result<Vec<_>, _>>()?;
        let regex = terms
            .iter()
            .filter(|t| matches!(t.op, Op::Re(_) | Op::NotRe(_)))
            .count();
        if regex != 0 && regex != terms.len() {
            return Err(bad_filter(filter));
        }
        Ok(Self { terms })
    }

    pub(crate) fn matches(&self, v: &Value) -> bool {
        self.terms.iter().all(|t| t.matches(v))
    }
}

impl Term {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let mut words = text.splitn(3, ' ');
        let regex_form = match (words.next(), words.next(), words.next()) {
            (Some(f), Some(o @ ("eq" | "ne")), Some(v)) => Some((f, o, v)),
            _ => None,
        };
        let (field, op, value) = if let Some(form) = regex_form {
            form
        } else if let Some((f, v)) = text.split_once("!=") {
            (f, "!=", v)
        } else if let Some((f, v)) = text.split_once(":*") {
            (f, ":*", v)
        } else if let Some((f, v)) = text.split_once('=') {
            (f, "=", v)
        } else {
            return None;
        };
        let field = field.trim();
        let value = value.trim();
        let valid_field = !field.is_empty()
            && field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid_field {
            return None;
        }
        let unquoted = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value)
            .to_string();
        let whole = |re: &str| regex::Regex::new(&format!("^(?:{re})$")).ok();
        let op = match op {
            "=" if !value.is_empty() => Op::Eq(unquoted),
            "!=" if !value.is_empty() => Op::Ne(unquoted),
            ":*" if value.is_empty() => Op::Present,
            "eq" => Op::Re(whole(&unquoted)?),
            "ne" => Op::NotRe(whole(&unquoted)?),
            _ => return None,
        };
        Some(Self {
            path: field.split('.').map(str::to_string).collect(),
            op,
        })
    }

    fn matches(&self, v: &Value) -> bool {
        let found = self.path.iter().try_fold(v, |v, k| v.get(k));
        let text = found.map(|f| match f {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        match (&self.op, text) {
            (Op::Present, t) => t.is_some(),
            (Op::Eq(want), Some(t)) => *want == t,
            (Op::Ne(want), t) => t.as_deref() != Some(want.as_str()),
            (Op::Re(re), Some(t)) => re.is_match(&t),
            (Op::NotRe(re), t) => !t.is_some_and(|t| re.is_match(&t)),
            (Op::Eq(_) | Op::Re(_), None) => false,
        }
    }
}

#[cfg(test)]
#[path = "aggregated/tests.rs"]
mod tests;
