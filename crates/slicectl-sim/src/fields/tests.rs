#![cfg(test)]
use serde_json::json;

use super::*;

fn filter(fields: &str, v: Value) -> Value {
    let sel = Selection::parse(fields).unwrap();
    // Copying only the selected part gives what filtering a copy gives.
    let selected = sel.select(&v);
    let applied = sel.apply(v);
    assert_eq!(selected, applied, "select and apply differ for {fields}");
    applied
}

#[test]
fn selects_nested_fields_in_every_array_element() {
    let v = json!({
        "clusters": [
            {"name": "a", "location": "l", "status": "RUNNING",
             "nodePools": [{"name": "p", "config": {"labels": {"x": "1"}, "machineType": "m"}, "status": "RUNNING"}]},
            {"name": "b", "location": "l"}
        ],
        "missingZones": ["z"]
    });
    let got = filter(
        "clusters(name,location,nodePools(name,config/labels)),missingZones",
        v,
    );
    assert_eq!(
        got,
        json!({
            "clusters": [
                {"name": "a", "location": "l",
                 "nodePools": [{"name": "p", "config": {"labels": {"x": "1"}}}]},
                {"name": "b", "location": "l"}
            ],
            "missingZones": ["z"]
        })
    );
}

#[test]
fn paths_into_one_field_merge() {
    let v = json!({"config": {"a": 1, "b": 2, "c": 3}});
    assert_eq!(
        filter("config/a,config(b)", v.clone()),
        json!({"config": {"a": 1, "b": 2}})
    );
    assert_eq!(filter("config/a,config", v.clone()), v);
}

#[test]
fn a_wildcard_selects_every_field() {
    let v = json!({"items": {"a": {"x": 1, "y": 2}, "b": {"x": 3}}, "other": 1});
    assert_eq!(
        filter("items/*/x", v.clone()),
        json!({"items": {"a": {"x": 1}, "b": {"x": 3}}})
    );
    assert_eq!(
        filter("items/*/x,items/a", v.clone())["items"]["a"],
        json!({"x": 1})
    );
    assert_eq!(filter("*,other", v.clone()), v);
}

#[test]
fn a_malformed_selection_is_invalid_argument() {
    for bad in ["", "a(b", "a/", "a,,b", "a)b", "(a)"] {
        let e = Selection::parse(bad).unwrap_err();
        assert_eq!(e.http, 400, "{bad}");
        assert!(
            e.message.contains("Invalid field selection"),
            "{bad}: {}",
            e.message
        );
    }
}
