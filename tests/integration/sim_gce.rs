//! The simulator's self-managed GCE surface through its HTTP API and through
//! slicectl's compute client: instance templates, BULK MIGs with workload
//! policies, their VMs (lifecycle, metadata, fingerprints, guest
//! attributes), stockouts, and the rules Google enforces.

use crate::sim_support;

use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};
use sim_support::{COMPUTE, Client, start};
use slicectl::cloud::{ClientOptions, CloudClient, ComputeService, PollPolicy, RetryPolicy};
use slicectl::resource::compute::{
    InstanceGroupManager, InstanceProperties, InstanceTemplate, Metadata, MetadataItem,
    MigResourcePolicies, TargetSizePolicy,
};
use slicectl::resource::{ProjectRef, ZoneRef};
use slicectl_sim::{FaultConfig, SimHandle};

const ZONE: &str = "us-central2-b";
const REGION: &str = "us-central2";
/// TPU v4: offered in us-central2-b, 4 chips per VM; 2x2x4 = 16 chips = 4 VMs.
const MACHINE: &str = "ct4p-hightpu-4t";

fn zone_path() -> String {
    format!("{COMPUTE}/zones/{ZONE}")
}

fn wp(name: &str, topology: &str) -> Value {
    json!({"name": name, "region": REGION,
           "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": topology}})
}

/// A flex-start template: BULK MIGs take only reservation-bound or
/// flex-start ones ([`template_of`] for another model).
fn template(name: &str, machine: &str) -> Value {
    template_of(name, machine, "FLEX_START")
}

/// A template of provisioning model `model` (with the termination action
/// that fits it).
fn template_of(name: &str, machine: &str, model: &str) -> Value {
    let mut scheduling = json!({"onHostMaintenance": "TERMINATE", "provisioningModel": model});
    match model {
        "SPOT" => scheduling["instanceTerminationAction"] = json!("STOP"),
        "FLEX_START" | "RESERVATION_BOUND" => {
            scheduling["instanceTerminationAction"] = json!("DELETE");
            scheduling["maxRunDuration"] = json!({"seconds": "86400"});
        }
        _ => {}
    }
    json!({
        "name": name,
        "properties": {
            "machineType": machine,
            "labels": {"managed-by": "slicectl"},
            "metadata": {"items": [{"key": "startup-script", "value": "#!/bin/sh\necho hi"},
                                   {"key": "slicectl-slice", "value": "s1"}]},
            "scheduling": scheduling,
            "disks": [{"boot": true, "initializeParams": {"sourceImage": "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-v4", "diskSizeGb": "100"}}],
            "networkInterfaces": [{"subnetwork": "regions/us-central2/subnetworks/default"}],
        }
    })
}

fn mig(name: &str, template: &str, size: i64, policy: &str) -> Value {
    json!({
        "name": name,
        "instanceTemplate": format!("projects/proj1/global/instanceTemplates/{template}"),
        "targetSize": size,
        "targetSizePolicy": {"mode": "BULK"},
        "resourcePolicies": {"workloadPolicy": policy},
    })
}

/// Waits for an operation through its `selfLink` (`POST …/wait`).
async fn wait(c: &Client, op: &Value) -> Value {
    let link = op["selfLink"].as_str().unwrap();
    let path = link.strip_prefix(&c.base).unwrap();
    for _ in 0..50 {
        let (s, done) = c.post(&format!("{path}/wait"), json!(null)).await;
        assert_eq!(s, 200, "{done}");
        if done["status"] == "DONE" {
            return done;
        }
    }
    panic!("operation never finished: {op}");
}

async fn ok(c: &Client, method: &str, path: &str, body: Option<Value>) -> Value {
    let (s, v) = c.send(method, path, body).await;
    assert_eq!(s, 200, "{method} {path}: {v}");
    v
}

/// A policy, a template and a BULK MIG of 4 VMs, all DONE.
async fn make_slice(c: &Client, name: &str) -> Value {
    let op = ok(
        c,
        "POST",
        &format!("{COMPUTE}/regions/{REGION}/resourcePolicies"),
        Some(wp(&format!("{name}-wp"), "2x2x4")),
    )
    .await;
    wait(c, &op).await;
    let op = ok(
        c,
        "POST",
        &format!("{COMPUTE}/global/instanceTemplates"),
        Some(template(&format!("{name}-t"), MACHINE)),
    )
    .await;
    assert_eq!(op["operationType"], "compute.instanceTemplates.insert");
    assert!(
        op.get("zone").is_none() && op.get("region").is_none(),
        "{op}"
    );
    assert!(wait(c, &op).await.get("error").is_none());
    let op = ok(
        c,
        "POST",
        &format!("{}/instanceGroupManagers", zone_path()),
        Some(mig(name, &format!("{name}-t"), 4, &format!("{name}-wp"))),
    )
    .await;
    assert_eq!(op["operationType"], "compute.instanceGroupManagers.insert");
    let done = wait(c, &op).await;
    assert!(done.get("error").is_none(), "{done}");
    done
}

async fn instances(c: &Client) -> Vec<Value> {
    let v = ok(c, "GET", &format!("{}/instances", zone_path()), None).await;
    v.get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

async fn wait_running(c: &Client, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let vms = instances(c).await;
        if vms.len() == n && vms.iter().all(|v| v["status"] == "RUNNING") {
            return vms;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("VMs never all RUNNING: {:#?}", instances(c).await);
}

#[tokio::test]
async fn bulk_mig_creates_its_vms_which_boot_and_go_with_it() {
    let sim = start(Duration::from_millis(300), 3, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let api = format!("{}/compute/v1", sim.base_url());

    // A template is not there until its (global) insert operation is DONE.
    let op = ok(
        &c,
        "POST",
        &format!("{COMPUTE}/global/instanceTemplates"),
        Some(template("early", MACHINE)),
    )
    .await;
    let (s, _) = c
        .get(&format!("{COMPUTE}/global/instanceTemplates/early"))
        .await;
    assert_eq!(s, 404);
    wait(&c, &op).await;
    let t = ok(
        &c,
        "GET",
        &format!("{COMPUTE}/global/instanceTemplates/early"),
        None,
    )
    .await;
    assert_eq!(t["kind"], "compute#instanceTemplate");
    assert_eq!(t["properties"]["machineType"], MACHINE);
    assert_eq!(
        t["selfLink"],
        format!("{api}/projects/proj1/global/instanceTemplates/early")
    );

    make_slice(&c, "s1").await;
    let m = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/s1", zone_path()),
        None,
    )
    .await;
    assert_eq!(m["kind"], "compute#instanceGroupManager");
    assert_eq!(m["targetSize"], 4);
    assert_eq!(m["targetSizePolicy"]["mode"], "BULK");
    assert_eq!(
        m["instanceTemplate"],
        format!("{api}/projects/proj1/global/instanceTemplates/s1-t")
    );
    assert_eq!(
        m["resourcePolicies"]["workloadPolicy"],
        format!("{api}/projects/proj1/regions/{REGION}/resourcePolicies/s1-wp")
    );
    // Just created: the VMs exist but are not RUNNING yet.
    assert_eq!(m["status"]["isStable"], false, "{m}");
    assert_eq!(m["currentActions"]["creating"], 4, "{m}");

    let vms = wait_running(&c, 4).await;
    let name_re = Regex::new("^s1-[a-z0-9]{4}$").unwrap();
    for vm in &vms {
        let name = vm["name"].as_str().unwrap();
        assert!(name_re.is_match(name), "{name}");
        assert_eq!(
            vm["machineType"],
            format!("{api}/projects/proj1/zones/{ZONE}/machineTypes/{MACHINE}")
        );
        assert_eq!(vm["labels"]["managed-by"], "slicectl");
        let items = vm["metadata"]["items"].as_array().unwrap();
        let get = |k: &str| {
            items
                .iter()
                .find(|i| i["key"] == k)
                .map(|i| i["value"].clone())
        };
        assert_eq!(get("slicectl-slice"), Some(json!("s1")));
        let num = slicectl_sim::project_number("proj1");
        assert_eq!(
            get("created-by"),
            Some(json!(format!(
                "projects/{num}/zones/{ZONE}/instanceGroupManagers/s1"
            )))
        );
        assert!(vm["networkInterfaces"][0]["networkIP"].is_string());
    }
    let m = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/s1", zone_path()),
        None,
    )
    .await;
    assert_eq!(m["status"]["isStable"], true, "{m}");
    assert_eq!(m["currentActions"]["none"], 4);
    assert_eq!(m["currentActions"]["creating"], 0);
    assert_eq!(m["status"]["bulkInstanceOperation"]["inProgress"], false);
    assert_eq!(
        m["status"]["appliedAcceleratorTopologies"][0],
        json!({"acceleratorTopology": "2x2x4", "state": "ACTIVE"})
    );
    let managed = ok(
        &c,
        "POST",
        &format!(
            "{}/instanceGroupManagers/s1/listManagedInstances",
            zone_path()
        ),
        None,
    )
    .await;
    let managed = managed["managedInstances"].as_array().unwrap();
    assert_eq!(managed.len(), 4);
    assert!(
        managed
            .iter()
            .all(|mi| mi["currentAction"] == "NONE" && mi["instanceStatus"] == "RUNNING")
    );
    let (_, errors) = c
        .get(&format!(
            "{}/instanceGroupManagers/s1/listErrors",
            zone_path()
        ))
        .await;
    assert!(errors.get("items").is_none(), "{errors}");

    // Every VM has a metadata server.
    let listed = sim.instances();
    assert_eq!(listed.len(), 4);
    assert!(
        listed.iter().all(|i| i.metadata_host.is_some()),
        "{listed:?}"
    );
    let (s, admin) = c.get("/_sim/instances").await;
    assert_eq!(s, 200);
    assert_eq!(admin.as_array().unwrap().len(), 4);
    assert!(admin[0]["metadataHost"].is_string(), "{admin}");

    // The template and the policy are in use.
    let (s, e) = c
        .send(
            "DELETE",
            &format!("{COMPUTE}/global/instanceTemplates/s1-t"),
            None,
        )
        .await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(
        e["error"]["errors"][0]["reason"],
        "resourceInUseByAnotherResource"
    );
    assert_eq!(
        e["error"]["message"],
        format!(
            "The instance_template resource 'projects/proj1/global/instanceTemplates/s1-t' is \
             already being used by 'projects/proj1/zones/{ZONE}/instanceGroupManagers/s1'"
        )
    );

    // Deleting the MIG stops and removes its VMs; its operation ends when they are gone.
    let op = ok(
        &c,
        "DELETE",
        &format!("{}/instanceGroupManagers/s1", zone_path()),
        None,
    )
    .await;
    assert_eq!(op["operationType"], "compute.instanceGroupManagers.delete");
    assert_eq!(
        op["targetLink"],
        format!("{api}/projects/proj1/zones/{ZONE}/instanceGroupManagers/s1")
    );
    assert!(
        instances(&c)
            .await
            .iter()
            .all(|v| v["status"] == "STOPPING")
    );
    wait(&c, &op).await;
    assert!(instances(&c).await.is_empty());
    assert!(sim.instances().is_empty());
    let (s, _) = c
        .get(&format!("{}/instanceGroupManagers/s1", zone_path()))
        .await;
    assert_eq!(s, 404);
    let op = ok(
        &c,
        "DELETE",
        &format!("{COMPUTE}/global/instanceTemplates/s1-t"),
        None,
    )
    .await;
    assert_eq!(op["operationType"], "compute.instanceTemplates.delete");
    wait(&c, &op).await;
    let (s, _) = c
        .get(&format!("{COMPUTE}/global/instanceTemplates/s1-t"))
        .await;
    assert_eq!(s, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn bulk_stockout_creates_no_vm_until_capacity_returns() {
    let faults = FaultConfig {
        stockout_zones: vec![ZONE.into()],
        ..FaultConfig::default()
    };
    let sim = start(Duration::ZERO, 5, faults).await;
    let c = Client::new(&sim);
    make_slice(&c, "so").await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(instances(&c).await.is_empty(), "BULK is all or nothing");

    let errors = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/so/listErrors", zone_path()),
        None,
    )
    .await;
    let items = errors["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    let message = format!(
        "The zone 'projects/proj1/zones/{ZONE}' does not have enough resources available to \
         fulfill the request.  Try a different zone, or try again later."
    );
    for e in items {
        assert_eq!(e["error"]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED");
        assert_eq!(e["error"]["message"], message);
        assert_eq!(e["instanceActionDetails"]["action"], "CREATING");
        assert!(e["timestamp"].is_string());
    }
    let managed = ok(
        &c,
        "POST",
        &format!(
            "{}/instanceGroupManagers/so/listManagedInstances",
            zone_path()
        ),
        None,
    )
    .await;
    // "During this waiting period, the MIG creates managed instances"
    // (*About bulk mode*): listed CREATING; the reason is the bulk
    // operation's, not a per-VM attempt's.
    let managed = managed["managedInstances"].as_array().unwrap();
    assert_eq!(managed.len(), 4);
    for mi in managed {
        assert_eq!(mi["currentAction"], "CREATING");
        assert!(mi.get("instanceStatus").is_none());
        assert!(mi.get("id").is_none());
        assert!(mi.get("lastAttempt").is_none(), "{mi}");
    }
    let m = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/so", zone_path()),
        None,
    )
    .await;
    assert_eq!(m["status"]["isStable"], false);
    assert_eq!(m["currentActions"]["creating"], 4);
    assert_eq!(m["status"]["currentInstanceStatuses"]["nonExistent"], 4);
    let bulk = &m["status"]["bulkInstanceOperation"];
    assert_eq!(bulk["inProgress"], true, "{m}");
    assert_eq!(
        bulk["lastProgressCheck"]["error"]["errors"][0]["code"],
        "ZONE_RESOURCE_POOL_EXHAUSTED"
    );
    assert_eq!(
        m["status"]["appliedAcceleratorTopologies"][0]["state"],
        "ACTIVATING"
    );

    // The MIG keeps retrying: once the zone has capacity, all VMs come.
    sim.set_faults(FaultConfig::default());
    let vms = wait_running(&c, 4).await;
    assert_eq!(vms.len(), 4);
    let (_, errors) = c
        .get(&format!(
            "{}/instanceGroupManagers/so/listErrors",
            zone_path()
        ))
        .await;
    assert!(errors.get("items").is_none(), "{errors}");
    sim.shutdown().await;
}

/// Inserts a template of `model` and a MIG of `mode` on it (4 VMs, with the
/// workload policy `{name}-wp`); returns the MIG insert's status and body.
async fn mig_of(c: &Client, name: &str, model: &str, mode: Option<&str>) -> (u16, Value) {
    let op = ok(
        c,
        "POST",
        &format!("{COMPUTE}/regions/{REGION}/resourcePolicies"),
        Some(wp(&format!("{name}-wp"), "2x2x4")),
    )
    .await;
    wait(c, &op).await;
    let op = ok(
        c,
        "POST",
        &format!("{COMPUTE}/global/instanceTemplates"),
        Some(template_of(&format!("{name}-t"), MACHINE, model)),
    )
    .await;
    wait(c, &op).await;
    let mut body = mig(name, &format!("{name}-t"), 4, &format!("{name}-wp"));
    match mode {
        Some(m) => body["targetSizePolicy"] = json!({"mode": m}),
        None => {
            body.as_object_mut().unwrap().remove("targetSizePolicy");
        }
    }
    let (s, v) = c
        .send(
            "POST",
            &format!("{}/instanceGroupManagers", zone_path()),
            Some(body),
        )
        .await;
    (s, v)
}

#[tokio::test]
async fn bulk_mode_is_refused_unless_the_template_is_reservation_bound_or_flex_start() {
    let sim = start(Duration::ZERO, 21, FaultConfig::default()).await;
    let c = Client::new(&sim);
    // "Bulk mode in MIGs is only supported with instance templates that
    // specify either a reservation-bound or flex-start provisioning model".
    for (name, model) in [("bs", "SPOT"), ("bd", "STANDARD")] {
        let (s, v) = mig_of(&c, name, model, Some("BULK")).await;
        assert_eq!(s, 400, "{model}: {v}");
        assert_eq!(v["error"]["errors"][0]["reason"], "invalid", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("Invalid value for field 'resource.targetSizePolicy.mode': 'BULK'. Bulk mode in MIGs is only supported with instance templates that specify either a reservation-bound or flex-start provisioning model"),
            "{message}"
        );
        assert!(message.contains(&format!("'{model}'")), "{message}");
        let (s, _) = c
            .get(&format!("{}/instanceGroupManagers/{name}", zone_path()))
            .await;
        assert_eq!(s, 404, "a refused insert makes no MIG");
    }
    // A template with no scheduling at all is STANDARD (on-demand).
    let op = ok(
        &c,
        "POST",
        &format!("{COMPUTE}/global/instanceTemplates"),
        Some(json!({"name": "bare-t", "properties": {"machineType": MACHINE}})),
    )
    .await;
    wait(&c, &op).await;
    let (s, v) = c
        .send(
            "POST",
            &format!("{}/instanceGroupManagers", zone_path()),
            Some(mig("bare", "bare-t", 4, "bs-wp")),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'STANDARD'"),
        "{v}"
    );
    // The same templates run INDIVIDUAL (or the default, no policy);
    // reservation-bound and flex-start run BULK.
    for (name, model, mode) in [
        ("is", "SPOT", Some("INDIVIDUAL")),
        ("id", "STANDARD", None),
        ("br", "RESERVATION_BOUND", Some("BULK")),
        ("bf", "FLEX_START", Some("BULK")),
    ] {
        let (s, op) = mig_of(&c, name, model, mode).await;
        assert_eq!(s, 200, "{model} {mode:?}: {op}");
        assert!(wait(&c, &op).await.get("error").is_none());
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn an_individual_stockout_is_per_vm_and_in_list_errors_not_in_a_bulk_operation() {
    let faults = FaultConfig {
        stockout_zones: vec![ZONE.into()],
        ..FaultConfig::default()
    };
    let sim = start(Duration::ZERO, 23, faults).await;
    let c = Client::new(&sim);
    let (s, op) = mig_of(&c, "ind", "SPOT", Some("INDIVIDUAL")).await;
    assert_eq!(s, 200, "{op}");
    wait(&c, &op).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(instances(&c).await.is_empty(), "the zone has no capacity");
    let managed = ok(
        &c,
        "POST",
        &format!(
            "{}/instanceGroupManagers/ind/listManagedInstances",
            zone_path()
        ),
        None,
    )
    .await;
    for mi in managed["managedInstances"].as_array().unwrap() {
        assert_eq!(mi["currentAction"], "CREATING");
        assert_eq!(
            mi["lastAttempt"]["errors"]["errors"][0]["code"], "ZONE_RESOURCE_POOL_EXHAUSTED",
            "{mi}"
        );
    }
    let errors = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/ind/listErrors", zone_path()),
        None,
    )
    .await;
    assert_eq!(errors["items"].as_array().unwrap().len(), 4, "{errors}");
    let m = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/ind", zone_path()),
        None,
    )
    .await;
    assert_eq!(m["status"]["isStable"], false);
    assert!(
        m["status"].get("bulkInstanceOperation").is_none(),
        "no bulk operation in INDIVIDUAL mode: {m}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_zone_short_of_capacity_gives_individual_some_vms_and_bulk_none() {
    let faults = FaultConfig {
        zone_vm_limits: [(ZONE.to_string(), 2)].into(),
        ..FaultConfig::default()
    };
    let sim = start(Duration::ZERO, 27, faults).await;
    let c = Client::new(&sim);
    // INDIVIDUAL "creates as many instances as possible with the available
    // capacity": 2 of 4, the other 2 CREATING with their last attempt's
    // error and in listErrors.
    let (s, op) = mig_of(&c, "part", "SPOT", Some("INDIVIDUAL")).await;
    assert_eq!(s, 200, "{op}");
    wait(&c, &op).await;
    let vms = wait_running(&c, 2).await;
    assert!(
        vms.iter()
            .all(|v| v["name"].as_str().unwrap().starts_with("part-"))
    );
    let managed = ok(
        &c,
        "POST",
        &format!(
            "{}/instanceGroupManagers/part/listManagedInstances",
            zone_path()
        ),
        None,
    )
    .await;
    let managed = managed["managedInstances"].as_array().unwrap();
    let waiting: Vec<&Value> = managed
        .iter()
        .filter(|mi| mi.get("instanceStatus").is_none())
        .collect();
    assert_eq!(waiting.len(), 2, "{managed:?}");
    for mi in &waiting {
        assert_eq!(mi["currentAction"], "CREATING");
        assert_eq!(
            mi["lastAttempt"]["errors"]["errors"][0]["code"],
            "ZONE_RESOURCE_POOL_EXHAUSTED"
        );
    }
    let errors = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/part/listErrors", zone_path()),
        None,
    )
    .await;
    let items = errors["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "only the VMs not created: {errors}");
    for (e, mi) in items.iter().zip(&waiting) {
        assert_eq!(e["instanceActionDetails"]["instance"], mi["instance"]);
    }
    let m = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/part", zone_path()),
        None,
    )
    .await;
    assert_eq!(m["status"]["isStable"], false);
    assert_eq!(m["currentActions"]["creating"], 2, "{m}");
    assert_eq!(m["currentActions"]["none"], 2, "{m}");
    assert_eq!(m["status"]["currentInstanceStatuses"]["nonExistent"], 2);

    // BULK in the same zone: none until all 4 fit.
    let (s, op) = mig_of(&c, "whole", "FLEX_START", Some("BULK")).await;
    assert_eq!(s, 200, "{op}");
    wait(&c, &op).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    let whole = instances(&c)
        .await
        .into_iter()
        .filter(|v| v["name"].as_str().unwrap().starts_with("whole-"))
        .count();
    assert_eq!(whole, 0, "BULK is all or nothing");

    // Capacity returns: both MIGs complete, the INDIVIDUAL one keeping the
    // VMs it had.
    let before: Vec<Value> = vms.iter().map(|v| v["id"].clone()).collect();
    sim.set_faults(FaultConfig::default());
    let all = wait_running(&c, 8).await;
    for id in before {
        assert!(all.iter().any(|v| v["id"] == id), "{id} kept");
    }
    let (_, errors) = c
        .get(&format!(
            "{}/instanceGroupManagers/part/listErrors",
            zone_path()
        ))
        .await;
    assert!(errors.get("items").is_none(), "{errors}");
    sim.shutdown().await;
}

#[tokio::test]
async fn recreate_instances_makes_a_vm_again_under_its_name_with_fresh_metadata() {
    let sim = start(Duration::ZERO, 9, FaultConfig::default()).await;
    let c = Client::new(&sim);
    make_slice(&c, "rc").await;
    let vms = wait_running(&c, 4).await;
    let name = vms[0]["name"].as_str().unwrap().to_string();
    let id = vms[0]["id"].clone();
    let path = format!("{}/instances/{name}", zone_path());
    // Something written into its metadata since it booted.
    let fp = vms[0]["metadata"]["fingerprint"].clone();
    let mut items = vms[0]["metadata"]["items"].as_array().unwrap().clone();
    items.push(json!({"key": "written-later", "value": "x"}));
    let op = ok(
        &c,
        "POST",
        &format!("{path}/setMetadata"),
        Some(json!({"fingerprint": fp, "items": items})),
    )
    .await;
    wait(&c, &op).await;
    let recreate = format!("{}/instanceGroupManagers/rc/recreateInstances", zone_path());
    // The body is checked against the discovery document, and the VMs
    // must be the group's.
    let (s, e) = c.post(&recreate, json!({"instance": [name.clone()]})).await;
    assert_eq!(s, 400, "{e}");
    let (s, e) = c
        .post(
            &recreate,
            json!({"instances": ["zones/x/instances/not-mine"]}),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    let op = ok(
        &c,
        "POST",
        &recreate,
        Some(json!({"instances": [format!("zones/{ZONE}/instances/{name}")]})),
    )
    .await;
    assert_eq!(
        op["operationType"],
        "compute.instanceGroupManagers.recreateInstances"
    );
    assert!(wait(&c, &op).await.get("error").is_none());
    let again = wait_running(&c, 4).await;
    let vm = again.iter().find(|v| v["name"] == name.as_str()).unwrap();
    assert_ne!(vm["id"], id, "a new VM under the same name");
    let keys: Vec<&str> = vm["metadata"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["key"].as_str())
        .collect();
    assert!(keys.contains(&"created-by"), "{keys:?}");
    assert!(!keys.contains(&"written-later"), "{keys:?}");
    // The other VMs are untouched.
    for v in &vms[1..] {
        let now = again.iter().find(|a| a["name"] == v["name"]).unwrap();
        assert_eq!(now["id"], v["id"]);
    }
}

#[tokio::test]
async fn set_metadata_needs_the_current_fingerprint() {
    use base64::Engine;
    let sim = start(Duration::ZERO, 7, FaultConfig::default()).await;
    let c = Client::new(&sim);
    make_slice(&c, "md").await;
    let vm = wait_running(&c, 4).await.remove(0);
    let name = vm["name"].as_str().unwrap().to_string();
    let path = format!("{}/instances/{name}", zone_path());
    let fp = vm["metadata"]["fingerprint"].as_str().unwrap().to_string();
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(&fp)
        .expect("canonical URL-safe base64");
    assert_eq!(bytes.len(), 8);

    let items = json!([{"key": "k", "value": "v"}]);
    for body in [
        json!({"items": items}),
        json!({"fingerprint": "AAAAAAAAAAA=", "items": items}),
    ] {
        let (s, e) = c.post(&format!("{path}/setMetadata"), body).await;
        assert_eq!(s, 412, "{e}");
        assert_eq!(e["error"]["errors"][0]["reason"], "conditionNotMet");
        assert_eq!(
            e["error"]["message"],
            "Supplied fingerprint does not match current metadata fingerprint."
        );
    }
    // The standard alphabet decodes to the same bytes and is accepted.
    let standard = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let op = ok(
        &c,
        "POST",
        &format!("{path}/setMetadata"),
        Some(json!({"fingerprint": standard, "items": items})),
    )
    .await;
    assert_eq!(op["operationType"], "setMetadata");
    assert_eq!(
        op["targetLink"],
        format!(
            "{}/compute/v1/projects/proj1/zones/{ZONE}/instances/{name}",
            sim.base_url()
        )
    );
    assert!(wait(&c, &op).await.get("error").is_none());
    let after = ok(&c, "GET", &path, None).await;
    assert_eq!(after["metadata"]["items"], items);
    assert_ne!(after["metadata"]["fingerprint"], json!(fp));
    // The old fingerprint is stale now.
    let (s, _) = c
        .post(
            &format!("{path}/setMetadata"),
            json!({"fingerprint": fp, "items": []}),
        )
        .await;
    assert_eq!(s, 412);
    // Keys follow `[a-zA-Z0-9-_]{1,128}`.
    let current = after["metadata"]["fingerprint"].clone();
    let (s, e) = c
        .post(
            &format!("{path}/setMetadata"),
            json!({"fingerprint": current, "items": [{"key": "bad key", "value": "x"}]}),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    sim.shutdown().await;
}

#[tokio::test]
async fn patching_a_mig_needs_its_current_fingerprint_and_changes_only_its_description() {
    let sim = start(Duration::ZERO, 7, FaultConfig::default()).await;
    let c = Client::new(&sim);
    make_slice(&c, "pm").await;
    let path = format!("{}/instanceGroupManagers/pm", zone_path());
    let before = ok(&c, "GET", &path, None).await;
    let fp = before["fingerprint"].as_str().unwrap().to_string();
    let desc = "slicectl: managed-by=slicectl owner=o slice=pm replica=0 prevent-destroy=true";

    // No fingerprint, or a stale one: 412 conditionNotMet, nothing changed.
    for body in [
        json!({"description": desc}),
        json!({"description": desc, "fingerprint": "AAAAAAAAAAA="}),
    ] {
        let (s, e) = c.send("PATCH", &path, Some(body)).await;
        assert_eq!(s, 412, "{e}");
        assert_eq!(e["error"]["errors"][0]["reason"], "conditionNotMet");
        assert_eq!(
            e["error"]["message"],
            "Supplied fingerprint does not match current fingerprint of instance group manager."
        );
    }
    // A field the discovery document does not know, and one it knows but
    // the simulator does not patch: 400, nothing changed.
    for (body, field) in [
        (json!({"descripton": desc, "fingerprint": fp}), "descripton"),
        (json!({"targetSize": 8, "fingerprint": fp}), "targetSize"),
    ] {
        let (s, e) = c.send("PATCH", &path, Some(body)).await;
        assert_eq!(s, 400, "{e}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(field),
            "{e}"
        );
    }
    let unchanged = ok(&c, "GET", &path, None).await;
    assert_eq!(unchanged["fingerprint"], before["fingerprint"]);
    assert_eq!(unchanged.get("description"), before.get("description"));

    // The current fingerprint: the description changes, the fingerprint too.
    let op = ok(
        &c,
        "PATCH",
        &path,
        Some(json!({"description": desc, "fingerprint": fp})),
    )
    .await;
    assert_eq!(op["operationType"], "compute.instanceGroupManagers.patch");
    assert_eq!(op["kind"], "compute#operation");
    assert!(
        op["zone"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/zones/{ZONE}"))
    );
    assert_eq!(
        op["targetLink"],
        format!(
            "{}/compute/v1/projects/proj1/zones/{ZONE}/instanceGroupManagers/pm",
            sim.base_url()
        )
    );
    assert!(wait(&c, &op).await.get("error").is_none());
    let after = ok(&c, "GET", &path, None).await;
    assert_eq!(after["description"], desc);
    assert_ne!(after["fingerprint"], json!(fp));
    assert_eq!(after["targetSize"], before["targetSize"]);
    // The old fingerprint is stale now.
    let (s, _) = c
        .send(
            "PATCH",
            &path,
            Some(json!({"description": "x", "fingerprint": fp})),
        )
        .await;
    assert_eq!(s, 412);

    // slicectl's client: get, then patch with the fingerprint it read; a
    // stale one is told apart.
    let cloud = client(&sim);
    let zone = ZoneRef {
        project: "proj1".into(),
        zone: ZONE.into(),
    };
    let live = cloud.get_instance_group_manager(&zone, "pm").await.unwrap();
    assert_eq!(live.description.as_deref(), Some(desc));
    let patch = slicectl::resource::compute::InstanceGroupManagerPatch {
        description: Some(
            "slicectl: managed-by=slicectl owner=o slice=pm replica=0 prevent-destroy=false".into(),
        ),
        fingerprint: live.fingerprint.clone(),
    };
    let op = cloud
        .patch_instance_group_manager(&zone, "pm", &patch)
        .await
        .unwrap();
    cloud
        .wait_operation(&op, Duration::from_secs(10))
        .await
        .unwrap();
    let err = cloud
        .patch_instance_group_manager(&zone, "pm", &patch)
        .await
        .unwrap_err();
    assert!(err.is_stale_fingerprint(), "{err}");
    let live = cloud.get_instance_group_manager(&zone, "pm").await.unwrap();
    assert_eq!(live.description, patch.description);
    sim.shutdown().await;
}

#[tokio::test]
async fn google_rules_on_templates_and_migs() {
    let sim = start(Duration::ZERO, 9, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let templates = format!("{COMPUTE}/global/instanceTemplates");
    let migs = format!("{}/instanceGroupManagers", zone_path());

    // Unknown fields are rejected by the discovery document.
    let mut bad = template("x", MACHINE);
    bad["properties"]["machineTyp"] = json!("n2");
    let (s, e) = c.post(&templates, bad).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("machineTyp")
    );

    // A machine type URL fails the insert with INTERNAL_ERROR.
    let op = ok(
        &c,
        "POST",
        &templates,
        Some(template(
            "url",
            &format!("zones/{ZONE}/machineTypes/{MACHINE}"),
        )),
    )
    .await;
    let done = wait(&c, &op).await;
    assert_eq!(
        done["error"]["errors"][0]["code"], "INTERNAL_ERROR",
        "{done}"
    );
    let (s, _) = c.get(&format!("{templates}/url")).await;
    assert_eq!(s, 404);

    // Duplicate names.
    let op = ok(&c, "POST", &templates, Some(template("t", MACHINE))).await;
    wait(&c, &op).await;
    let (s, _) = c.post(&templates, template("t", MACHINE)).await;
    assert_eq!(s, 409);

    // The workload policy must exist.
    let (s, e) = c.post(&migs, mig("m", "t", 4, "nope")).await;
    assert_eq!(s, 404, "{e}");
    assert_eq!(
        e["error"]["message"],
        format!(
            "The resource 'projects/proj1/regions/{REGION}/resourcePolicies/nope' was not found"
        )
    );
    let op = ok(
        &c,
        "POST",
        &format!("{COMPUTE}/regions/{REGION}/resourcePolicies"),
        Some(wp("wp", "2x2x4")),
    )
    .await;
    wait(&c, &op).await;
    // Its topology must fit: 2x2x4 on 4-chip VMs is 4 VMs, not 3.
    let (s, e) = c.post(&migs, mig("m", "t", 3, "wp")).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs 4 VMs"),
        "{e}"
    );
    // The template must exist.
    let (s, _) = c.post(&migs, mig("m", "missing", 4, "wp")).await;
    assert_eq!(s, 404);
    // The template's TPU machine type must be offered in the MIG's zone.
    let (s, e) = c
        .post(
            &format!("{COMPUTE}/zones/us-central1-a/instanceGroupManagers"),
            json!({"name": "m", "targetSize": 4,
                   "instanceTemplate": "global/instanceTemplates/t"}),
        )
        .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist in zone 'us-central1-a'"),
        "{e}"
    );
    // A full URL with any host names the template.
    let op = ok(
        &c,
        "POST",
        &migs,
        Some(json!({"name": "m", "targetSize": 4,
                    "instanceTemplate": "http://example.invalid/compute/v1/projects/proj1/global/instanceTemplates/t",
                    "resourcePolicies": {"workloadPolicy": "wp"}})),
    )
    .await;
    wait(&c, &op).await;
    let (s, _) = c.post(&migs, mig("m", "t", 4, "wp")).await;
    assert_eq!(s, 409);
    // The policy cannot go while the MIG uses it.
    let op = ok(
        &c,
        "DELETE",
        &format!("{COMPUTE}/regions/{REGION}/resourcePolicies/wp"),
        None,
    )
    .await;
    let done = wait(&c, &op).await;
    assert_eq!(
        done["error"]["errors"][0]["code"], "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE",
        "{done}"
    );
    sim.shutdown().await;
}

// ---- slicectl's compute client against the simulator -----------------------

fn client(sim: &SimHandle) -> CloudClient {
    CloudClient::new(ClientOptions {
        api_endpoint: Some(sim.base_url()),
        retry: RetryPolicy {
            max_attempts: 5,
            min_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
        },
        poll: PollPolicy::fast_for_tests(),
        page_size: 2,
        ..ClientOptions::default()
    })
    .expect("client")
}

#[tokio::test]
async fn compute_client_drives_templates_migs_and_instances() {
    let sim = start(Duration::from_millis(100), 11, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let cloud = client(&sim);
    let project = ProjectRef {
        project: "proj1".into(),
    };
    let zone = ZoneRef {
        project: "proj1".into(),
        zone: ZONE.into(),
    };
    let op = ok(
        &c,
        "POST",
        &format!("{COMPUTE}/regions/{REGION}/resourcePolicies"),
        Some(wp("cwp", "2x2x4")),
    )
    .await;
    wait(&c, &op).await;

    let t = InstanceTemplate {
        name: "ct".into(),
        properties: InstanceProperties {
            machine_type: MACHINE.into(),
            metadata: Some(Metadata {
                items: vec![MetadataItem {
                    key: "startup-script".into(),
                    value: Some("echo".into()),
                }],
                ..Metadata::default()
            }),
            ..InstanceProperties::default()
        },
        ..InstanceTemplate::default()
    };
    let op = cloud.insert_instance_template(&project, &t).await.unwrap();
    assert_eq!(op.zone, None);
    let done = cloud
        .wait_operation(&op, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(done.status, "DONE");
    let got = cloud
        .get_instance_template(done.target_link.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(got.properties.machine_type, MACHINE);
    assert_eq!(
        cloud
            .get_instance_template("projects/proj1/global/instanceTemplates/ct")
            .await
            .unwrap()
            .id,
        got.id
    );
    assert_eq!(
        cloud.list_instance_templates(&project).await.unwrap().len(),
        1
    );
    assert!(
        cloud
            .list_global_operations(&project)
            .await
            .unwrap()
            .iter()
            .any(|o| o.name == op.name)
    );

    let m = InstanceGroupManager {
        name: "cm".into(),
        instance_template: got.self_link.clone(),
        target_size: 4,
        // Its template is on-demand (no scheduling): not a BULK one.
        target_size_policy: Some(TargetSizePolicy {
            mode: "INDIVIDUAL".into(),
        }),
        resource_policies: Some(MigResourcePolicies {
            workload_policy: Some("cwp".into()),
        }),
        ..InstanceGroupManager::default()
    };
    let op = cloud
        .insert_instance_group_manager(&zone, &m)
        .await
        .unwrap();
    assert!(op.zone.as_deref().unwrap().ends_with(ZONE));
    cloud
        .wait_operation(&op, Duration::from_secs(10))
        .await
        .unwrap();
    let migs = cloud.list_instance_group_managers(&zone).await.unwrap();
    assert_eq!(migs.len(), 1);
    assert_eq!(migs[0].target_size, 4);
    assert!(
        cloud
            .list_zone_operations(&zone)
            .await
            .unwrap()
            .iter()
            .any(|o| o.name == op.name)
    );
    wait_running(&c, 4).await;
    // Pages of 2 are followed.
    let vms = cloud.list_instances(&zone).await.unwrap();
    assert_eq!(vms.len(), 4);
    let managed = cloud.list_managed_instances(&zone, "cm").await.unwrap();
    assert_eq!(managed.len(), 4);
    assert!(managed.iter().all(|mi| mi.current_action == "NONE"));
    assert!(cloud.list_mig_errors(&zone, "cm").await.unwrap().is_empty());

    // setMetadata with the current fingerprint, then with a stale one.
    let vm = cloud.get_instance(&zone, &vms[0].name).await.unwrap();
    assert!(
        vm.metadata
            .get("created-by")
            .unwrap()
            .ends_with("/instanceGroupManagers/cm")
    );
    let mut meta = vm.metadata.clone();
    meta.items.push(MetadataItem {
        key: "slicectl-join".into(),
        value: Some("x".into()),
    });
    let op = cloud
        .set_instance_metadata(&zone, &vm.name, &meta)
        .await
        .unwrap();
    assert_eq!(op.operation_type, "setMetadata");
    let err = cloud
        .set_instance_metadata(&zone, &vm.name, &meta)
        .await
        .unwrap_err();
    assert!(err.is_stale_fingerprint(), "{err}");
    assert!(!err.is_retryable());
    let again = cloud.get_instance(&zone, &vm.name).await.unwrap();
    assert_eq!(again.metadata.get("slicectl-join"), Some("x"));

    // Guest attributes: what the VM wrote (its node agent waits for a
    // token and says so), then what the test writes as the VM.
    let mut waited = Vec::new();
    for _ in 0..50 {
        waited = cloud
            .get_guest_attributes(&zone, &vm.name, "slicectl/")
            .await
            .unwrap();
        if !waited.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        waited
            .iter()
            .any(|e| e.key == "bootstrap" && e.value == "waiting-for-token"),
        "{waited:?}"
    );
    sim.put_guest_attribute("proj1", ZONE, &vm.name, "slicectl/phase", "joined")
        .unwrap();
    sim.put_guest_attribute("proj1", ZONE, &vm.name, "other/x", "y")
        .unwrap();
    let attrs = cloud
        .get_guest_attributes(&zone, &vm.name, "slicectl/")
        .await
        .unwrap();
    assert_eq!(attrs.len(), 2, "{attrs:?}");
    assert!(
        attrs
            .iter()
            .any(|a| (a.namespace.as_str(), a.key.as_str(), a.value.as_str())
                == ("slicectl", "phase", "joined")),
        "{attrs:?}"
    );

    // The template is in use; the MIG goes, then the template.
    let err = cloud
        .delete_instance_template(&project, "ct")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("already being used"), "{err}");
    let op = cloud
        .delete_instance_group_manager(&zone, "cm")
        .await
        .unwrap();
    cloud
        .wait_operation(&op, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(cloud.list_instances(&zone).await.unwrap().is_empty());
    let op = cloud
        .delete_instance_template(&project, "ct")
        .await
        .unwrap();
    cloud
        .wait_operation(&op, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        cloud
            .get_instance_template("projects/proj1/global/instanceTemplates/ct")
            .await
            .unwrap_err()
            .is_not_found()
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn a_mig_cannot_use_a_policy_still_being_created() {
    let sim = start(Duration::from_millis(300), 13, FaultConfig::default()).await;
    let c = Client::new(&sim);
    let op = ok(
        &c,
        "POST",
        &format!("{COMPUTE}/global/instanceTemplates"),
        Some(template("t", MACHINE)),
    )
    .await;
    wait(&c, &op).await;
    let op = ok(
        &c,
        "POST",
        &format!("{COMPUTE}/regions/{REGION}/resourcePolicies"),
        Some(wp("young", "2x2x4")),
    )
    .await;
    let migs = format!("{}/instanceGroupManagers", zone_path());
    let (s, e) = c.post(&migs, mig("m", "t", 4, "young")).await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(e["error"]["errors"][0]["reason"], "resourceNotReady");
    wait(&c, &op).await;
    let op = ok(&c, "POST", &migs, Some(mig("m", "t", 4, "young"))).await;
    assert!(wait(&c, &op).await.get("error").is_none());
    sim.shutdown().await;
}

/// A MIG whose VMs the region's quota cannot hold exists without VMs and
/// reports Compute Engine's `QUOTA_EXCEEDED` ("Quota 'X' exceeded. Limit: N
/// in region R.") in `listErrors`, until the quota is raised; then its VMs
/// are created and `regions.get` counts them.
#[tokio::test]
async fn a_mig_past_the_quota_gets_no_vm_and_reports_quota_exceeded_until_raised() {
    // A Spot 2x2x4 v4 MIG: 4 VMs × 4 chips = 16 PREEMPTIBLE_TPU_PODSLICE_V4.
    let quota = |limit: u64| FaultConfig {
        quotas: [(format!("{REGION}/PREEMPTIBLE_TPU_PODSLICE_V4"), limit)].into(),
        ..FaultConfig::default()
    };
    let sim = start(Duration::ZERO, 29, quota(12)).await;
    let c = Client::new(&sim);
    let (s, op) = mig_of(&c, "q", "SPOT", Some("INDIVIDUAL")).await;
    assert_eq!(s, 200, "{op}");
    wait(&c, &op).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert!(instances(&c).await.is_empty(), "over the quota: no VM");
    let errors = ok(
        &c,
        "GET",
        &format!("{}/instanceGroupManagers/q/listErrors", zone_path()),
        None,
    )
    .await;
    let items = errors["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{errors}");
    assert_eq!(items[0]["error"]["code"], "QUOTA_EXCEEDED", "{errors}");
    assert_eq!(
        items[0]["error"]["message"],
        "Quota 'PREEMPTIBLE_TPU_PODSLICE_V4' exceeded. Limit: 12.0 in region us-central2.",
    );
    // slicectl reads it as a quota error, not the MIG's own: the replica is
    // known not to become ready for quota (`quota_exceeded`).
    let cloud = client(&sim);
    let z = ZoneRef {
        project: "proj1".into(),
        zone: ZONE.into(),
    };
    let mut m = cloud.get_instance_group_manager(&z, "q").await.unwrap();
    m.list_error = cloud
        .list_mig_errors(&z, "q")
        .await
        .unwrap()
        .into_iter()
        .next()
        .map(|e| e.error);
    let n = slicectl::kinds::gce::mig::not_ready(&m).expect("not ready");
    assert_eq!(n.code, "quota_exceeded", "{}", n.message);
    assert!(
        n.message
            .starts_with("QUOTA_EXCEEDED: Quota 'PREEMPTIBLE_TPU_PODSLICE_V4' exceeded."),
        "{}",
        n.message
    );
    // Raised: the MIG's retry creates its VMs, and they are the usage.
    sim.set_faults(quota(16));
    let vms = wait_running(&c, 4).await;
    assert_eq!(vms.len(), 4);
    let region = ok(&c, "GET", &format!("{COMPUTE}/regions/{REGION}"), None).await;
    assert_eq!(
        region["quotas"],
        json!([{"metric": "PREEMPTIBLE_TPU_PODSLICE_V4", "limit": 16.0, "usage": 16.0}])
    );
    sim.shutdown().await;
}
