//! `deploy/`, the controller's kustomization, on the real test control plane
//! (`scripts/k8s-testenv.sh up`; these tests fail without it, except the two
//! that need no API server):
//!
//! - `kubectl kustomize deploy/` renders the ConfigMap `slicectl-specs` (no
//!   hash suffix) from exactly the files in `deploy/specs/`, which validate;
//! - `kubectl apply --server-side -k deploy/` creates every object, the
//!   Deployment runs `slicectl controller` as the contract says, with a
//!   termination grace period longer than its `--grace`, and the
//!   PodDisruptionBudget selects its pods;
//! - the ServiceAccount's effective permissions (`kubectl auth can-i --list`)
//!   are exactly the controller's table, beyond what every authenticated
//!   ServiceAccount gets, and spot checks of what it must not do say `no`;
//! - the calls the controller makes succeed as that ServiceAccount (through
//!   impersonation): the ConfigMap's list and watch by name, the Lease's
//!   create/get/patch, the get of the controller's own Deployment
//!   (`--owner-deployment`), and the real `StatusWriter` (server-side apply of
//!   the objects, owned by that Deployment, and their status, Events,
//!   deletion of a departed slice's object).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::Duration;

use common::k8s::*;
use common::status::one_slice;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use slicectl::controller::owner;
use slicectl::engine::Approval;
use slicectl::kube::config_from_kubeconfig;
use slicectl::spec::SourceFile;
use slicectl::status_object::{SliceStatus, StatusSet, StatusWriter};

const NS: &str = "slicectl";
const SA: &str = "system:serviceaccount:slicectl:slicectl";

/// What the controller may do in its namespace, as `kubectl auth can-i
/// --list` prints it: (resource, resource names, verbs). docs/controller.md,
/// "The manifests in deploy/", explains each row.
const EXPECTED: &[(&str, &str, &str)] = &[
    ("configmaps", "[slicectl-specs]", "[get list watch]"),
    ("leases.coordination.k8s.io", "[]", "[create list]"),
    ("leases.coordination.k8s.io", "[slicectl]", "[get patch]"),
    (
        "slicestatuses.slicectl.dev",
        "[]",
        "[get list watch create patch delete]",
    ),
    ("slicestatuses.slicectl.dev/status", "[]", "[patch]"),
    ("deployments.apps", "[slicectl]", "[get]"),
    ("events.events.k8s.io", "[]", "[create patch]"),
];

/// What every authenticated ServiceAccount gets on this server (an unbound
/// one lists exactly this, which a test checks): `system:basic-user` (the
/// self-subject reviews), `system:discovery` and `system:public-info-viewer`
/// (the discovery and health URLs) and `system:service-account-issuer-discovery`
/// (the OIDC URLs, for `system:serviceaccounts`). Non-resource URLs are
/// compared as a set (some are listed twice, once per role).
const EVERY_SERVICE_ACCOUNT: &[(&str, &str, &str)] = &[
    ("selfsubjectreviews.authentication.k8s.io", "[]", "[create]"),
    (
        "selfsubjectaccessreviews.authorization.k8s.io",
        "[]",
        "[create]",
    ),
    (
        "selfsubjectrulesreviews.authorization.k8s.io",
        "[]",
        "[create]",
    ),
    ("url:/.well-known/openid-configuration", "[]", "[get]"),
    ("url:/.well-known/openid-configuration/", "[]", "[get]"),
    ("url:/api", "[]", "[get]"),
    ("url:/api/*", "[]", "[get]"),
    ("url:/apis", "[]", "[get]"),
    ("url:/apis/*", "[]", "[get]"),
    ("url:/healthz", "[]", "[get]"),
    ("url:/livez", "[]", "[get]"),
    ("url:/openapi", "[]", "[get]"),
    ("url:/openapi/*", "[]", "[get]"),
    ("url:/openid/v1/jwks", "[]", "[get]"),
    ("url:/openid/v1/jwks/", "[]", "[get]"),
    ("url:/readyz", "[]", "[get]"),
    ("url:/version", "[]", "[get]"),
    ("url:/version/", "[]", "[get]"),
];

fn get_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(&kubectl(&all))).expect("kubectl -o json")
}

/// `kubectl apply --server-side -k deploy/`, once per test process (the
/// tests share it), then the CRD is established.
fn apply_deploy() {
    static APPLY: Once = Once::new();
    APPLY.call_once(|| {
        ok(&kubectl(&[
            "apply",
            "--server-side",
            "--field-manager=slicectl-tests",
            "-k",
            "deploy/",
        ]));
        ok(&kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/slicestatuses.slicectl.dev",
        ]));
    });
}

/// The files in `deploy/specs/`, by name.
fn spec_files() -> BTreeMap<String, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/specs");
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(&dir).expect("deploy/specs") {
        let p = e.expect("entry").path();
        assert!(
            p.is_file(),
            "{}: ConfigMap keys are flat; keep deploy/specs/ flat",
            p.display()
        );
        files.insert(
            p.file_name().unwrap().to_string_lossy().into_owned(),
            std::fs::read_to_string(&p).expect("read spec"),
        );
    }
    assert!(files.len() >= 2, "{files:?}");
    files
}

#[test]
fn example_specs_validate() {
    let o = Command::new(env!("CARGO_BIN_EXE_slicectl"))
        .args(["validate", "deploy/specs"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run slicectl");
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // A Target and a Slice on it.
    let sources: Vec<SourceFile> = spec_files()
        .into_iter()
        .map(|(name, text)| SourceFile {
            path: PathBuf::from("deploy/specs").join(name),
            text,
        })
        .collect();
    let fleet = slicectl::spec::load(&sources).expect("the example fleet loads");
    assert_eq!(fleet.targets.len(), 1);
    assert_eq!(fleet.slices.len(), 1);
}

#[test]
fn kustomize_renders_the_specs_configmap_from_the_specs_dir() {
    let out = ok(&kubectl(&["kustomize", "deploy/"]));
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&out).expect("kustomize output is YAML");
    let kinds: BTreeSet<String> = docs
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["kind"].as_str().unwrap(),
                d["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let want: BTreeSet<String> = [
        "Namespace/slicectl",
        "CustomResourceDefinition/slicestatuses.slicectl.dev",
        "ServiceAccount/slicectl",
        "Role/slicectl",
        "RoleBinding/slicectl",
        "ConfigMap/slicectl-specs",
        "Deployment/slicectl",
        "PodDisruptionBudget/slicectl",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(
        kinds, want,
        "no CronJob, nothing cluster-wide but the CRD and the namespace"
    );
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("the ConfigMap");
    assert_eq!(cm["metadata"]["namespace"], NS);
    // Every file in deploy/specs/ is a key, with its text as is (a file added
    // to the directory but not to configMapGenerator fails here).
    let data: BTreeMap<String, String> = serde_json::from_value(cm["data"].clone()).expect("data");
    assert_eq!(data, spec_files());
}

#[test]
fn deploy_applies_server_side_and_the_objects_exist() {
    apply_deploy();
    let ns = get_json(&["namespace", NS]);
    assert_eq!(ns["status"]["phase"], "Active");

    let sa = get_json(&["serviceaccount", "slicectl", "-n", NS]);
    let gsa = sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
        .as_str()
        .expect("Workload Identity annotation");
    assert!(gsa.ends_with(".iam.gserviceaccount.com"), "{gsa}");
    assert_ne!(
        sa["automountServiceAccountToken"], false,
        "the controller talks to the API server"
    );

    let cm = get_json(&["configmap", "slicectl-specs", "-n", NS]);
    let data: BTreeMap<String, String> = serde_json::from_value(cm["data"].clone()).expect("data");
    assert_eq!(data, spec_files());

    let d = get_json(&["deployment", "slicectl", "-n", NS]);
    assert_eq!(d["spec"]["replicas"], 2);
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "slicectl");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let c = &pod["containers"][0];
    assert!(
        c["image"].as_str().unwrap().ends_with("/slicectl:latest"),
        "{}",
        c["image"]
    );
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "controller",
            "--configmap",
            "slicectl-specs",
            "--namespace",
            "$(POD_NAMESPACE)",
            "--lease-name",
            "slicectl",
            "--listen",
            "0.0.0.0:8080",
            "--resync",
            "10m",
            "--grace",
            "60s",
            "--owner-deployment",
            "slicectl"
        ]
    );
    // The kubelet's SIGKILL comes after the controller's own grace period
    // (and the Lease's release), not in the middle of it.
    let grace: u64 = args
        .iter()
        .position(|a| *a == "--grace")
        .and_then(|i| args.get(i + 1))
        .and_then(|g| g.strip_suffix('s'))
        .and_then(|g| g.parse().ok())
        .expect("--grace in seconds");
    let termination = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    assert!(
        termination >= grace + 5,
        "terminationGracePeriodSeconds {termination} must exceed --grace {grace}s by the Lease release"
    );
    let env: BTreeMap<&str, &str> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap(),
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        env,
        BTreeMap::from([
            ("POD_NAME", "metadata.name"),
            ("POD_NAMESPACE", "metadata.namespace")
        ])
    );
    assert_eq!(c["ports"][0]["name"], "metrics");
    assert_eq!(c["ports"][0]["containerPort"], 8080);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["livenessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["readinessProbe"]["httpGet"]["port"], "metrics");
    assert!(c["resources"]["requests"]["cpu"].is_string());
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");

    // One replica of the two at most is disrupted voluntarily at a time.
    let pdb = get_json(&["poddisruptionbudget", "slicectl", "-n", NS]);
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        d["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        d["spec"]["template"]["metadata"]["labels"],
        d["spec"]["selector"]["matchLabels"]
    );

    let rb = get_json(&["rolebinding", "slicectl", "-n", NS]);
    assert_eq!(rb["roleRef"]["kind"], "Role");
    assert_eq!(rb["subjects"][0]["namespace"], NS);

    // The CronJob is gone, and nothing cluster-wide is bound to slicectl.
    let cj = get_json(&["cronjobs", "-n", NS]);
    assert_eq!(cj["items"], serde_json::json!([]));
    let crbs = get_json(&["clusterrolebindings"]);
    for b in crbs["items"].as_array().unwrap() {
        for s in b["subjects"].as_array().into_iter().flatten() {
            assert!(
                s["namespace"] != NS,
                "cluster-wide binding for {s}: {}",
                b["metadata"]["name"]
            );
        }
    }
}

/// `kubectl auth can-i --list` as `user` in `ns`: (resource, or `url:` and
/// the non-resource URL; resource names; verbs), by the columns of its header.
fn can_i_list(user: &str, ns: &str) -> BTreeSet<(String, String, String)> {
    let out = ok(&kubectl(&[
        "auth", "can-i", "--list", "--as", user, "-n", ns,
    ]));
    let mut lines = out.lines();
    let header = lines.next().expect("header");
    let col = |name: &str| {
        header
            .find(name)
            .unwrap_or_else(|| panic!("{name:?} in {header:?}"))
    };
    let (urls, names, verbs) = (
        col("Non-Resource URLs"),
        col("Resource Names"),
        col("Verbs"),
    );
    let cell = |l: &str, from: usize, to: usize| {
        l.get(from..to.min(l.len()))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let resource = cell(l, 0, urls);
            let url = cell(l, urls, names);
            let key = if resource.is_empty() {
                format!("url:{}", url.trim_start_matches('[').trim_end_matches(']'))
            } else {
                assert_eq!(url, "[]", "{l}");
                resource
            };
            (key, cell(l, names, verbs), cell(l, verbs, usize::MAX))
        })
        .collect()
}

fn table(rows: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    rows.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

fn can_i(args: &[&str]) -> bool {
    let mut all = vec!["auth", "can-i", "--as", SA];
    all.extend_from_slice(args);
    let o = kubectl(&all);
    match String::from_utf8_lossy(&o.stdout).trim() {
        "yes" => true,
        "no" => false,
        other => panic!(
            "kubectl auth can-i {args:?}: {other:?} {}",
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

#[test]
fn the_service_account_may_do_exactly_what_the_controller_needs() {
    apply_deploy();
    // The baseline: an unbound ServiceAccount (in a namespace that need not
    // exist) gets exactly the entries every ServiceAccount gets.
    let baseline = can_i_list("system:serviceaccount:slicectl-tests:unbound", NS);
    assert_eq!(baseline, table(EVERY_SERVICE_ACCOUNT));
    let got: BTreeSet<_> = can_i_list(SA, NS).difference(&baseline).cloned().collect();
    assert_eq!(got, table(EXPECTED));
    // Nothing beyond the baseline in any other namespace.
    assert_eq!(can_i_list(SA, "default"), baseline);
    assert_eq!(can_i_list(SA, "kube-system"), baseline);

    // The rows, spelled as the controller uses them.
    for yes in [
        &["get", "configmaps/slicectl-specs", "-n", NS][..],
        &["watch", "configmaps/slicectl-specs", "-n", NS],
        &["create", "leases.coordination.k8s.io", "-n", NS],
        &["list", "leases.coordination.k8s.io", "-n", NS],
        &["patch", "leases.coordination.k8s.io/slicectl", "-n", NS],
        &["create", "slicestatuses.slicectl.dev", "-n", NS],
        &["delete", "slicestatuses.slicectl.dev/x", "-n", NS],
        &[
            "patch",
            "slicestatuses.slicectl.dev",
            "--subresource=status",
            "-n",
            NS,
        ],
        &["create", "events.events.k8s.io", "-n", NS],
        &["get", "deployments.apps/slicectl", "-n", NS],
    ] {
        assert!(can_i(yes), "must be yes: {yes:?}");
    }
    // And what it must not do.
    for no in [
        &["get", "secrets", "-n", NS][..],
        &["list", "secrets", "-n", NS],
        &["get", "nodes"],
        &["list", "nodes"],
        &["get", "configmaps/kube-root-ca.crt", "-n", NS],
        &["list", "configmaps", "-n", NS],
        &["watch", "configmaps", "-n", NS],
        &["create", "configmaps", "-n", NS],
        &["update", "configmaps/slicectl-specs", "-n", NS],
        &["patch", "configmaps/slicectl-specs", "-n", NS],
        &["get", "configmaps/slicectl-specs", "-n", "default"],
        &["get", "leases.coordination.k8s.io/other", "-n", NS],
        &["patch", "leases.coordination.k8s.io/other", "-n", NS],
        &["update", "leases.coordination.k8s.io/slicectl", "-n", NS],
        &["delete", "leases.coordination.k8s.io/slicectl", "-n", NS],
        &["create", "leases.coordination.k8s.io", "-n", "kube-system"],
        &["create", "slicestatuses.slicectl.dev", "-n", "default"],
        &["list", "slicestatuses.slicectl.dev", "-A"],
        &["update", "slicestatuses.slicectl.dev", "-n", NS],
        &["deletecollection", "slicestatuses.slicectl.dev", "-n", NS],
        &[
            "update",
            "slicestatuses.slicectl.dev",
            "--subresource=status",
            "-n",
            NS,
        ],
        &["create", "events", "-n", NS],
        &["create", "events.events.k8s.io", "-n", "default"],
        &["create", "customresourcedefinitions.apiextensions.k8s.io"],
        &["create", "pods", "-n", NS],
        &["patch", "deployments.apps/slicectl", "-n", NS],
        &["get", "deployments.apps/other", "-n", NS],
        &["list", "deployments.apps", "-n", NS],
        &["watch", "deployments.apps", "-n", NS],
        &["update", "deployments.apps/slicectl", "-n", NS],
        &["delete", "deployments.apps/slicectl", "-n", NS],
        &[
            "update",
            "deployments.apps/slicectl",
            "--subresource=finalizers",
            "-n",
            NS,
        ],
        &["get", "deployments.apps/slicectl", "-n", "default"],
        &["create", "poddisruptionbudgets.policy", "-n", NS],
        &["create", "roles.rbac.authorization.k8s.io", "-n", NS],
        &["create", "rolebindings.rbac.authorization.k8s.io", "-n", NS],
        &["create", "serviceaccounts/token", "-n", NS],
        &["impersonate", "serviceaccounts", "-n", NS],
    ] {
        assert!(!can_i(no), "must be no: {no:?}");
    }
}

async fn client_as(user: Option<&str>) -> Client {
    let mut config = config_from_kubeconfig(&kubeconfig(), None)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", hint()));
    config.auth_info.impersonate = user.map(str::to_owned);
    Client::try_from(config).expect("client")
}

fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(ref e)) if e.code == 403)
}

#[tokio::test]
async fn the_controllers_calls_succeed_as_its_service_account() {
    apply_deploy();
    let admin = client_as(None).await;
    let sa = client_as(Some(SA)).await;

    // The specs ConfigMap: listed and watched by name (the field selector
    // metadata.name is what lets resourceNames hold for list and watch).
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), NS);
    let by_name = watcher::Config::default().fields("metadata.name=slicectl-specs");
    let mut stream = watcher(cms.clone(), by_name).boxed();
    let mut seen = None;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("watch event")
    {
        match ev.expect("watch the specs ConfigMap by name") {
            watcher::Event::InitApply(cm) => seen = cm.metadata.name,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(seen.as_deref(), Some("slicectl-specs"));
    assert!(cms.get("slicectl-specs").await.is_ok());
    assert!(forbidden(cms.list(&Default::default()).await));
    assert!(forbidden(cms.get("kube-root-ca.crt").await));

    // The Lease, as kube-lease-manager uses it: get, create, strategic merge
    // and server-side apply patches.
    let leases: Api<Lease> = Api::namespaced(sa.clone(), NS);
    let _ = Api::<Lease>::namespaced(admin.clone(), NS)
        .delete("slicectl", &DeleteParams::default())
        .await;
    let lease: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "slicectl"},
        "spec": {"holderIdentity": "slicectl-0", "leaseDurationSeconds": 15}
    }))
    .unwrap();
    leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create the Lease");
    assert!(leases.get("slicectl").await.is_ok());
    leases
        .patch(
            "slicectl",
            &PatchParams::default(),
            &Patch::Strategic(serde_json::json!({"spec": {"holderIdentity": "slicectl-1"}})),
        )
        .await
        .expect("take the Lease over");
    let applied = leases
        .patch(
            "slicectl",
            &PatchParams::apply("slicectl-1").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "spec": {"holderIdentity": "slicectl-1", "leaseTransitions": 1}
            })),
        )
        .await
        .expect("renew the Lease");
    assert_eq!(
        applied
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref()),
        Some("slicectl-1")
    );
    // An update (PUT) is not needed, so not granted.
    assert!(forbidden(
        leases
            .replace("slicectl", &PostParams::default(), &applied)
            .await
    ));
    assert!(forbidden(
        leases.delete("slicectl", &DeleteParams::default()).await
    ));
    Api::<Lease>::namespaced(admin.clone(), NS)
        .delete("slicectl", &DeleteParams::default())
        .await
        .expect("clean up the Lease");

    // --owner-deployment slicectl: the controller's own Deployment, read
    // once (get by name; nothing else on Deployments).
    let deployments: Api<Deployment> = Api::namespaced(sa.clone(), NS);
    let owner = owner::resolve(&deployments, NS, "slicectl", owner::RETRY)
        .await
        .expect("get the controller's Deployment as the ServiceAccount");
    let uid = Api::<Deployment>::namespaced(admin.clone(), NS)
        .get("slicectl")
        .await
        .expect("the Deployment")
        .metadata
        .uid;
    assert_eq!(Some(owner.uid.clone()), uid);
    assert!(forbidden(deployments.list(&Default::default()).await));
    let e = owner::resolve(&deployments, NS, "other", owner::RETRY)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "cannot get Deployment slicectl/other (--owner-deployment other): 403 Forbidden:"
        ),
        "{e}"
    );

    // The status writer, as the controller runs it: objects (owned by the
    // Deployment) and their status applied, Events recorded, a departed
    // slice's object deleted.
    let name = format!("deploy-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let writer = StatusWriter::new(sa.clone(), NS, Some("it".into())).with_owner(owner.clone());
    let summary = writer
        .write(&one_slice(&name, Approval::Auto, false).await)
        .await
        .expect("write as the ServiceAccount");
    assert_eq!(summary.written, [name.as_str()]);
    assert!(
        summary.event_errors.is_empty(),
        "{:?}",
        summary.event_errors
    );
    let statuses: Api<SliceStatus> = Api::namespaced(admin.clone(), NS);
    let live = statuses.get(&name).await.expect("the object");
    assert_eq!(
        live.status.and_then(|s| s.observed_generation),
        live.metadata.generation
    );
    assert_eq!(live.metadata.owner_references, Some(vec![owner]));
    let summary = writer
        .write(&StatusSet {
            objects: vec![],
            removed: vec![],
        })
        .await
        .expect("delete as the ServiceAccount");
    assert_eq!(summary.deleted, [name.as_str()]);
}

/// What `deploy/workload-cluster/` grants slicectl in a workload cluster,
/// as `kubectl auth can-i --list` prints it. docs/controller.md, "In the
/// workload cluster", explains each row.
const WORKLOAD_EXPECTED: &[(&str, &str, &str)] = &[
    ("nodes", "[]", "[get list watch patch]"),
    ("pods", "[]", "[list watch]"),
    ("jobsets.jobset.x-k8s.io", "[]", "[get list watch]"),
    ("events", "[]", "[create]"),
    ("pods/eviction", "[]", "[create]"),
    ("poddisruptionbudgets.policy", "[]", "[get list]"),
];

/// `deploy/workload-cluster/`'s ClusterRole, bound to a test user (the
/// committed binding names a placeholder Google identity): exactly the
/// table, in every namespace, and nothing it must not do.
#[test]
fn the_workload_cluster_role_grants_exactly_what_readiness_drains_and_workload_slices_need() {
    let rendered = ok(&kubectl(&["kustomize", "deploy/workload-cluster/"]));
    assert!(rendered.contains("kind: ClusterRole\n"), "{rendered}");
    assert!(rendered.contains("name: slicectl-workload"), "{rendered}");
    ok(&kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=slicectl-tests",
        "-f",
        "deploy/workload-cluster/clusterrole.yaml",
    ]));
    let user = "slicectl-workload-test@example-project.iam.gserviceaccount.com";
    let binding = "slicectl-workload-test";
    let _ = kubectl(&[
        "delete",
        "clusterrolebinding",
        binding,
        "--ignore-not-found",
    ]);
    ok(&kubectl(&[
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=slicectl-workload",
        &format!("--user={user}"),
    ]));
    let baseline = can_i_list("nobody@example-project.iam.gserviceaccount.com", "default");
    for ns in ["default", "kube-system"] {
        let got: BTreeSet<_> = can_i_list(user, ns)
            .difference(&baseline)
            .cloned()
            .collect();
        assert_eq!(got, table(WORKLOAD_EXPECTED), "in {ns}");
    }
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i", "--as", user];
        all.extend_from_slice(args);
        let o = kubectl(&all);
        String::from_utf8_lossy(&o.stdout).trim() == "yes"
    };
    for yes in [
        &["list", "nodes"][..],
        &["watch", "nodes"],
        &["patch", "nodes/any"],
        &["list", "pods", "-A"],
        &["create", "pods", "--subresource=eviction", "-n", "team-a"],
        &["list", "poddisruptionbudgets.policy", "-A"],
        &["watch", "pods", "-A"],
        &["create", "events", "-n", "team-a"],
    ] {
        assert!(can(yes), "must be yes: {yes:?}");
    }
    for no in [
        &["delete", "nodes/any"][..],
        &["update", "nodes/any"],
        &["patch", "nodes/any", "--subresource=status"],
        &["delete", "pods", "-n", "team-a"],
        &["get", "pods", "--subresource=log", "-n", "team-a"],
        &["create", "pods", "--subresource=exec", "-n", "team-a"],
        &["create", "pods", "-n", "team-a"],
        &["get", "secrets", "-n", "kube-system"],
        &["list", "secrets", "-A"],
        &["create", "poddisruptionbudgets.policy", "-n", "team-a"],
        &["delete", "poddisruptionbudgets.policy", "-n", "team-a"],
        &["create", "daemonsets.apps", "-n", "kube-system"],
        &["delete", "events", "-n", "team-a"],
        &["patch", "events", "-n", "team-a"],
    ] {
        assert!(!can(no), "must be no: {no:?}");
    }
    ok(&kubectl(&["delete", "clusterrolebinding", binding]));
}
