//! Label rules the APIs enforce beyond the discovery schema: Kubernetes node
//! labels and taints (GKE `config.labels`, `config.taints`) and GCE labels
//! (GKE `config.resourceLabels`). The rules are Google's and Kubernetes'
//! documented ones; the message wording follows Kubernetes' validation
//! messages (GKE's exact wording for these is not recorded).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

static K8S_NAME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").ok());
static DNS_SUBDOMAIN: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").ok()
});
static GCE_KEY: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new("^[\\p{Ll}\\p{Lo}][\\p{Ll}\\p{Lo}\\p{N}_-]{0,62}$").ok());
static GCE_VALUE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new("^[\\p{Ll}\\p{Lo}\\p{N}_-]{0,63}$").ok());

/// Most labels on one GCE resource.
const MAX_GCE_LABELS: usize = 64;
/// Most characters of Kubernetes labels in one GKE request.
const MAX_K8S_LABEL_CHARS: usize = 1024;

fn is(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

fn k8s_name(s: &str) -> bool {
    s.len() <= 63 && is(&K8S_NAME, s)
}

/// A Kubernetes qualified name: `[prefix/]name`.
fn k8s_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !is(&DNS_SUBDOMAIN, p))
    {
        return Err(format!(
            "key \"{key}\": prefix part must be a lowercase RFC 1123 subdomain of at most 253 characters"
        ));
    }
    if !k8s_name(name) {
        return Err(format!(
            "key \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.', must start and end with an alphanumeric character, and must be no more than 63 characters"
        ));
    }
    Ok(())
}

fn k8s_value(key: &str, value: &str) -> Result<(), String> {
    if value.is_empty() || k8s_name(value) {
        Ok(())
    } else {
        Err(format!(
            "value \"{value}\" of key \"{key}\": must be 63 characters or less, empty or begin and end with an alphanumeric character with '-', '_', '.' and alphanumerics between"
        ))
    }
}

/// Kubernetes node labels; `field` is the proto path for the message.
pub(crate) fn check_k8s_labels(field: &str, labels: Option<&Value>) -> Result<(), String> {
    let Some(map) = labels.and_then(Value::as_object) else {
        return Ok(());
    };
    let mut total = 0;
    for (k, v) in map {
        // Labels GKE manages: "Node labels with key "cloud.google.com/compute-class"
        // are managed by GKE or Kubernetes and must not be manually specified."
        // (terraform-provider-google#19677), and the node-role prefix:
        // "Applying kubernetes label is not allowed: node-role.kubernetes.io/x."
        // (terraform-provider-google#6003).
        if k == "cloud.google.com/compute-class" {
            return Err(format!(
                "Node labels with key \"{k}\" are managed by GKE or Kubernetes and must not be manually specified."
            ));
        }
        if k.starts_with("node-role.kubernetes.io/") {
            return Err(format!("Applying kubernetes label is not allowed: {k}."));
        }
        let v = v.as_str().unwrap_or_default();
        total += k.len() + v.len();
        k8s_key(k)
            .and_then(|()| k8s_value(k, v))
            .map_err(|e| format!("Invalid value for field \"{field}\": label {e}."))?;
    }
    if total > MAX_K8S_LABEL_CHARS {
        return Err(format!(
            "Invalid value for field \"{field}\": labels total {total} characters, more than {MAX_K8S_LABEL_CHARS}."
        ));
    }
    Ok(())
}

/// Kubernetes taints (keys and values follow the label rules).
pub(crate) fn check_taints(field: &str, taints: Option<&Value>) -> Result<(), String> {
    let Some(list) = taints.and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, t) in list.iter().enumerate() {
        let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
        let value = t.get("value").and_then(Value::as_str).unwrap_or_default();
        k8s_key(key)
            .and_then(|()| k8s_value(key, value))
            .map_err(|e| format!("Invalid value for field \"{field}[{i}]\": taint {e}."))?;
        if t.get("effect").is_none() {
            return Err(format!(
                "Invalid value for field \"{field}[{i}].effect\": must be set."
            ));
        }
    }
    Ok(())
}

/// GCE labels: at most 64; keys start with a lowercase letter; keys and
/// values use lowercase letters, digits, `_` and `-`, at most 63 characters.
pub(crate) fn check_gce_labels(field: &str, labels: Option<&Value>) -> Result<(), String> {
    let Some(map) = labels.and_then(Value::as_object) else {
        return Ok(());
    };
    if map.len() > MAX_GCE_LABELS {
        return Err(format!(
            "Invalid value for field \"{field}\": at most {MAX_GCE_LABELS} labels are allowed, got {}.",
            map.len()
        ));
    }
    for (k, v) in map {
        if !is(&GCE_KEY, k) {
            return Err(format!(
                "Invalid value for field \"{field}\": label key \"{k}\" must start with a lowercase letter and contain only lowercase letters, digits, '_' and '-' (1-63 characters)."
            ));
        }
        let v = v.as_str().unwrap_or_default();
        if !is(&GCE_VALUE, v) {
            return Err(format!(
                "Invalid value for field \"{field}\": value \"{v}\" of label \"{k}\" must contain only lowercase letters, digits, '_' and '-' (0-63 characters)."
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_gke_manages_are_refused() {
        let e = check_k8s_labels(
            "node_pool.config.labels",
            Some(&serde_json::json!({"cloud.google.com/compute-class": "x"})),
        )
        .unwrap_err();
        assert!(e.contains("are managed by GKE or Kubernetes"), "{e}");
        let e = check_k8s_labels(
            "node_pool.config.labels",
            Some(&serde_json::json!({"node-role.kubernetes.io/tpu": ""})),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "Applying kubernetes label is not allowed: node-role.kubernetes.io/tpu."
        );
    }

    #[test]
    fn kubernetes_labels() {
        let ok = json!({"cloud.google.com/gke-tpu-topology": "4x4x4", "team": "", "a_b.c": "X-1"});
        assert!(check_k8s_labels("f", Some(&ok)).is_ok());
        for bad in [
            json!({"-a": "b"}),
            json!({"Bad_Prefix/x": "y"}),
            json!({"k": "bad value"}),
        ] {
            assert!(check_k8s_labels("f", Some(&bad)).is_err(), "{bad}");
        }
        let long = json!({"k": "v".repeat(63), "k2": "v".repeat(63)});
        assert!(check_k8s_labels("f", Some(&long)).is_ok());
        let mut huge = serde_json::Map::new();
        for i in 0..20 {
            huge.insert(format!("key{i}"), json!("v".repeat(60)));
        }
        assert!(check_k8s_labels("f", Some(&Value::Object(huge))).is_err());
    }

    #[test]
    fn gce_labels() {
        assert!(
            check_gce_labels(
                "f",
                Some(&json!({"owner": "o1", "managed-by": "slicectl", "e": ""}))
            )
            .is_ok()
        );
        for bad in [
            json!({"Owner": "x"}),
            json!({"1a": "x"}),
            json!({"a": "UP"}),
            json!({"a.b": "x"}),
        ] {
            assert!(check_gce_labels("f", Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn taints() {
        let ok = json!([{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}]);
        assert!(check_taints("f", Some(&ok)).is_ok());
        assert!(check_taints("f", Some(&json!([{"key": "k"}]))).is_err());
        assert!(
            check_taints(
                "f",
                Some(&json!([{"key": "bad key", "effect": "NO_EXECUTE"}]))
            )
            .is_err()
        );
    }
}
