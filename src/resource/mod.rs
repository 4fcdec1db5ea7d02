//! Cloud resources as slicectl renders and observes them: the subset of the
//! GKE (container v1) and Compute Engine (compute v1) wire format slicectl
//! uses. Pure data (serde), shared by the pure core (`plan`) and the shell
//! (`cloud`, `observe`). Field names and JSON types follow Google's discovery
//! documents exactly; int64 fields travel as JSON strings.

pub mod compute;
pub mod gke;

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
