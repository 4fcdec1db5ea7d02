//! The TPU device plugin, as a shared kind: one DaemonSet (with its
//! ServiceAccount and RBAC) in `kube-system` of each self-managed cluster
//! that runs `gce` slices, as tpu-operator deploys it
//! (`deviceplugin/device_plugin.yaml`, next-capabilities.md §6). Created
//! before any slice's Nodes are awaited, updated when its desired spec
//! changes (tpu-operator never updates it), and deleted only after the last
//! `gce` slice on the cluster is gone.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde::Serialize;
use serde_json::{Value, json};

use crate::kind::body_as;
use crate::kind::hash::{self, HASH_VERSION};
use crate::kind::ownership::{self, Ownership};
use crate::kind::{
    Body, Comparison, Desired, Kind, KindId, LiveState, RenderCtx, ResourceId, Scope, SliceRef,
    UpdateGroup,
};

/// The kind's name.
pub const KIND: KindId = KindId("device_plugin");
/// Namespace of the plugin.
pub const NAMESPACE: &str = "kube-system";
/// Name of the DaemonSet, its ServiceAccount and RBAC objects.
pub const NAME: &str = "tpu-device-plugin";
/// The update group: apply the objects.
pub const GROUP_APPLY: UpdateGroup = UpdateGroup("spec");

/// The device plugin kind.
#[derive(Debug, Clone, Copy)]
pub struct DevicePlugins;

/// The objects of the plugin, as slicectl applies them.
#[derive(Debug, Clone, Serialize)]
pub struct DevicePluginBody {
    /// The ServiceAccount the pods run as.
    pub service_account: ServiceAccount,
    /// What the plugin may do: read and patch Nodes, read Pods.
    pub cluster_role: ClusterRole,
    /// Binds the role to the ServiceAccount.
    pub cluster_role_binding: ClusterRoleBinding,
    /// The DaemonSet.
    pub daemon_set: DaemonSet,
}

fn labels(owner: &str, spec_hash: Option<&str>) -> Value {
    let own = Ownership {
        owner: owner.to_string(),
        slice: String::new(),
        replica: 0,
        target: None,
        spec_hash: spec_hash.map(str::to_string),
        hash_version: spec_hash.map(|_| HASH_VERSION.to_string()),
        prevent_destroy: false,
    };
    let mut l = serde_json::to_value(own.to_labels()).unwrap_or_else(|_| json!({}));
    l["k8s-app"] = Value::from(NAME);
    l
}

/// The DaemonSet's pod spec (what the spec hash covers).
fn daemon_set_spec(image: &str) -> Value {
    let host_path = |name: &str, path: &str| json!({"name": name, "hostPath": {"path": path, "type": "DirectoryOrCreate"}});
    let field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    json!({
        "selector": {"matchLabels": {"k8s-app": NAME}},
        "updateStrategy": {"type": "RollingUpdate"},
        "template": {
            "metadata": {"labels": {"k8s-app": NAME}},
            "spec": {
                "hostNetwork": true,
                "priorityClassName": "system-node-critical",
                "serviceAccountName": NAME,
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": super::render::LABEL_ACCELERATOR, "operator": "Exists"}
                    ]}]
                }}},
                "tolerations": [
                    {"operator": "Exists", "effect": "NoExecute"},
                    {"operator": "Exists", "effect": "NoSchedule"}
                ],
                "containers": [{
                    "name": NAME,
                    "image": image,
                    "command": ["/usr/bin/tpu-device-plugin"],
                    "args": ["--logtostderr", "--enable-runtime-metrics=false", "--enable-host-metrics=false"],
                    "env": [
                        field("NODE_NAME", "spec.nodeName"),
                        field("POD_NAMESPACE", "metadata.namespace"),
                        field("POD_NAME", "metadata.name"),
                        field("NODE_IP", "status.hostIP")
                    ],
                    "securityContext": {"privileged": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "resources": {"requests": {"cpu": "80m", "memory": "80Mi"}},
                    "volumeMounts": [
                        {"name": "device-plugin", "mountPath": "/device-plugin"},
                        {"name": "dev", "mountPath": "/dev"},
                        {"name": "pod-resources", "mountPath": "/var/lib/kubelet/pod-resources"},
                        {"name": "tpu-logs", "mountPath": "/tmp/tpu_logs"},
                        {"name": "tpu-plugin-run", "mountPath": "/var/run/tpu-plugin"}
                    ]
                }],
                "volumes": [
                    host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
                    host_path("dev", "/dev"),
                    host_path("pod-resources", "/var/lib/kubelet/pod-resources"),
                    host_path("tpu-logs", "/tmp/tpu_logs"),
                    host_path("tpu-plugin-run", "/var/run/tpu-plugin")
                ]
            }
        }
    })
}

/// The plugin's objects for `image`, owned by `owner`.
pub fn objects(image: &str, owner: &str) -> Option<DevicePluginBody> {
    let spec = daemon_set_spec(image);
    let spec_hash = hash::spec_hash(&hash::project(&json!({"spec": spec}), &["spec"]));
    let labels = labels(owner, Some(&spec_hash));
    let meta = |namespaced: bool| {
        let mut m = json!({"name": NAME, "labels": labels.clone()});
        if namespaced {
            m["namespace"] = Value::from(NAMESPACE);
        }
        m
    };
    Some(DevicePluginBody {
        service_account: serde_json::from_value(json!({"metadata": meta(true)})).ok()?,
        cluster_role: serde_json::from_value(json!({
            "metadata": meta(false),
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch", "update"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
            ]
        }))
        .ok()?,
        cluster_role_binding: serde_json::from_value(json!({
            "metadata": meta(false),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
        }))
        .ok()?,
        daemon_set: serde_json::from_value(json!({"metadata": meta(true), "spec": spec})).ok()?,
    })
}

fn live_ds(b: &Body) -> Option<&DaemonSet> {
    body_as::<DaemonSet>(b)
}

fn ds_labels(ds: &DaemonSet) -> std::collections::BTreeMap<String, String> {
    ds.metadata.labels.clone().unwrap_or_default()
}

impl Kind for DevicePlugins {
    fn scopes(&self, t: &crate::spec::Target) -> Vec<Scope> {
        super::kube_scope(t)
    }

    fn id(&self) -> KindId {
        KIND
    }

    fn noun(&self) -> &'static str {
        "device plugin"
    }

    fn shared(&self) -> bool {
        true
    }

    fn lists_unmanaged(&self) -> bool {
        // One someone else manages is listed by the planner, with what
        // slicectl does about it (uses it as it is).
        false
    }

    fn render(&self, ctx: RenderCtx<'_>) -> Vec<Desired> {
        let Some(r) = super::render::render(ctx.target, &ctx.stem_slice(), ctx.replica) else {
            return Vec::new();
        };
        let Some(cluster) = ctx.target.spec.gce.as_ref() else {
            return Vec::new();
        };
        let Some(body) = objects(&cluster.device_plugin.image, &ctx.target.spec.owner_id) else {
            return Vec::new();
        };
        vec![Desired {
            id: ResourceId {
                scope: Scope::Kube(r.kube),
                kind: KIND,
                name: format!("{NAMESPACE}/{NAME}"),
            },
            owner: SliceRef::shared(),
            owner_id: ctx.target.spec.owner_id.clone(),
            body: Arc::new(body),
            prevent_destroy: false,
            timeout: ctx.slice.operation_timeout,
        }]
    }

    fn name(&self, live: &Body) -> String {
        live_ds(live)
            .map(|d| {
                format!(
                    "{}/{}",
                    d.metadata.namespace.as_deref().unwrap_or_default(),
                    d.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .unwrap_or_default()
    }

    fn ownership(&self, live: &Body) -> Option<Ownership> {
        Ownership::from_labels(&ds_labels(live_ds(live)?))
    }

    fn state(&self, _live: &Body) -> LiveState {
        LiveState::Ok
    }

    fn compare(&self, desired: &Desired, live: &Body) -> Comparison {
        let (Some(want), Some(l)) = (body_as::<DevicePluginBody>(&desired.body), live_ds(live))
        else {
            return Comparison::Equal;
        };
        let want_hash = ds_labels(&want.daemon_set)
            .get(ownership::SPEC_HASH)
            .cloned();
        let have_hash = ds_labels(l).get(ownership::SPEC_HASH).cloned();
        if want_hash == have_hash {
            return Comparison::Equal;
        }
        let image = |d: &DaemonSet| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
        };
        Comparison::Update {
            changes: vec![crate::kind::hash::FieldChange {
                path: "spec.template.spec.containers[0].image".into(),
                before: image(l).map(Value::from),
                after: image(&want.daemon_set).map(Value::from),
                forces_replacement: false,
            }],
            groups: std::collections::BTreeSet::from([GROUP_APPLY]),
        }
    }

    fn display_live(&self, live: &Body, _desired: Option<&Desired>) -> Value {
        let Some(d) = live_ds(live) else {
            return Value::Null;
        };
        json!({
            "metadata": {"name": d.metadata.name, "namespace": d.metadata.namespace, "labels": d.metadata.labels},
            "spec": d.spec,
        })
    }

    fn parse(&self, json: Value) -> Result<Body, String> {
        serde_json::from_value::<DaemonSet>(json)
            .map(|d| Arc::new(d) as Body)
            .map_err(|e| e.to_string())
    }

    fn fingerprint_view(&self, live: &Body) -> Value {
        let Some(d) = live_ds(live) else {
            return Value::Null;
        };
        json!({"labels": d.metadata.labels})
    }
}
