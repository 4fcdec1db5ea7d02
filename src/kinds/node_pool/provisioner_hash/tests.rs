#![cfg(test)]
use super::*;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reservation {
    consume_reservation_type: String,
    key: Option<String>,
    values: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Vector {
    name: String,
    labels: Option<BTreeMap<String, String>>,
    machine_type: String,
    reservation_affinity: Option<Reservation>,
    spot: bool,
    json: String,
    sum32: u32,
    hash: String,
}

fn vectors() -> Vec<Vector> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/tpu-provisioner-hash/vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("read vectors.json");
    serde_json::from_str(&text).expect("parse vectors.json")
}

#[test]
fn go_vectors() {
    let vectors = vectors();
    assert!(vectors.len() >= 8, "expected at least 8 vectors");
    for v in &vectors {
        let labels = v.labels.clone().unwrap_or_default();
        let ra = v
            .reservation_affinity
            .as_ref()
            .map(|r| ReservationAffinity {
                consume_reservation_type: r.consume_reservation_type.clone(),
                key: r.key.clone(),
                values: r.values.clone().unwrap_or_default(),
            });
        let got = tpu_provisioner_hash(&labels, &v.machine_type, ra.as_ref(), v.spot);
        assert_eq!(got, v.hash, "hash of vector {:?}", v.name);
        if !labels.contains_key(TPU_PROVISIONER_HASH_LABEL) {
            let json = selective_json(&labels, &v.machine_type, ra.as_ref(), v.spot);
            assert_eq!(json, v.json, "JSON of vector {:?}", v.name);
            assert_eq!(fnv1a_32(json.as_bytes()), v.sum32, "Sum32 of {:?}", v.name);
        }
    }
}

#[test]
fn reference_vectors_from_tpu_anchors() {
    // tpu-anchors.md §A.7: `{"config":{}}` → 3338667229 → 777dbbc66f.
    assert_eq!(fnv1a_32(b"{\"config\":{}}"), 3_338_667_229);
    assert_eq!(
        tpu_provisioner_hash(&BTreeMap::new(), "", None, false),
        "777dbbc66f"
    );
}

#[test]
fn safe_encode_maps_digits() {
    assert_eq!(safe_encode_string("0123456789"), "456789bcdf");
}
