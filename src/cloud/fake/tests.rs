#![cfg(test)]
use super::*;

fn zone() -> ZoneRef {
    ZoneRef {
        project: "p".into(),
        zone: "us-central1-c".into(),
    }
}

async fn slice(fake: &FakeCloud, stockout: bool) -> InstanceGroupManager {
    let project = ProjectRef {
        project: "p".into(),
    };
    let t = InstanceTemplate {
        name: "t".into(),
        properties: compute::InstanceProperties {
            machine_type: "tpu7x-standard-4t".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let op = fake.insert_instance_template(&project, &t).await.unwrap();
    ComputeService::wait_operation(fake, &op, Duration::ZERO)
        .await
        .unwrap();
    let got = fake
        .get_instance_template("projects/p/global/instanceTemplates/t")
        .await
        .unwrap();
    let mig = InstanceGroupManager {
        name: "m".into(),
        instance_template: got.self_link,
        target_size: 2,
        ..Default::default()
    };
    if stockout {
        fake.fail_next("insert_instance_group_manager", Fault::Stockout);
    }
    let op = fake
        .insert_instance_group_manager(&zone(), &mig)
        .await
        .unwrap();
    assert!(op.zone.is_some());
    ComputeService::wait_operation(fake, &op, Duration::ZERO)
        .await
        .unwrap();
    mig
}

#[tokio::test]
async fn mig_creates_vms_unless_stocked_out() {
    let fake = FakeCloud::new();
    slice(&fake, true).await;
    assert!(fake.instances(&zone()).is_empty());
    let errors = fake.list_mig_errors(&zone(), "m").await.unwrap();
    assert_eq!(errors.len(), 2);
    assert_eq!(errors[0].error.code, "ZONE_RESOURCE_POOL_EXHAUSTED");
    let managed = fake.list_managed_instances(&zone(), "m").await.unwrap();
    assert!(managed.iter().all(|m| m.current_action == "CREATING"));
    let migs = fake.list_instance_group_managers(&zone()).await.unwrap();
    assert_eq!(migs[0].current_actions.as_ref().unwrap().creating, 2);
    fake.end_stockout(&zone(), "m");
    let vms = fake.list_instances(&zone()).await.unwrap();
    assert_eq!(vms.len(), 2);
    assert_eq!(
        vms[0].metadata.get("created-by"),
        Some("projects/p/zones/us-central1-c/instanceGroupManagers/m")
    );
    let op = fake
        .delete_instance_group_manager(&zone(), "m")
        .await
        .unwrap();
    ComputeService::wait_operation(&*fake, &op, Duration::ZERO)
        .await
        .unwrap();
    assert!(fake.instances(&zone()).is_empty());
}

#[tokio::test]
async fn set_metadata_checks_the_fingerprint() {
    let fake = FakeCloud::new();
    slice(&fake, false).await;
    let vm = fake.list_instances(&zone()).await.unwrap().remove(0);
    let mut meta = vm.metadata.clone();
    meta.items.push(MetadataItem {
        key: "k".into(),
        value: Some("v".into()),
    });
    fake.set_instance_metadata(&zone(), &vm.name, &meta)
        .await
        .unwrap();
    let err = fake
        .set_instance_metadata(&zone(), &vm.name, &meta)
        .await
        .unwrap_err();
    assert!(err.is_stale_fingerprint());
    let now = fake.get_instance(&zone(), &vm.name).await.unwrap();
    assert_eq!(now.metadata.get("k"), Some("v"));
    fake.set_guest_attribute(&zone(), &vm.name, "slicectl/phase", "joined");
    let attrs = fake
        .get_guest_attributes(&zone(), &vm.name, "slicectl/")
        .await
        .unwrap();
    assert_eq!(attrs[0].value, "joined");
}
