#![cfg(test)]
//! The compact label maps decode and encode exactly as the `BTreeMap`s they
//! replaced.

use std::collections::BTreeMap;

use super::{Labels, NodeConfig, NodeLabels, NodePool, ResourceLabels};

fn btree(json: &str) -> BTreeMap<String, String> {
    serde_json::from_str(json).unwrap()
}

#[test]
fn labels_read_and_write_json_as_a_btreemap_does() {
    // Out of order, and a key twice (the last one wins in a BTreeMap).
    let json = r#"{"zeta":"1","alpha":"2","mid":"3","alpha":"4","":"empty"}"#;
    let config: NodeConfig =
        serde_json::from_str(&format!(r#"{{"labels":{json},"resourceLabels":{json}}}"#)).unwrap();
    let want = btree(json);
    let got: BTreeMap<String, String> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(config.labels.get("alpha").map(String::as_str), Some("4"));
    // Encoded in key order, byte for byte what the BTreeMap gives.
    assert_eq!(
        serde_json::to_string(&config.labels).unwrap(),
        serde_json::to_string(&want).unwrap()
    );
    assert_eq!(
        serde_json::to_value(&config).unwrap()["resourceLabels"],
        serde_json::to_value(&want).unwrap()
    );
}

#[test]
fn empty_label_maps_are_left_out_and_read_back_empty() {
    let pool: NodePool = serde_json::from_str(r#"{"name":"p","config":{}}"#).unwrap();
    let config = pool.config.clone().unwrap();
    assert!(config.labels.is_empty() && config.metadata.is_empty());
    assert_eq!(
        serde_json::to_string(&pool).unwrap(),
        r#"{"name":"p","config":{}}"#
    );
}

#[test]
fn decoded_labels_keep_no_spare_capacity() {
    let config: NodeConfig =
        serde_json::from_str(r#"{"labels":{"a":"1","b":"2","c":"3","d":"4","e":"5"}}"#).unwrap();
    let pairs = config.labels.into_tuple_vec();
    assert_eq!(pairs.len(), 5);
    assert_eq!(pairs.capacity(), 5);
    let mut grown: Labels = (0..9).map(|i| (format!("k{i}"), String::new())).collect();
    grown.insert("z".into(), String::new());
    super::shrink_labels(&mut grown);
    assert_eq!(grown.into_tuple_vec().capacity(), 10);
}

#[test]
fn an_empty_label_map_is_sent_as_an_empty_object() {
    // GKE answers 400 "Invalid value at 'labels.labels' (TYPE_MESSAGE), []"
    // to an empty map written as a list (LiteMap's own encoding).
    assert_eq!(
        serde_json::to_string(&NodeLabels::default()).unwrap(),
        r#"{"labels":{}}"#
    );
    assert_eq!(
        serde_json::to_value(ResourceLabels::default()).unwrap(),
        serde_json::json!({"labels": {}})
    );
}
