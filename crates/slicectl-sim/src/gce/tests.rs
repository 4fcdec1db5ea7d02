#![cfg(test)]
use super::*;
use crate::faults::{FaultConfig, Faults};

fn ctx(query: &[(&str, &str)]) -> Ctx {
    Ctx {
        base: "http://sim".into(),
        version: "v1".into(),
        now: Instant::now(),
        query: query
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        request_id: "0x1".into(),
        path: String::new(),
    }
}

fn world(agents: bool) -> Inner {
    let faults = Faults::new(
        FaultConfig {
            node_agents: agents,
            ..FaultConfig::default()
        },
        1,
    );
    Inner::new(Duration::ZERO, 1, faults)
}

/// A template and a 2-VM MIG (no workload policy), all DONE.
fn make(inner: &mut Inner) -> Vec<String> {
    let t = json!({"name": "t", "properties": {"machineType": "ct4p-hightpu-4t",
        "metadata": {"items": [{"key": "a", "value": "1"}]}}});
    insert_template(inner, &ctx(&[]), "p", &t).unwrap();
    inner.advance(Instant::now());
    let m = json!({"name": "m", "targetSize": 2,
        "instanceTemplate": "global/instanceTemplates/t"});
    insert_mig(inner, &ctx(&[]), "p", "us-central2-b", &m).unwrap();
    inner.advance(Instant::now());
    inner.instances.keys().cloned().collect()
}

#[tokio::test]
async fn vm_metadata_reaches_its_server_and_running_starts_the_agent() {
    for agents in [true, false] {
        let mut inner = world(agents);
        let vms = make(&mut inner);
        assert_eq!(vms.len(), 2);
        let vm = &inner.instances[&vms[0]];
        assert_eq!(vm.status, "RUNNING");
        let rt = vm.runtime.as_ref().unwrap();
        // RUNNING signals the node agent, as configured.
        assert_eq!(*rt.running.borrow(), Some(agents));
        let served = rt.meta.borrow().clone();
        assert_eq!(served.attributes["a"], "1");
        assert!(served.attributes["created-by"].ends_with("/instanceGroupManagers/m"));
        assert_eq!(served.machine_type, "ct4p-hightpu-4t");

        let name = vm.name.clone();
        let fp = encode_fingerprint(&vm.fingerprint);
        let body = json!({"fingerprint": fp, "items": [{"key": "b", "value": "2"}]});
        set_metadata(&mut inner, &ctx(&[]), "p", "us-central2-b", &name, &body).unwrap();
        let rt = inner.instances[&vms[0]].runtime.as_ref().unwrap();
        let served = rt.meta.borrow().clone();
        assert_eq!(served.attributes.get("b").map(String::as_str), Some("2"));
        assert!(!served.attributes.contains_key("a"));
    }
}

#[tokio::test]
async fn a_retried_write_with_the_same_request_id_runs_once() {
    let mut inner = world(false);
    let t = json!({"name": "t", "properties": {"machineType": "n2-standard-4"}});
    let c = ctx(&[("requestId", "6f0c8b2e-1111-4c1e-9a55-0123456789ab")]);
    let first = insert_template(&mut inner, &c, "p", &t).unwrap();
    let again = insert_template(&mut inner, &c, "p", &t).unwrap();
    assert_eq!(first["name"], again["name"]);
    let other = insert_template(&mut inner, &ctx(&[]), "p", &t).unwrap_err();
    assert_eq!(other.http, 409);
}

#[test]
fn links_resolve_from_any_host_or_partial_path() {
    assert_eq!(
        resource_path(
            "p",
            "https://h:1/compute/beta/projects/q/global/instanceTemplates/t"
        ),
        Some("projects/q/global/instanceTemplates/t".to_string())
    );
    assert_eq!(
        resource_path("p", "global/instanceTemplates/t"),
        Some("projects/p/global/instanceTemplates/t".to_string())
    );
    assert_eq!(resource_path("p", "t"), None);
    assert_eq!(resource_path("p", "xprojects/q/global/x"), None);
    assert_eq!(
        decode_fingerprint("-_-_-_-_-_8="),
        decode_fingerprint("+/+/+/+/+/8=")
    );
}
