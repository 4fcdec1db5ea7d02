#![cfg(test)]
use super::*;

fn expect() -> Expect {
    Expect {
        hosts: 2,
        chips: 4,
        labels: BTreeMap::from([
            (LABEL_NODEPOOL.to_string(), "a-0".to_string()),
            (LABEL_ACCELERATOR.to_string(), "tpu-v6e-slice".to_string()),
            (LABEL_TOPOLOGY.to_string(), "2x4".to_string()),
        ]),
    }
}

fn node(name: &str) -> NodeView {
    NodeView {
        name: name.into(),
        provider_id: String::new(),
        ready: true,
        tpu_capacity: Some(4),
        tpu_allocatable: Some(4),
        labels: expect().labels,
        taints: Vec::new(),
        unschedulable: false,
    }
}

#[test]
fn every_expected_node_ready_labelled_with_its_chips_is_ready() {
    let (a, b) = (node("a"), node("b"));
    let r = judge(&[&a, &b], &expect());
    assert!(r.is_ready(), "{r:?}");
    assert_eq!(r.nodes_column(), "2/2 ready");
    assert_eq!(r.why, "");
}

#[test]
fn each_way_of_not_being_ready_is_said() {
    let a = node("a");
    let mut b = node("b");
    b.ready = false;
    let r = judge(&[&a, &b], &expect());
    assert_eq!((r.ready, r.is_ready()), (1, false));
    assert!(r.why.contains("node b: not Ready"), "{}", r.why);

    let mut b = node("b");
    b.labels.remove(LABEL_TOPOLOGY);
    b.labels
        .insert(LABEL_ACCELERATOR.into(), "tpu-v5p-slice".into());
    let r = judge(&[&a, &b], &expect());
    assert!(!r.is_ready());
    assert!(
        r.why.contains("no label cloud.google.com/gke-tpu-topology"),
        "{}",
        r.why
    );
    assert!(
        r.why
            .contains("gke-tpu-accelerator=tpu-v5p-slice, want tpu-v6e-slice"),
        "{}",
        r.why
    );

    let mut b = node("b");
    b.tpu_allocatable = Some(3);
    let r = judge(&[&a, &b], &expect());
    assert!(
        r.why.contains("google.com/tpu allocatable 3, want 4"),
        "{}",
        r.why
    );
    b.tpu_allocatable = None;
    let r = judge(&[&a, &b], &expect());
    assert!(
        r.why.contains("google.com/tpu allocatable none, want 4"),
        "{}",
        r.why
    );

    let r = judge(&[&a], &expect());
    assert_eq!(r.nodes_column(), "1/2 ready");
    assert!(
        r.why.starts_with("1 of 2 node(s) not registered"),
        "{}",
        r.why
    );

    let r = judge(&[], &expect());
    assert!(!r.is_ready());
    assert_eq!(r.nodes_column(), "0/2 ready");
}

#[test]
fn many_unready_nodes_are_summed_up() {
    let nodes: Vec<NodeView> = (0..8)
        .map(|i| {
            let mut n = node(&format!("n{i}"));
            n.ready = false;
            n
        })
        .collect();
    let refs: Vec<&NodeView> = nodes.iter().collect();
    let e = Expect {
        hosts: 8,
        ..expect()
    };
    let r = judge(&refs, &e);
    assert!(r.why.contains("and 3 more node(s) not ready"), "{}", r.why);
    assert!(!r.why.contains("node n7"), "{}", r.why);
}
