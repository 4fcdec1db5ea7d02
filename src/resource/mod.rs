//! Cloud resources as slicectl renders and observes them: the subset of the
//! GKE (container v1) and Compute Engine (compute v1) wire format slicectl
//! uses. Pure data (serde), shared by the pure core (`plan`) and the shell
//! (`cloud`, `observe`). Field names and JSON types follow Google's discovery
//! documents exactly; int64 fields travel as JSON strings.

pub mod compute;
pub mod gke;
pub mod observed;

use std::collections::BTreeMap;
use std::fmt;

/// A label map read by key: Kubernetes' `BTreeMap` and the wire's compact
/// [`gke::Labels`], so that ownership is read from either.
pub trait LabelLookup {
    /// The value under `key`.
    fn label(&self, key: &str) -> Option<&String>;
}

impl LabelLookup for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&String> {
        self.get(key)
    }
}

impl LabelLookup for gke::Labels {
    fn label(&self, key: &str) -> Option<&String> {
        self.get(key)
    }
}

/// A GKE cluster: `projects/P/locations/L/clusters/C`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ClusterRef {
    /// Project id.
    pub project: String,
    /// Region or zone.
    pub location: String,
    /// Cluster name.
    pub name: String,
}

impl ClusterRef {
    /// Whether a resource link (URL or path) points into this cluster. GKE
    /// names the project by id in some links and by number in others
    /// (operation `selfLink`/`targetLink`), so any project segment that is the
    /// id or all digits is accepted; location and cluster must match.
    pub fn contains_link(&self, link: &str) -> bool {
        let Some(i) = link
            .find("/projects/")
            .map(|i| i + "/projects/".len())
            .or_else(|| link.starts_with("projects/").then_some("projects/".len()))
        else {
            return false;
        };
        let rest = &link[i..];
        let Some((project, rest)) = rest.split_once('/') else {
            return false;
        };
        let project_ok = project == self.project
            || (!project.is_empty() && project.bytes().all(|b| b.is_ascii_digit()));
        // A zonal cluster's operation links say `zones/<zone>`, a regional
        // one's `locations/<region>`; accept either spelling.
        let matches = |segment: &str| {
            let want = format!("{segment}/{}/clusters/{}", self.location, self.name);
            rest == want || rest.starts_with(&format!("{want}/"))
        };
        project_ok && (matches("locations") || matches("zones"))
    }

    /// `projects/P/locations/L/clusters/C`.
    pub fn path(&self) -> String {
        format!(
            "projects/{}/locations/{}/clusters/{}",
            self.project, self.location, self.name
        )
    }
}

impl fmt::Display for ClusterRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path())
    }
}

/// A compute region in a project.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct RegionRef {
    /// Project id.
    pub project: String,
    /// Region.
    pub region: String,
}

impl fmt::Display for RegionRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "projects/{}/regions/{}", self.project, self.region)
    }
}

/// A compute zone in a project.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ZoneRef {
    /// Project id.
    pub project: String,
    /// Zone.
    pub zone: String,
}

impl fmt::Display for ZoneRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "projects/{}/zones/{}", self.project, self.zone)
    }
}

/// A project's global scope (instance templates).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ProjectRef {
    /// Project id.
    pub project: String,
}

impl fmt::Display for ProjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "projects/{}/global", self.project)
    }
}

/// A self-managed Kubernetes cluster, identified by the control-plane
/// endpoint its nodes join (`HOST:PORT`).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct KubeRef {
    /// The control-plane endpoint, `HOST:PORT`.
    pub endpoint: String,
}

impl KubeRef {
    /// The Kubernetes API of a GKE cluster, keyed by the cluster itself
    /// (`gke://PROJECT/LOCATION/NAME`): how it is reached (the endpoint and CA
    /// from `clusters.get`, a kubeconfig, in-cluster) is resolved by the
    /// Kubernetes seam when the cluster is first used.
    pub fn gke(c: &ClusterRef) -> KubeRef {
        KubeRef {
            endpoint: format!("{GKE_KUBE_SCHEME}{}/{}/{}", c.project, c.location, c.name),
        }
    }

    /// The GKE cluster this names, if it is [`KubeRef::gke`]'s.
    pub fn gke_cluster(&self) -> Option<ClusterRef> {
        let rest = self.endpoint.strip_prefix(GKE_KUBE_SCHEME)?;
        let mut parts = rest.splitn(3, '/');
        let (project, location, name) = (parts.next()?, parts.next()?, parts.next()?);
        if project.is_empty() || location.is_empty() || name.is_empty() || name.contains('/') {
            return None;
        }
        Some(ClusterRef {
            project: project.to_owned(),
            location: location.to_owned(),
            name: name.to_owned(),
        })
    }
}

/// The prefix of [`KubeRef::gke`]'s keys.
pub const GKE_KUBE_SCHEME: &str = "gke://";

impl fmt::Display for KubeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kubernetes {}", self.endpoint)
    }
}

/// Serde helpers for Google's int64-as-string encoding (accepts numbers too).
pub mod int64_string {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises an `i64` as a JSON string.
    pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&v.to_string())
    }

    /// Deserialises an `i64` from a JSON string or number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            S(String),
            N(i64),
        }
        match Either::deserialize(d)? {
            Either::S(s) => s.parse().map_err(serde::de::Error::custom),
            Either::N(n) => Ok(n),
        }
    }
}

/// Same as [`int64_string`] for `Option<i64>`.
pub mod opt_int64_string {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serialises an `Option<i64>` as a JSON string (callers skip `None`).
    pub fn serialize<S: Serializer>(v: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&v.to_string()),
            None => s.serialize_none(),
        }
    }

    /// Deserialises an `Option<i64>` from a JSON string, number or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            S(String),
            N(i64),
        }
        match Option::<Either>::deserialize(d)? {
            Some(Either::S(s)) => s.parse().map(Some).map_err(serde::de::Error::custom),
            Some(Either::N(n)) => Ok(Some(n)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ClusterRef, KubeRef};

    #[test]
    fn a_gke_cluster_keys_its_kubernetes_api() {
        let c = ClusterRef {
            project: "p1".into(),
            location: "us-central2-b".into(),
            name: "train".into(),
        };
        let k = KubeRef::gke(&c);
        assert_eq!(k.endpoint, "gke://p1/us-central2-b/train");
        assert_eq!(k.gke_cluster(), Some(c));
        let self_managed = KubeRef {
            endpoint: "10.0.0.2:6443".into(),
        };
        assert_eq!(self_managed.gke_cluster(), None);
        for bad in ["gke://p1/loc", "gke:///loc/n", "gke://p/l/n/x"] {
            let k = KubeRef {
                endpoint: bad.into(),
            };
            assert_eq!(k.gke_cluster(), None, "{bad}");
        }
    }

    #[test]
    fn links_match_by_project_id_or_number() {
        let c = ClusterRef {
            project: "p1".into(),
            location: "us-central2".into(),
            name: "train".into(),
        };
        assert!(c.contains_link("https://container.googleapis.com/v1/projects/123456789012/locations/us-central2/clusters/train/nodePools/a"));
        assert!(c.contains_link("projects/p1/locations/us-central2/clusters/train/nodePools/a"));
        assert!(!c.contains_link(
            "https://x/v1/projects/p2/locations/us-central2/clusters/train/nodePools/a"
        ));
        assert!(!c.contains_link(
            "https://x/v1/projects/123/locations/us-central2/clusters/train2/nodePools/a"
        ));
        assert!(!c.contains_link(
            "https://x/v1/projects/123/locations/europe-west4/clusters/train/nodePools/a"
        ));
        let zonal = ClusterRef {
            project: "p1".into(),
            location: "us-central2-b".into(),
            name: "train".into(),
        };
        assert!(zonal.contains_link(
            "https://container.googleapis.com/v1/projects/123/zones/us-central2-b/clusters/train/nodePools/a"
        ));
        assert!(!zonal.contains_link(
            "https://container.googleapis.com/v1/projects/123/zones/us-central2-c/clusters/train/nodePools/a"
        ));
    }
}
