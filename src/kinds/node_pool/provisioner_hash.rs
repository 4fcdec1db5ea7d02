//! tpu-provisioner's node-pool "selective hash", byte for byte.
//!
//! tpu-provisioner (`internal/cloud/gke.go`, `nodePoolSelectiveHash`) stamps
//! every node pool it creates with the label
//! [`TPU_PROVISIONER_HASH_LABEL`]. The value is computed as follows:
//!
//! 1. If the pool's labels already carry that label, its value is the hash.
//! 2. Otherwise a `container/v1beta1` `NodePool` holding only
//!    `config.{labels, machineType, reservationAffinity, spot}` is encoded with
//!    Go's `encoding/json` (struct fields in alphabetical order, all
//!    `omitempty`, map keys sorted, compact, HTML-escaped strings),
//! 3. hashed with FNV-1a 32,
//! 4. and the decimal `Sum32` is encoded with Kubernetes'
//!    `rand.SafeEncodeString`.
//!
//! Reproducing it lets slicectl recognise (and adopt) node pools that
//! tpu-provisioner created. The vectors in `tests/tpu-provisioner-hash/`
//! were produced by the Go code itself and are checked by this module's tests.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::resource::gke::ReservationAffinity;

/// Node-pool label under which tpu-provisioner stores its selective hash.
pub const TPU_PROVISIONER_HASH_LABEL: &str = "google.com/tpu-provisioner-nodepool-hash";

/// tpu-provisioner's manager label (`google.com/nodepool-manager: tpu-provisioner`).
pub const TPU_PROVISIONER_MANAGER_LABEL: &str = "google.com/nodepool-manager";

/// The alphabet of `k8s.io/apimachinery/pkg/util/rand.SafeEncodeString`
/// (no vowels, no look-alike characters).
const SAFE_ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// Computes tpu-provisioner's node-pool hash for a pool with these node
/// `labels`, `machine_type`, `reservation_affinity` and `spot` setting.
///
/// As in tpu-provisioner, if `labels` already contains
/// [`TPU_PROVISIONER_HASH_LABEL`], its value is returned unchanged; to compute
/// the hash of a desired pool, pass its labels without that key.
pub fn tpu_provisioner_hash(
    labels: &BTreeMap<String, String>,
    machine_type: &str,
    reservation_affinity: Option<&ReservationAffinity>,
    spot: bool,
) -> String {
    if let Some(existing) = labels.get(TPU_PROVISIONER_HASH_LABEL) {
        return existing.clone();
    }
    let json = selective_json(labels, machine_type, reservation_affinity, spot);
    safe_encode_string(&fnv1a_32(json.as_bytes()).to_string())
}

/// The exact bytes Go's `json.Marshal` produces for the selective
/// `NodePool{Config: &NodeConfig{Labels, MachineType, ReservationAffinity, Spot}}`.
fn selective_json(
    labels: &BTreeMap<String, String>,
    machine_type: &str,
    reservation_affinity: Option<&ReservationAffinity>,
    spot: bool,
) -> String {
    let mut fields: Vec<String> = Vec::with_capacity(4);
    if !labels.is_empty() {
        // BTreeMap<String, _> iterates in byte order, like Go's sorted map keys.
        let entries: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{}:{}", go_json_string(k), go_json_string(v)))
            .collect();
        fields.push(format!("\"labels\":{{{}}}", entries.join(",")));
    }
    if !machine_type.is_empty() {
        fields.push(format!("\"machineType\":{}", go_json_string(machine_type)));
    }
    if let Some(ra) = reservation_affinity {
        // A non-nil pointer is always encoded; its own fields are omitempty.
        let mut inner: Vec<String> = Vec::with_capacity(3);
        if !ra.consume_reservation_type.is_empty() {
            inner.push(format!(
                "\"consumeReservationType\":{}",
                go_json_string(&ra.consume_reservation_type)
            ));
        }
        if let Some(key) = ra.key.as_deref().filter(|k| !k.is_empty()) {
            inner.push(format!("\"key\":{}", go_json_string(key)));
        }
        if !ra.values.is_empty() {
            let values: Vec<String> = ra.values.iter().map(|v| go_json_string(v)).collect();
            inner.push(format!("\"values\":[{}]", values.join(",")));
        }
        fields.push(format!("\"reservationAffinity\":{{{}}}", inner.join(",")));
    }
    if spot {
        fields.push("\"spot\":true".to_owned());
    }
    format!("{{\"config\":{{{}}}}}", fields.join(","))
}

/// A JSON string literal escaped exactly like Go's `encoding/json` with
/// HTML escaping on (the `json.Marshal` default).
fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// FNV-1a, 32 bit (Go's `hash/fnv.New32a`).
fn fnv1a_32(data: &[u8]) -> u32 {
    const OFFSET_BASIS: u32 = 2_166_136_261;
    const PRIME: u32 = 16_777_619;
    data.iter().fold(OFFSET_BASIS, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(PRIME)
    })
}

/// Kubernetes' `rand.SafeEncodeString`: maps every character to
/// `SAFE_ALPHABET[code point % 27]`.
fn safe_encode_string(s: &str) -> String {
    s.chars()
        .map(|c| char::from(SAFE_ALPHABET[(u32::from(c) % 27) as usize]))
        .collect()
}

#[cfg(test)]
#[path = "provisioner_hash/tests.rs"]
mod tests;
