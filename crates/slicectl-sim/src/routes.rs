//! URL → endpoint resolution for both APIs. Each endpoint knows its
//! discovery method id (for counters and body validation) and whether it is
//! a write. Compute handlers live in `compute` (resource policies,
//! operations, zones) and `gce` (instance templates, MIGs, instances).

use axum::http::Method;

use super::gke::ClusterRef;
use super::operations::Scope;

/// Which API a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    Container,
    Compute,
    /// Cloud Quotas (`cloudquotas.googleapis.com/v1`).
    CloudQuotas,
    /// Cloud Monitoring (`monitoring.googleapis.com/v3`): quota usage.
    Monitoring,
}

/// A resolved API call.
#[derive(Debug, Clone)]
pub(crate) enum Endpoint {
    GkeClusterGet(ClusterRef),
    GkeClusterList {
        project: String,
        location: String,
    },
    GkePoolList(ClusterRef),
    GkePoolCreate(ClusterRef),
    GkePoolGet(ClusterRef, String),
    GkePoolUpdate(ClusterRef, String),
    GkePoolDelete(ClusterRef, String),
    GkeOpGet {
        project: String,
        location: String,
        name: String,
    },
    GkeOpList {
        project: String,
        location: String,
    },
    PolicyInsert {
        project: String,
        region: String,
    },
    PolicyList {
        project: String,
        region: String,
    },
    PolicyAggregated {
        project: String,
    },
    PolicyGet {
        project: String,
        region: String,
        name: String,
    },
    PolicyDelete {
        project: String,
        region: String,
        name: String,
    },
    OpGet(Scope, String),
    OpWait(Scope, String),
    OpList(Scope),
    ZoneGet {
        project: String,
        zone: String,
    },
    RegionGet {
        project: String,
        region: String,
    },
    /// Instance templates (global): project, and the name for one.
    TemplateInsert(String),
    TemplateList(String),
    TemplateGet(String, String),
    TemplateDelete(String, String),
    /// MIGs: project, zone, and the name for one.
    MigInsert(String, String),
    MigList(String, String),
    MigGet(String, String, String),
    MigDelete(String, String, String),
    MigPatch(String, String, String),
    MigRecreate(String, String, String),
    MigListManaged(String, String, String),
    MigListErrors(String, String, String),
    AutoscalerList(String, String),
    /// `GET projects/P/zones/Z/instanceGroups`.
    InstanceGroupList(String, String),
    /// Instances: project, zone, and the name for one.
    InstanceList(String, String),
    InstanceAggregated(String),
    /// `GET projects/P/aggregated/instanceGroupManagers`.
    MigAggregated(String),
    /// `GET projects/P/aggregated/instanceTemplates`.
    TemplateAggregated(String),
    /// `GET projects/P/aggregated/operations`.
    OpAggregated(String),
    InstanceGet(String, String, String),
    InstanceSetMetadata(String, String, String),
    InstanceGuestAttributes(String, String, String),
    /// Reservations (zonal): project, zone, and the name for one.
    ReservationGet(String, String, String),
    ReservationList(String, String),
    /// `GET projects/P/aggregated/reservations`.
    ReservationAggregated(String),
    /// Cloud Quotas `GET v1/projects/P/locations/L/services/S/quotaInfos/ID`.
    QuotaInfoGet(QuotaParent, String),
    /// Cloud Quotas `GET v1/projects/P/locations/L/services/S/quotaInfos`.
    QuotaInfoList(QuotaParent),
    /// Cloud Monitoring `GET v3/projects/P/timeSeries`.
    TimeSeriesList(String),
}

/// `projects/P/locations/L/services/S`: the parent of Cloud Quotas'
/// `QuotaInfo`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuotaParent {
    pub project: String,
    pub location: String,
    pub service: String,
}

impl QuotaParent {
    /// `projects/P/locations/L/services/S`.
    pub fn path(&self) -> String {
        format!(
            "projects/{}/locations/{}/services/{}",
            self.project, self.location, self.service
        )
    }
}

fn ops_family(scope: &Scope) -> &'static str {
    match scope {
        Scope::Region { .. } => "regionOperations",
        Scope::Zone { .. } => "zoneOperations",
        Scope::Global { .. } => "globalOperations",
    }
}

impl Endpoint {
    /// Discovery method id.
    pub fn method_id(&self) -> String {
        const NP: &str = "container.projects.locations.clusters.nodePools";
        match self {
            Self::GkeClusterGet(_) => "container.projects.locations.clusters.get".into(),
            Self::GkeClusterList { .. } => "container.projects.locations.clusters.list".into(),
            Self::GkePoolList(_) => format!("{NP}.list"),
            Self::GkePoolCreate(_) => format!("{NP}.create"),
            Self::GkePoolGet(..) => format!("{NP}.get"),
            Self::GkePoolUpdate(..) => format!("{NP}.update"),
            Self::GkePoolDelete(..) => format!("{NP}.delete"),
            Self::GkeOpGet { .. } => "container.projects.locations.operations.get".into(),
            Self::GkeOpList { .. } => "container.projects.locations.operations.list".into(),
            Self::PolicyInsert { .. } => "compute.resourcePolicies.insert".into(),
            Self::PolicyList { .. } => "compute.resourcePolicies.list".into(),
            Self::PolicyAggregated { .. } => "compute.resourcePolicies.aggregatedList".into(),
            Self::PolicyGet { .. } => "compute.resourcePolicies.get".into(),
            Self::PolicyDelete { .. } => "compute.resourcePolicies.delete".into(),
            Self::OpGet(s, _) => format!("compute.{}.get", ops_family(s)),
            Self::OpWait(s, _) => format!("compute.{}.wait", ops_family(s)),
            Self::OpList(s) => format!("compute.{}.list", ops_family(s)),
            Self::ZoneGet { .. } => "compute.zones.get".into(),
            Self::RegionGet { .. } => "compute.regions.get".into(),
            Self::TemplateInsert(_) => "compute.instanceTemplates.insert".into(),
            Self::TemplateList(_) => "compute.instanceTemplates.list".into(),
            Self::TemplateGet(..) => "compute.instanceTemplates.get".into(),
            Self::TemplateDelete(..) => "compute.instanceTemplates.delete".into(),
            Self::MigInsert(..) => "compute.instanceGroupManagers.insert".into(),
            Self::MigList(..) => "compute.instanceGroupManagers.list".into(),
            Self::MigGet(..) => "compute.instanceGroupManagers.get".into(),
            Self::MigDelete(..) => "compute.instanceGroupManagers.delete".into(),
            Self::MigPatch(..) => "compute.instanceGroupManagers.patch".into(),
            Self::MigRecreate(..) => "compute.instanceGroupManagers.recreateInstances".into(),
            Self::MigListManaged(..) => "compute.instanceGroupManagers.listManagedInstances".into(),
            Self::MigListErrors(..) => "compute.instanceGroupManagers.listErrors".into(),
            Self::AutoscalerList(..) => "compute.autoscalers.list".into(),
            Self::InstanceGroupList(..) => "compute.instanceGroups.list".into(),
            Self::InstanceList(..) => "compute.instances.list".into(),
            Self::InstanceAggregated(_) => "compute.instances.aggregatedList".into(),
            Self::MigAggregated(_) => "compute.instanceGroupManagers.aggregatedList".into(),
            Self::TemplateAggregated(_) => "compute.instanceTemplates.aggregatedList".into(),
            Self::OpAggregated(_) => "compute.globalOperations.aggregatedList".into(),
            Self::InstanceGet(..) => "compute.instances.get".into(),
            Self::InstanceSetMetadata(..) => "compute.instances.setMetadata".into(),
            Self::InstanceGuestAttributes(..) => "compute.instances.getGuestAttributes".into(),
            Self::ReservationGet(..) => "compute.reservations.get".into(),
            Self::ReservationList(..) => "compute.reservations.list".into(),
            Self::ReservationAggregated(_) => "compute.reservations.aggregatedList".into(),
            Self::QuotaInfoGet(..) => {
                "cloudquotas.projects.locations.services.quotaInfos.get".into()
            }
            Self::QuotaInfoList(_) => {
                "cloudquotas.projects.locations.services.quotaInfos.list".into()
            }
            Self::TimeSeriesList(_) => "monitoring.projects.timeSeries.list".into(),
        }
    }

    /// Whether the call changes state (counted as a write, rate limited).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Self::GkePoolCreate(_)
                | Self::GkePoolUpdate(..)
                | Self::GkePoolDelete(..)
                | Self::PolicyInsert { .. }
                | Self::PolicyDelete { .. }
                | Self::TemplateInsert(_)
                | Self::TemplateDelete(..)
                | Self::MigInsert(..)
                | Self::MigDelete(..)
                | Self::MigPatch(..)
                | Self::MigRecreate(..)
                | Self::InstanceSetMetadata(..)
        )
    }
}

/// A resolved request: API, version segment, endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub api: Api,
    pub version: String,
    pub endpoint: Endpoint,
}

/// Resolves an HTTP method and path; `None` for anything not served.
pub(crate) fn resolve(method: &Method, path: &str) -> Option<Resolved> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        // Cloud Monitoring's time series (the TPU quotas' usage).
        ["v3", "projects", p, "timeSeries"] if method == Method::GET => Some(Resolved {
            api: Api::Monitoring,
            version: "v3".into(),
            endpoint: Endpoint::TimeSeriesList((*p).to_string()),
        }),
        // Cloud Quotas; `v1beta` is what `gcloud beta quotas` calls (the
        // same resources).
        [
            v @ ("v1" | "v1beta"),
            "projects",
            p,
            "locations",
            l,
            "services",
            s,
            rest @ ..,
        ] => {
            let parent = QuotaParent {
                project: (*p).to_string(),
                location: (*l).to_string(),
                service: (*s).to_string(),
            };
            let endpoint = match (method.as_str(), rest) {
                ("GET", ["quotaInfos"]) => Endpoint::QuotaInfoList(parent),
                ("GET", ["quotaInfos", id]) if !id.is_empty() => {
                    Endpoint::QuotaInfoGet(parent, (*id).to_string())
                }
                _ => return None,
            };
            Some(Resolved {
                api: Api::CloudQuotas,
                version: (*v).to_string(),
                endpoint,
            })
        }
        [
            v @ ("v1" | "v1beta1"),
            "projects",
            p,
            "locations",
            l,
            rest @ ..,
        ] => {
            let endpoint = gke(method, p, l, rest)?;
            Some(Resolved {
                api: Api::Container,
                version: (*v).to_string(),
                endpoint,
            })
        }
        [
            "compute",
            v @ ("v1" | "beta" | "alpha"),
            "projects",
            p,
            rest @ ..,
        ] => {
            let endpoint = compute(method, p, rest)?;
            Some(Resolved {
                api: Api::Compute,
                version: (*v).to_string(),
                endpoint,
            })
        }
        _ => None,
    }
}

fn gke(method: &Method, p: &str, l: &str, rest: &[&str]) -> Option<Endpoint> {
    let cref = |c: &str| ClusterRef {
        project: p.to_string(),
        location: l.to_string(),
        cluster: c.to_string(),
    };
    let ok = |s: &str| !s.is_empty() && !s.contains(':');
    match (method.as_str(), rest) {
        ("GET", ["clusters"]) => Some(Endpoint::GkeClusterList {
            project: p.into(),
            location: l.into(),
        }),
        ("GET", ["clusters", c]) if ok(c) => Some(Endpoint::GkeClusterGet(cref(c))),
        ("GET", ["clusters", c, "nodePools"]) => Some(Endpoint::GkePoolList(cref(c))),
        ("POST", ["clusters", c, "nodePools"]) => Some(Endpoint::GkePoolCreate(cref(c))),
        (m, ["clusters", c, "nodePools", np]) if ok(np) => {
            let (c, np) = (cref(c), (*np).to_string());
            match m {
                "GET" => Some(Endpoint::GkePoolGet(c, np)),
                "PUT" => Some(Endpoint::GkePoolUpdate(c, np)),
                "DELETE" => Some(Endpoint::GkePoolDelete(c, np)),
                _ => None,
            }
        }
        ("GET", ["operations"]) => Some(Endpoint::GkeOpList {
            project: p.into(),
            location: l.into(),
        }),
        ("GET", ["operations", op]) if ok(op) => Some(Endpoint::GkeOpGet {
            project: p.into(),
            location: l.into(),
            name: (*op).into(),
        }),
        _ => None,
    }
}

fn compute(method: &Method, p: &str, rest: &[&str]) -> Option<Endpoint> {
    let project = p.to_string();
    let (scope, tail): (Scope, &[&str]) = match rest {
        ["regions", r, tail @ ..] => (
            Scope::Region {
                project: project.clone(),
                region: (*r).into(),
            },
            tail,
        ),
        ["zones", z, tail @ ..] => (
            Scope::Zone {
                project: project.clone(),
                zone: (*z).into(),
            },
            tail,
        ),
        ["global", tail @ ..] => (
            Scope::Global {
                project: project.clone(),
            },
            tail,
        ),
        ["aggregated", "resourcePolicies"] if method == Method::GET => {
            return Some(Endpoint::PolicyAggregated { project });
        }
        ["aggregated", "instances"] if method == Method::GET => {
            return Some(Endpoint::InstanceAggregated(project));
        }
        ["aggregated", "instanceGroupManagers"] if method == Method::GET => {
            return Some(Endpoint::MigAggregated(project));
        }
        ["aggregated", "instanceTemplates"] if method == Method::GET => {
            return Some(Endpoint::TemplateAggregated(project));
        }
        ["aggregated", "reservations"] if method == Method::GET => {
            return Some(Endpoint::ReservationAggregated(project));
        }
        ["aggregated", "operations"] if method == Method::GET => {
            return Some(Endpoint::OpAggregated(project));
        }
        _ => return None,
    };
    let m = method.as_str();
    match (m, &scope, tail) {
        ("GET", Scope::Region { region, .. }, []) => Some(Endpoint::RegionGet {
            project,
            region: region.clone(),
        }),
        ("GET", Scope::Zone { zone, .. }, []) => Some(Endpoint::ZoneGet {
            project,
            zone: zone.clone(),
        }),
        ("GET", Scope::Zone { zone, .. }, ["reservations"]) => {
            Some(Endpoint::ReservationList(project, zone.clone()))
        }
        ("GET", Scope::Zone { zone, .. }, ["reservations", n]) => {
            Some(Endpoint::ReservationGet(project, zone.clone(), (*n).into()))
        }
        (_, Scope::Region { region, .. }, ["resourcePolicies", rest @ ..]) => {
            let region = region.clone();
            match (m, rest) {
                ("GET", []) => Some(Endpoint::PolicyList { project, region }),
                ("POST", []) => Some(Endpoint::PolicyInsert { project, region }),
                ("GET", [n]) => Some(Endpoint::PolicyGet {
                    project,
                    region,
                    name: (*n).into(),
                }),
                ("DELETE", [n]) => Some(Endpoint::PolicyDelete {
                    project,
                    region,
                    name: (*n).into(),
                }),
                _ => None,
            }
        }
        (_, Scope::Global { .. }, ["instanceTemplates", rest @ ..]) => match (m, rest) {
            ("POST", []) => Some(Endpoint::TemplateInsert(project)),
            ("GET", []) => Some(Endpoint::TemplateList(project)),
            ("GET", [n]) => Some(Endpoint::TemplateGet(project, (*n).into())),
            ("DELETE", [n]) => Some(Endpoint::TemplateDelete(project, (*n).into())),
            _ => None,
        },
        (_, Scope::Zone { zone, .. }, ["instanceGroupManagers", rest @ ..]) => {
            let zone = zone.clone();
            match (m, rest) {
                ("POST", []) => Some(Endpoint::MigInsert(project, zone)),
                ("GET", []) => Some(Endpoint::MigList(project, zone)),
                ("GET", [n]) => Some(Endpoint::MigGet(project, zone, (*n).into())),
                ("DELETE", [n]) => Some(Endpoint::MigDelete(project, zone, (*n).into())),
                ("PATCH", [n]) => Some(Endpoint::MigPatch(project, zone, (*n).into())),
                ("POST", [n, "listManagedInstances"]) => {
                    Some(Endpoint::MigListManaged(project, zone, (*n).into()))
                }
                ("GET", [n, "listErrors"]) => {
                    Some(Endpoint::MigListErrors(project, zone, (*n).into()))
                }
                ("POST", [n, "recreateInstances"]) => {
                    Some(Endpoint::MigRecreate(project, zone, (*n).into()))
                }
                _ => None,
            }
        }
        ("GET", Scope::Zone { zone, .. }, ["autoscalers"]) => {
            Some(Endpoint::AutoscalerList(project, zone.clone()))
        }
        ("GET", Scope::Zone { zone, .. }, ["instanceGroups"]) => {
            Some(Endpoint::InstanceGroupList(project, zone.clone()))
        }
        (_, Scope::Zone { zone, .. }, ["instances", rest @ ..]) => {
            let zone = zone.clone();
            match (m, rest) {
                ("GET", []) => Some(Endpoint::InstanceList(project, zone)),
                ("GET", [n]) => Some(Endpoint::InstanceGet(project, zone, (*n).into())),
                ("POST", [n, "setMetadata"]) => {
                    Some(Endpoint::InstanceSetMetadata(project, zone, (*n).into()))
                }
                ("GET", [n, "getGuestAttributes"]) => Some(Endpoint::InstanceGuestAttributes(
                    project,
                    zone,
                    (*n).into(),
                )),
                _ => None,
            }
        }
        ("GET", _, ["operations"]) => Some(Endpoint::OpList(scope)),
        ("GET", _, ["operations", op]) => Some(Endpoint::OpGet(scope, (*op).into())),
        ("POST", _, ["operations", op, "wait"]) => Some(Endpoint::OpWait(scope, (*op).into())),
        _ => None,
    }
}

#[cfg(test)]
#[path = "routes/tests.rs"]
mod tests;
