//! Label maps (Kubernetes node labels, GCE resource labels, metadata), as
//! the specs and the wire types hold them.

use serde::Deserialize;

/// A label map on the wire (node labels, resource labels, metadata): one
/// vector of pairs sorted by key, serialised as a JSON object in key order
/// exactly as a `BTreeMap` is. A `BTreeMap` costs a 544-byte node however few
/// its entries; at 10,000 live and as many desired node pools, with three maps
/// each, that was 27 MB of the plan's heap peak (docs/benchmarks.md, "Peak
/// RSS at 10,000 slices (third pass)").
pub type Labels = litemap::LiteMap<String, String>;

/// Encodes a [`Labels`] as a JSON object, always: `LiteMap` writes an empty
/// map as `[]` in human-readable formats, which GKE rejects ("Invalid value at
/// 'labels.labels' (TYPE_MESSAGE), []").
pub(crate) fn labels_as_map<S>(labels: &Labels, s: S) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
{
    s.collect_map(labels.iter())
}

/// Decodes a [`Labels`] and gives back the vector's spare capacity (it grows
/// by doubling while the object is read).
pub(crate) fn compact_labels<'de, D>(d: D) -> Result<Labels, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let mut labels = Labels::deserialize(d)?;
    shrink_labels(&mut labels);
    Ok(labels)
}

/// Gives back a [`Labels`]' spare capacity, once it is complete.
pub fn shrink_labels(labels: &mut Labels) {
    let mut pairs = std::mem::take(labels).into_tuple_vec();
    pairs.shrink_to_fit();
    *labels = Labels::from_sorted_store_unchecked(pairs);
}
