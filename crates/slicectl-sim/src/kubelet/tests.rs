#![cfg(test)]
use super::*;

fn sign(content: &str, id: &str, secret: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"HS256","kid":"{id}"}}"#));
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{header}.{}", URL_SAFE_NO_PAD.encode(content)).as_bytes());
    format!(
        "{header}..{}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    )
}

#[test]
fn detached_jws_verifies_only_with_the_right_token_and_content() {
    let jws = sign("kubeconfig", "abcdef", "0123456789abcdef");
    assert!(verify_detached_jws(
        &jws,
        "kubeconfig",
        "abcdef",
        "0123456789abcdef"
    ));
    assert!(!verify_detached_jws(
        &jws,
        "kubeconfig!",
        "abcdef",
        "0123456789abcdef"
    ));
    assert!(!verify_detached_jws(
        &jws,
        "kubeconfig",
        "abcdef",
        "0123456789abcdee"
    ));
    assert!(!verify_detached_jws(
        &jws,
        "kubeconfig",
        "bcdefg",
        "0123456789abcdef"
    ));
    // Attached payloads and junk are refused.
    let attached = jws.replacen("..", ".eA.", 1);
    assert!(!verify_detached_jws(
        &attached,
        "kubeconfig",
        "abcdef",
        "0123456789abcdef"
    ));
    assert!(!verify_detached_jws(
        "x",
        "kubeconfig",
        "abcdef",
        "0123456789abcdef"
    ));
}

fn attrs(items: &[(&str, &str)]) -> BTreeMap<String, String> {
    items
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn join_values_wait_for_all_three_and_check_them() {
    let token = ("kubeadm-join-token", "abcdef.0123456789abcdef");
    let endpoint = ("kubeadm-api-endpoint", "10.0.0.1:6443");
    let hash = (
        "kubeadm-ca-hash",
        "sha256:0000000000000000000000000000000000000000000000000000000000000000",
    );
    assert!(matches!(join_values(&attrs(&[token, endpoint])), Ok(None)));
    assert!(matches!(
        join_values(&attrs(&[token, endpoint, hash])),
        Ok(Some(_))
    ));
    let bad_token = ("kubeadm-join-token", "nope");
    let e = join_values(&attrs(&[bad_token, endpoint, hash]))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("metadata kubeadm-join-token is malformed")
    );
    let bad_hash = ("kubeadm-ca-hash", "sha256:XYZ");
    assert!(join_values(&attrs(&[token, endpoint, bad_hash])).is_err());
    let bad_endpoint = ("kubeadm-api-endpoint", "10.0.0.1");
    assert!(join_values(&attrs(&[token, bad_endpoint, hash])).is_err());
}

#[test]
fn labels_merge_kubelet_and_kube_labels_and_refuse_restricted_ones() {
    let i = Instance {
        name: "vm-0".to_owned(),
        project: "p".to_owned(),
        zone: "us-central1-a".to_owned(),
        machine_type: "ct5p-hightpu-4t".to_owned(),
    };
    let l = node_labels(&i, "cloud.google.com/gke-tpu-topology=2x2x1").unwrap();
    assert_eq!(l["topology.kubernetes.io/region"], "us-central1");
    assert_eq!(l["node.kubernetes.io/instance-type"], "ct5p-hightpu-4t");
    assert_eq!(l["cloud.google.com/gke-tpu-topology"], "2x2x1");
    let e = node_labels(&i, "node-role.kubernetes.io/worker=").unwrap_err();
    assert!(
        e.to_string().contains("node-role.kubernetes.io/worker"),
        "{e}"
    );
}
