#![cfg(test)]
use super::*;

#[test]
fn decodes_labels_and_taints() {
    let l = decode_labels("a=1, b=").unwrap();
    assert_eq!(l["a"], "1");
    assert_eq!(l["b"], "");
    assert!(decode_labels("a=1,a=2").is_err());
    assert!(decode_labels("=x").is_err());
    let t = decode_taints("google.com/tpu=present:NoSchedule,k:NoExecute").unwrap();
    assert_eq!(t[0].key, "google.com/tpu");
    assert_eq!(t[0].value, "present");
    assert_eq!(t[1].effect, "NoExecute");
    assert!(decode_taints("k:Never").is_err());
    assert!(decode_taints("k").is_err());
}

#[test]
fn status_values() {
    assert_eq!(BootstrapStatus::Joined.to_string(), "joined");
    assert_eq!(
        BootstrapStatus::Failed("a\nb".into()).to_string(),
        "failed: a b"
    );
    assert!(node_may_set_label("node.kubernetes.io/x"));
    assert!(!node_may_set_label("kubernetes.io/x"));
}
