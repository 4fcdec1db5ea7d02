//! Cloud resources as slicectl renders and observes them: the subset of the
//! GKE (container v1) and Compute Engine (compute v1) wire format slicectl
//! uses. Pure data (serde), shared by the pure core (`plan`) and the shell
//! (`cloud`, `observe`). Field names and JSON types follow Google's discovery
//! documents exactly; int64 fields travel as JSON strings.

pub mod compute;
pub mod gke;

use std::fmt;

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
