#![cfg(test)]
use super::*;

#[test]
fn scopes_come_from_resource_paths_and_links() {
    assert_eq!(
        scope_of("projects/p/zones/us-central2-b/instances/i").as_deref(),
        Some("zones/us-central2-b")
    );
    assert_eq!(
        scope_of("http://h/compute/v1/projects/p/regions/us-central2/operations/o").as_deref(),
        Some("regions/us-central2")
    );
    assert_eq!(
        scope_of("projects/p/global/instanceTemplates/t").as_deref(),
        Some("global")
    );
    assert_eq!(scope_of("projects/p/aggregated/instances"), None);
}

#[test]
fn filters_match_as_compute_reads_them() {
    let v = json!({"name": "gm-ab12", "status": "RUNNING", "labels": {"team": "a"}, "n": 4});
    let yes = [
        "",
        "name = gm-ab12",
        "name = \"gm-ab12\"",
        "status != STOPPED",
        "labels.team:*",
        "n = 4",
        "(status = RUNNING) (labels.team = a)",
        "(status = RUNNING) AND (labels.team != b)",
        "name eq gm-.*",
        "name eq \"gm-[a-z0-9]{4}\"",
        "labels.team ne b",
        "labels.owner != x",
    ];
    for f in yes {
        assert!(Filter::parse(f).unwrap().matches(&v), "{f}");
    }
    let no = [
        "name = gm",
        "name eq gm",
        "labels.owner:*",
        "labels.owner = x",
        "(status = RUNNING) (labels.team = b)",
    ];
    for f in no {
        assert!(!Filter::parse(f).unwrap().matches(&v), "{f}");
    }
    for bad in [
        "name ~ x",
        "(name = x",
        "= x",
        "name =",
        "(name eq x) (status = RUNNING)",
        "name eq (",
    ] {
        let e = Filter::parse(bad).err().unwrap_or_else(|| panic!("{bad}"));
        assert_eq!(e.http, 400, "{bad}");
        assert!(
            e.message.contains("Invalid list filter expression"),
            "{bad}"
        );
    }
}
