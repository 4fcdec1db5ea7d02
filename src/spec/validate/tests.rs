#![cfg(test)]
use super::*;
use crate::spec::catalog::Placement;

const TARGET: &str = "apiVersion: slicectl.dev/v1alpha1
kind: Target
metadata:
  name: train
spec:
  project: example-project
  zone: us-central1-a
  ownerId: platform
  gke:
    location: us-central1
    name: train
";

/// [`TARGET`] in us-central1-c, where Google offers tpu7x.
fn target_c() -> String {
    TARGET.replace("us-central1-a", "us-central1-c")
}

fn file(path: &str, text: &str) -> SourceFile {
    SourceFile {
        path: path.into(),
        text: text.into(),
    }
}

fn slice(name: &str, body: &str) -> String {
    format!(
        "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata:\n  name: {name}\nspec:\n  target: train\n  backend: gke\n{body}"
    )
}

#[test]
fn a_valid_fleet_resolves_shapes_and_defaults() {
    let serve = TARGET
        .replace("name: train\nspec", "name: serve\nspec")
        .replace("us-central1-a", "us-central1-b");
    let text = format!(
        "{}{}---\n{serve}{}",
        target_c(),
        slice(
            "big",
            "  accelerator: tpu7x\n  topology: 2x2x4\n  replicas: 3\n  lifecycle:\n    operationTimeout: 45m\n"
        ),
        slice("small", "  accelerator: tpu-v6e-slice\n  topology: 2x2\n")
            .replace("target: train", "target: serve")
    );
    let fleet = load(&[file("a.yaml", &text), file("empty.yaml", "")]).expect("valid");
    assert_eq!(fleet.files, 2);
    let big = &fleet.slices["big"];
    assert_eq!(big.shape.hosts, 4);
    assert_eq!(
        big.shape.placement,
        Placement::WorkloadPolicy {
            topology: "2x2x4".into()
        }
    );
    assert_eq!(big.operation_timeout, Duration::from_secs(45 * 60));
    assert_eq!(big.location.line, 13);
    let small = &fleet.slices["small"];
    assert_eq!(small.operation_timeout, DEFAULT_OPERATION_TIMEOUT);
    assert_eq!(small.shape.machine_type, "ct6e-standard-4t");
    assert_eq!(
        fleet.target_of(small).map(|t| t.spec.owner_id.as_str()),
        Some("platform")
    );
}

#[test]
fn a_gke_kube_api_takes_one_way_located() {
    let slice_text = slice("a", "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n");
    let with = |api: &str| format!("{}    kubeApi:\n{api}{slice_text}", TARGET);
    // Each way alone is valid; none given means `endpoint: public`.
    for ok in [
        "      endpoint: private\n",
        "      endpoint: dns\n",
        "      kubeconfig: ~/.kube/config\n      context: train\n",
        "      inCluster: true\n",
    ] {
        let fleet = load(&[file("k.yaml", &with(ok))]).unwrap_or_else(|d| panic!("{ok}: {d:?}"));
        assert!(
            !fleet.targets["train"]
                .spec
                .gke
                .as_ref()
                .unwrap()
                .kube_api
                .is_default()
        );
    }
    let fleet = load(&[file("k.yaml", &format!("{TARGET}{slice_text}"))]).expect("valid");
    assert_eq!(
        fleet.targets["train"]
            .spec
            .gke
            .as_ref()
            .unwrap()
            .kube_api
            .access(),
        crate::spec::model::GkeAccess::Endpoint(crate::spec::model::GkeEndpoint::Public)
    );
    // Two Targets of one cluster reach its API one way.
    let second = TARGET
        .replace("name: train\nspec", "name: train-b\nspec")
        .replace("us-central1-a", "us-central1-b");
    let text = format!(
        "{}    kubeApi: {{endpoint: private}}\n---\n{second}{slice_text}",
        TARGET
    );
    let d = load(&[file("two.yaml", &text)]).expect_err("two ways");
    let text: Vec<String> = d.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("same GKE cluster with another kubeApi")),
        "{text:?}"
    );
    for (bad, want, line) in [
        (
            "      endpoint: public\n      kubeconfig: ~/.kube/config\n",
            "not endpoint and kubeconfig",
            14,
        ),
        (
            "      kubeconfig: /k\n      inCluster: true\n",
            "not kubeconfig and inCluster",
            14,
        ),
        ("      context: x\n", "only allowed with `kubeconfig`", 13),
        ("      kubeconfig: \" \"\n", "kubeconfig must be a path", 13),
        ("      endpoint: internal\n", "internal", 13),
    ] {
        let d = load(&[file("k.yaml", &with(bad))]).expect_err(bad);
        let text: Vec<String> = d.iter().map(ToString::to_string).collect();
        assert!(
            text.iter()
                .any(|t| t.contains(want) && t.contains(&format!("k.yaml:{line}:"))),
            "{bad}: {text:?}"
        );
    }
}

#[test]
fn every_problem_is_reported_sorted() {
    let text = format!(
        "{}---\n{}",
        slice(
            "Bad_Name",
            "  accelerator: tpu-v5p-slice\n  topology: 3x3x3\n  replicas: 0\n  nodeLabels:\n    slicectl.dev/x: y\n"
        ),
        TARGET.replace("ownerId: platform", "ownerId: -platform")
    );
    let diagnostics = load(&[file("b.yaml", &text)]).expect_err("invalid");
    let rendered: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    insta::assert_snapshot!(rendered.join("\n"));
    let mut sorted = diagnostics.clone();
    sorted.sort();
    assert_eq!(sorted, diagnostics);
}

#[test]
fn a_broken_target_does_not_make_references_dangle() {
    let broken = TARGET.replace("zone: us-central1-a", "zone: [us-central1-a]");
    let text = format!(
        "{broken}{}",
        slice("s", "  accelerator: tpu-v4-podslice\n  topology: 2x2x1\n")
    );
    let diagnostics = load(&[file("c.yaml", &text)]).expect_err("invalid");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(diagnostics[0].message.starts_with("spec.zone: "));
    assert_eq!(diagnostics[0].location.line, 7);
    // A syntax error elsewhere: references cannot be judged either.
    let only_slice = slice("s", "  accelerator: tpu-v4-podslice\n  topology: 2x2x1\n");
    let diagnostics =
        load(&[file("d.yaml", &only_slice), file("e.yaml", "a: [")]).expect_err("invalid");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(
        diagnostics[0].location.file,
        std::path::PathBuf::from("e.yaml")
    );
    // Without it, the dangling reference is reported.
    let diagnostics = load(&[file("d.yaml", &only_slice)]).expect_err("invalid");
    assert!(diagnostics[0].message.contains("no Target is defined"));
}

/// A slice whose TPU generation Google does not offer in its target's
/// zone is rejected at its accelerator, naming the target's zone (and
/// where it is written) and the zones that offer it; `allowUnlistedZone`
/// lets it through.
#[test]
fn a_generation_not_offered_in_the_zone_is_rejected_and_located() {
    let text = format!(
        "{TARGET}{}",
        slice("tiny", "  accelerator: tpu-v6e-slice\n  topology: 1x1\n")
    );
    let diagnostics = load(&[file("z.yaml", &text)]).expect_err("zone");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    let d = &diagnostics[0];
    // spec.accelerator of the slice (line 20, after `  accelerator: `).
    assert_eq!((d.location.line, d.location.column), (20, 16), "{d}");
    for want in [
        "accelerator tpu-v6e-slice (TPU v6e (Trillium)) is not offered in zone \"us-central1-a\"",
        "of Target \"train\" (z.yaml:7:9)",
        "Google offers it in: asia-northeast1-b, europe-west4-a, southamerica-west1-a, us-central1-b,",
        "https://cloud.google.com/tpu/docs/regions-zones",
        "set `allowUnlistedZone: true`",
    ] {
        assert!(d.message.contains(want), "{want:?} in {d}");
    }
    let allowed = text.replace("  ownerId:", "  allowUnlistedZone: true\n  ownerId:");
    load(&[file("z.yaml", &allowed)]).expect("allowUnlistedZone");
    // A generation offered there passes.
    let ok = text.replace("tpu-v6e-slice", "tpu-v5-lite-podslice");
    load(&[file("z.yaml", &ok)]).expect("v5e is offered in us-central1-a");
}

/// A short slice name equal to a long one's shortened node pool name:
/// both render node pool `<head>-<hash>-0` in one cluster.
#[test]
fn node_pool_names_colliding_after_truncation_are_rejected() {
    let long = "research-team-alpha-pretraining-v5p-large";
    let pool = names::node_pool(long, 0);
    assert!(long.len() + 2 > names::NODE_POOL_NAME_MAX && pool.len() <= names::NODE_POOL_NAME_MAX);
    let short = pool.strip_suffix("-0").expect("replica suffix");
    assert_eq!(
        names::node_pool(short, 0),
        pool,
        "the collision this test is about"
    );
    let body = "  accelerator: tpu-v5p-slice\n  topology: 2x2x2\n  replicas: 2\n";
    let text = format!("{TARGET}{}{}", slice(long, body), slice(short, body));
    let diagnostics = load(&[file("n.yaml", &text)]).expect_err("collision");
    let rendered: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
    assert_eq!(diagnostics.len(), 2, "{rendered:#?}");
    // The second slice's metadata.name (line 27), then the first's (line 16).
    let second = diagnostics
        .iter()
        .find(|d| d.location.line == 27)
        .expect("at the second");
    assert_eq!(second.location.column, 9);
    for want in [
        "node pool name collision",
        &format!("Slice {short:?} replica 0 renders node pool {pool:?}"),
        "in cluster projects/example-project/locations/us-central1/clusters/train",
        &format!("the same name as Slice {long:?} replica 0 (defined at n.yaml:16:9)"),
        "rename one of the two slices",
    ] {
        assert!(second.message.contains(want), "{want:?} in {second}");
    }
    let first = diagnostics
        .iter()
        .find(|d| d.location.line == 16)
        .expect("at the first");
    assert!(
        first.message.contains("(defined at n.yaml:27:9)"),
        "{first}"
    );

    // The same slices in different clusters do not collide.
    let other = TARGET.replace("name: train", "name: other");
    let elsewhere = slice(short, body).replace("target: train", "target: other");
    let text = format!("{TARGET}---\n{other}{}{elsewhere}", slice(long, body));
    load(&[file("n.yaml", &text)]).expect("different clusters");
}

/// Two Targets naming one cluster: their slices share its node pool names.
#[test]
fn node_pool_collisions_count_across_targets_on_one_cluster() {
    let long = "research-team-alpha-pretraining-v5p-large";
    let short = names::node_pool(long, 0)
        .strip_suffix("-0")
        .expect("suffix")
        .to_string();
    let second_target = TARGET
        .replacen("  name: train\n", "  name: second\n", 1)
        .replace("ownerId: platform", "ownerId: other-team");
    let body = "  accelerator: tpu-v5-lite-podslice\n  topology: 2x2\n";
    let text = format!(
        "{TARGET}---\n{second_target}{}{}",
        slice(long, body),
        slice(&short, body).replace("target: train", "target: second")
    );
    let diagnostics = load(&[file("x.yaml", &text)]).expect_err("collision");
    assert_eq!(diagnostics.len(), 2, "{diagnostics:#?}");
    assert!(
        diagnostics
            .iter()
            .all(|d| d.message.contains("node pool name collision"))
    );
}

/// tpu7x multi-host slices' workload policies collide in one project and
/// region even when their node pools (in different clusters) do not.
#[test]
fn workload_policy_names_colliding_after_truncation_are_rejected() {
    let long = format!("ironwood-{}", "x".repeat(52));
    assert_eq!(long.len(), 61);
    let policy = names::workload_policy(&long, 0);
    let short = policy.strip_suffix("-0-wp").expect("suffix").to_string();
    assert_eq!(names::workload_policy(&short, 0), policy);
    assert_ne!(names::node_pool(&short, 0), names::node_pool(&long, 0));
    let body = "  accelerator: tpu7x\n  topology: 2x2x4\n";
    let target = target_c();
    let text = format!("{target}{}{}", slice(&long, body), slice(&short, body));
    let diagnostics = load(&[file("w.yaml", &text)]).expect_err("collision");
    assert_eq!(diagnostics.len(), 2, "{diagnostics:#?}");
    assert!(
        diagnostics.iter().all(|d| d.message.contains(&format!(
            "renders workload policy {policy:?} in project example-project region us-central1"
        ))),
        "{diagnostics:#?}"
    );
    // Single-host tpu7x slices have no workload policy: no collision.
    let body = "  accelerator: tpu7x\n  topology: 1x1x1\n";
    let text = format!("{target}{}{}", slice(&long, body), slice(&short, body));
    load(&[file("w.yaml", &text)]).expect("single-host: no workload policy");
}

#[test]
fn previous_names_are_checked_and_located() {
    let text = format!(
        "{TARGET}{}{}",
        slice(
            "gamma",
            "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n  previousNames:\n    - Alpha\n    - gamma\n    - beta\n    - beta\n"
        ),
        slice(
            "delta",
            "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n  previousNames: [gamma]\n"
        )
    );
    let diagnostics = load(&[file("t.yaml", &text)]).expect_err("invalid");
    let got: Vec<(usize, usize, &str)> = diagnostics
        .iter()
        .map(|d| (d.location.line, d.location.column, d.message.as_str()))
        .collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert_eq!((got[0].0, got[0].1), (23, 7));
    assert!(
        got[0].2.contains("\"Alpha\"") && got[0].2.contains("lowercase"),
        "{}",
        got[0].2
    );
    assert_eq!(got[1].0, 24);
    assert!(got[1].2.contains("this slice's own name"), "{}", got[1].2);
    assert_eq!(got[2].0, 26);
    assert!(
        got[2].2.contains("already given as previousNames[2]"),
        "{}",
        got[2].2
    );
    assert_eq!((got[3].0, got[3].1), (37, 19));
    assert!(
        got[3]
            .2
            .contains("is the name of Slice \"gamma\" in the specs"),
        "{}",
        got[3].2
    );

    // Two slices cannot take over one slice's resources.
    let text = format!(
        "{TARGET}{}{}",
        slice(
            "gamma",
            "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n  previousNames: [alpha]\n"
        ),
        slice(
            "delta",
            "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n  previousNames: [alpha]\n"
        )
    );
    let diagnostics = load(&[file("t.yaml", &text)]).expect_err("invalid");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(
        diagnostics[0]
            .message
            .contains("also claimed by Slice \"gamma\"")
    );

    // A valid declaration loads.
    let text = format!(
        "{TARGET}{}",
        slice(
            "gamma",
            "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n  previousNames: [alpha]\n"
        )
    );
    let fleet = load(&[file("t.yaml", &text)]).expect("valid");
    assert_eq!(
        fleet.slices["gamma"].spec.previous_names,
        vec!["alpha".to_string()]
    );
    assert_eq!(
        fleet.claimant("alpha").map(|s| s.name.as_str()),
        Some("gamma")
    );
}

/// A Target's `previousNames` (the hand-over of another Target's
/// slices): valid names, not its own, not another Target's in the
/// specs, not claimed twice for one ownerId; each located.
#[test]
fn target_previous_names_are_checked_and_located() {
    let target = |name: &str, extra: &str| {
        TARGET.replace("name: train\nspec:", &format!("name: {name}\nspec:")) + extra
    };
    let text = format!(
        "{}---\n{}",
        target("train", "  previousNames: [Bad_Name, train, old, old]\n"),
        target("other", "  previousNames: [train]\n"),
    );
    let diagnostics = load(&[file("t.yaml", &text)]).expect_err("invalid");
    let got: Vec<(usize, &str)> = diagnostics
        .iter()
        .map(|d| (d.location.line, d.message.as_str()))
        .collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got.iter()
            .any(|(l, m)| *l == 12 && m.contains("\"Bad_Name\"")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|(_, m)| m.contains("this Target's own name")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|(_, m)| m.contains("already given as previousNames[2]")),
        "{got:#?}"
    );
    assert!(
        got.iter()
            .any(|(l, m)| *l == 25 && m.contains("is the name of Target \"train\" in the specs")),
        "{got:#?}"
    );
    // Two Targets of one ownerId cannot both take one Target's slices.
    let text = format!(
        "{}---\n{}",
        target("train", "  previousNames: [old]\n"),
        target("other", "  previousNames: [old]\n"),
    );
    let diagnostics = load(&[file("t.yaml", &text)]).expect_err("invalid");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert!(
        diagnostics[0]
            .message
            .contains("also claimed by Target \"train\"")
    );
    // A valid hand-over loads.
    let fleet =
        load(&[file("t.yaml", &target("train", "  previousNames: [old]\n"))]).expect("valid");
    assert_eq!(
        fleet.targets["train"].spec.previous_names,
        vec!["old".to_string()]
    );
}

#[test]
fn duplicate_taints_are_rejected() {
    let text = format!(
        "{TARGET}{}",
        slice(
            "s",
            "  accelerator: tpu-v5p-slice\n  topology: 2x2x1\n  taints:\n    - {key: a, effect: NoSchedule}\n    - {key: a, value: b, effect: NoSchedule}\n"
        )
    );
    let diagnostics = load(&[file("t.yaml", &text)]).expect_err("invalid");
    assert_eq!(diagnostics.len(), 1);
    assert!(
        diagnostics[0]
            .message
            .contains("already given as taints[0]")
    );
    assert_eq!(diagnostics[0].location.line, 24);
}

#[test]
fn dns_labels() {
    assert_eq!(dns_label_problem("a-b-1", 63), None);
    assert_eq!(dns_label_problem(&"a".repeat(63), 63), None);
    assert!(dns_label_problem(&"a".repeat(64), 63).is_some());
    for bad in ["", "-a", "a-", "A", "a_b", "a.b", "a b"] {
        assert!(dns_label_problem(bad, 63).is_some(), "{bad:?}");
    }
    assert!(gce_name_problem("1abc", 63).is_some());
    assert!(gce_name_problem("abc1", 63).is_none());
}

#[test]
fn kubernetes_label_syntax() {
    for good in [
        "a",
        "A.b_c-D",
        "example.com/team",
        "a.b.c/X",
        "cloud.google.com/foo",
    ] {
        assert_eq!(label_key_problem(good), None, "{good}");
    }
    for bad in [
        "",
        "/a",
        "a/",
        "-a",
        "a-",
        "ex_ample.com/a",
        "Example.com/a",
        "a/b/c",
        "a b",
    ] {
        assert!(label_key_problem(bad).is_some(), "{bad:?}");
    }
    assert!(label_key_problem(&format!("{}/a", "a".repeat(254))).is_some());
    assert!(label_key_problem(&"a".repeat(64)).is_some());
    assert_eq!(label_value_problem(""), None);
    assert_eq!(label_value_problem("v1.2_3-x"), None);
    for bad in ["-v", "v-", "a b", "a/b", &"v".repeat(64)] {
        assert!(label_value_problem(bad).is_some(), "{bad:?}");
    }
    assert!(reserved_label_problem("slicectl.dev/owner").is_some());
    assert!(reserved_label_problem("cloud.google.com/gke-nodepool").is_some());
    assert!(reserved_label_problem("kubernetes.io/hostname").is_some());
    assert!(reserved_label_problem("node.k8s.io/x").is_some());
    assert!(reserved_label_problem("cloud.google.com/other").is_none());
    assert!(reserved_label_problem("example.com/k8s.io").is_none());
    assert!(reserved_label_problem("cloud.google.com/compute-class").is_some());
    assert!(reserved_label_problem("node-role.kubernetes.io/tpu").is_some());
}

#[test]
fn gce_resource_labels() {
    assert_eq!(gce_label_key_problem("cost-center_1"), None);
    for bad in [
        "",
        "1a",
        "A",
        "a.b",
        "goog-x",
        "slicectl-owner",
        &"a".repeat(64),
    ] {
        assert!(gce_label_key_problem(bad).is_some(), "{bad:?}");
    }
    assert_eq!(gce_label_value_problem(""), None);
    assert_eq!(gce_label_value_problem("1-a_b"), None);
    assert!(gce_label_value_problem("A").is_some());
}

#[test]
fn projects_zones_regions() {
    for good in ["example-project", "abcdef", "example.com:my-project"] {
        assert_eq!(project_id_problem(good), None, "{good}");
    }
    for bad in [
        "short",
        "Example-project",
        "1project",
        "project-",
        "my_project",
        ":abcdef",
    ] {
        assert!(project_id_problem(bad).is_some(), "{bad:?}");
    }
    assert!(project_id_problem(&format!("a{}", "b".repeat(30))).is_some());
    assert!(is_zone("us-central2-b") && is_zone("europe-west4-a"));
    for bad in [
        "us-central2",
        "us-central-b",
        "us-central2-bb",
        "US-central2-b",
        "uscentral2-b",
    ] {
        assert!(!is_zone(bad), "{bad}");
    }
    assert!(is_region("us-central2") && !is_region("us-central2-b") && !is_region("us"));
    assert_eq!(region_of("us-central2-b"), "us-central2");
}

#[test]
fn control_plane_endpoints() {
    for (good, host, port) in [
        ("10.128.0.2:6443", "10.128.0.2", 6443),
        ("[fd00::2]:6443", "fd00::2", 6443),
        ("cp.example.internal:443", "cp.example.internal", 443),
        ("CP-1.Example.com:1", "CP-1.Example.com", 1),
        ("localhost:65535", "localhost", 65535),
    ] {
        assert_eq!(parse_endpoint(good), Ok((host.to_string(), port)), "{good}");
    }
    for bad in [
        "10.128.0.2",
        "10.128.0.2:0",
        "10.128.0.2:65536",
        "10.128.0.256:6443",
        "fd00::2:6443",
        "[fd00::zz]:6443",
        "[fd00::2]6443",
        "https://10.0.0.1:6443",
        "cp_1.example:6443",
        ":6443",
        "cp.example:+6443",
        "-cp.example:6443",
    ] {
        let e = parse_endpoint(bad).expect_err(bad);
        assert!(e.contains("expected HOST:PORT"), "{bad}: {e}");
    }
}

#[test]
fn compute_paths() {
    assert_eq!(parse_network("default"), Ok("default".into()));
    assert_eq!(
        parse_network(
            "https://www.googleapis.com/compute/v1/projects/host-project/global/networks/vpc-1"
        ),
        Ok("projects/host-project/global/networks/vpc-1".into())
    );
    for bad in [
        "Default",
        "projects/p/global/networks/x",
        "projects/host-project/regions/us-central1/networks/x",
        "https://example.com/compute/v1/projects/host-project/global/networks/x",
    ] {
        assert!(parse_network(bad).is_err(), "{bad}");
    }
    let s = parse_subnetwork("projects/host-project/regions/us-central1/subnetworks/tpu").unwrap();
    assert_eq!(
        (s.name.as_str(), s.region.as_deref()),
        ("tpu", Some("us-central1"))
    );
    assert_eq!(parse_subnetwork("tpu").unwrap().region, None);
    for bad in [
        "projects/host-project/global/subnetworks/tpu",
        "projects/host-project/regions/us-central1-a/subnetworks/tpu",
        "Tpu",
    ] {
        assert!(parse_subnetwork(bad).is_err(), "{bad}");
    }
    let i = parse_image("projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accel-2404-amd64-tpu-tpu7x").unwrap();
    assert_eq!(
        i.family.as_deref(),
        Some("ubuntu-accel-2404-amd64-tpu-tpu7x")
    );
    assert_eq!(
            parse_image("https://compute.googleapis.com/compute/v1/projects/my-images/global/images/tpu-base-20260101").unwrap().source_image(),
            "projects/my-images/global/images/tpu-base-20260101"
        );
    for bad in [
        "ubuntu-2404",
        "projects/my-images/global/images/family/",
        "projects/my-images/images/x",
        "projects/my-images/global/images/Ubuntu",
    ] {
        assert!(parse_image(bad).is_err(), "{bad}");
    }
    let t = parse_instance_template(
        "projects/example-project/regions/us-central1/instanceTemplates/tpu7x-it",
    )
    .unwrap();
    assert_eq!(t.region.as_deref(), Some("us-central1"));
    assert_eq!(
        t.path(),
        "projects/example-project/regions/us-central1/instanceTemplates/tpu7x-it"
    );
    let t = parse_instance_template("https://www.googleapis.com/compute/beta/projects/example-project/global/instanceTemplates/t1").unwrap();
    assert_eq!(
        t.path(),
        "projects/example-project/global/instanceTemplates/t1"
    );
    for bad in [
        "t1",
        "projects/example-project/zones/us-central1-a/instanceTemplates/t1",
        "projects/example-project/global/instanceTemplates/T1",
    ] {
        assert!(parse_instance_template(bad).is_err(), "{bad}");
    }
}

#[test]
fn container_images() {
    for good in [
        crate::spec::model::DEFAULT_DEVICE_PLUGIN_IMAGE,
        "busybox",
        "localhost:5000/tpu/plugin:dev",
        "us-docker.pkg.dev/p/r/tpu-device-plugin@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "registry.example.com:443/a/b:v1.2_3",
    ] {
        assert_eq!(container_image_problem(good), Ok(()), "{good}");
    }
    for bad in [
        "",
        "Gcr.io/UPPER/x",
        "gcr.io/x:",
        "gcr.io/x:-bad",
        "gcr.io/x@sha256:abc",
        "a b",
        "gcr.io//x",
        "-x",
    ] {
        assert!(container_image_problem(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn kubernetes_minors() {
    assert_eq!(kubernetes_minor("1.36"), Ok(36));
    assert_eq!(kubernetes_minor("1.31"), Ok(31));
    let e = kubernetes_minor("1.36.3").unwrap_err();
    assert!(e.contains("patch version") && e.contains("\"1.36\""), "{e}");
    assert!(
        kubernetes_minor("1.30")
            .unwrap_err()
            .contains("older than 1.31")
    );
    for bad in ["v1.36", "1", "2.0", "1.x", "", "1.036x", "1.3600"] {
        assert!(kubernetes_minor(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn metadata_keys() {
    for good in ["enable-oslogin", "my_key", "A-1", &"k".repeat(128)] {
        assert_eq!(metadata_key_problem(good), None, "{good}");
    }
    for bad in ["", "a.b", "a/b", &"k".repeat(129)] {
        assert!(metadata_key_problem(bad).is_some(), "{bad:?}");
    }
    for reserved in RESERVED_METADATA_KEYS
        .iter()
        .copied()
        .chain(["slicectl-anything", "startup-script-url"])
    {
        assert!(metadata_key_problem(reserved).is_some(), "{reserved}");
    }
}

#[test]
fn gce_node_labels_are_those_a_kubelet_may_set() {
    for ok in [
        "team",
        "example.com/team",
        "node.kubernetes.io/pool",
        "kubelet.kubernetes.io/x",
        "cloud.google.com/other",
    ] {
        assert_eq!(gce_reserved_label_problem(ok), None, "{ok}");
    }
    for bad in [
        "node-role.kubernetes.io/tpu",
        "kubernetes.io/role",
        "node-restriction.kubernetes.io/x",
        "k8s.io/x",
        "node.kubernetes.io/instance-type",
        "slicectl.dev/owner",
        "cloud.google.com/gke-tpu-topology",
    ] {
        assert!(gce_reserved_label_problem(bad).is_some(), "{bad}");
    }
    // GKE stays stricter about its own namespaces.
    assert!(reserved_label_problem("node.kubernetes.io/pool").is_some());
}

/// `kube-labels` is `k=v,k=v` and `kube-taints` `k=v:Effect,…`: valid
/// Kubernetes label keys, values and taint parts never contain a
/// separator, so validation needs no extra rule for the encoding.
#[test]
fn label_syntax_excludes_the_metadata_encodings_separators() {
    for sep in [",", "=", ":", " ", "\n"] {
        for key in [
            format!("a{sep}b"),
            format!("example.com/a{sep}b"),
            format!("ex{sep}ample.com/a"),
        ] {
            assert!(label_key_problem(&key).is_some(), "{key:?}");
        }
        assert!(
            label_value_problem(&format!("a{sep}b")).is_some(),
            "{sep:?}"
        );
    }
}

#[test]
fn durations() {
    assert_eq!(parse_duration("72h"), Ok(Duration::from_secs(72 * 3600)));
    assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("PT45M"), Ok(Duration::from_secs(2700)));
    for bad in ["", "0s", "-1h", "forever", "10"] {
        assert!(parse_duration(bad).is_err(), "{bad:?}");
    }
}

/// A GCE multi-host slice has a workload policy (its shape's placement is
/// the workload policy on that backend): two slices pinning one policy name
/// (`gce.workloadPolicyName`, adopted tpu-operator MIGs) in one project and
/// region collide, though their MIGs do not; in another region they do not.
#[test]
fn gce_workload_policy_names_pinned_twice_in_one_region_are_rejected() {
    let target = |name: &str, zone: &str| {
        format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Target\nmetadata: {{name: {name}}}\nspec:\n  project: proj-one\n  zone: {zone}\n  ownerId: o\n  gce:\n    controlPlaneEndpoint: \"10.0.0.2:6443\"\n    kubeApi: {{kubeconfig: /nonexistent}}\n"
        )
    };
    let gce = |name: &str, target: &str, mig: &str| {
        format!(
            "---\napiVersion: slicectl.dev/v1alpha1\nkind: Slice\nmetadata: {{name: {name}}}\nspec:\n  target: {target}\n  backend: gce\n  accelerator: tpu-v6e-slice\n  topology: \"4x4\"\n  gce:\n    migName: {mig}\n    workloadPolicyName: grp-policy-1a2b3c4d\n    image: projects/ubuntu-os-accelerator-images/global/images/img-a\n    bootstrap: {{kubeadm: {{kubernetesVersion: \"1.36\"}}}}\n"
        )
    };
    let same = format!(
        "{}{}{}",
        target("k", "us-central1-b"),
        gce("one", "k", "one-mig"),
        gce("two", "k", "two-mig")
    );
    let diagnostics = load(&[file("p.yaml", &same)]).expect_err("collision");
    assert_eq!(diagnostics.len(), 2, "{diagnostics:#?}");
    for d in &diagnostics {
        assert!(
            d.message.contains("workload policy name collision")
                && d.message.contains("\"grp-policy-1a2b3c4d\"")
                && d.message.contains("project proj-one region us-central1"),
            "{d}"
        );
    }
    let apart = format!(
        "{}{}{}{}",
        target("k", "us-central1-b"),
        target("e", "europe-west4-a"),
        gce("one", "k", "one-mig"),
        gce("two", "e", "two-mig")
    );
    load(&[file("p.yaml", &apart)]).expect("different regions");
}

/// Two workload-enabled Targets on one cluster would claim each other's
/// pools and each count its own maxChips: the second is refused where its
/// `enabled` is written. One enabled and one not is fine, and so are two
/// on two clusters.
#[test]
fn two_workload_enabled_targets_on_one_cluster_are_refused_at_the_line() {
    let workloads = "  workloads:\n    enabled: true\n    rules: [{}]\n";
    let second = TARGET.replacen("  name: train\n", "  name: second\n", 1);
    let text = format!("{TARGET}{workloads}---\n{second}{workloads}");
    let diagnostics = load(&[file("t.yaml", &text)]).expect_err("two on one cluster");
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    let d = &diagnostics[0];
    assert!(
        d.message
            .contains("Target \"train\" already lets the JobSets of GKE cluster train"),
        "{}",
        d.message
    );
    // `enabled: true` of the second Target: line 28 of the file, column 14.
    assert_eq!((d.location.line, d.location.column), (28, 14), "{d:?}");
    let off = format!(
        "{TARGET}{workloads}---\n{second}{}",
        workloads.replace("true", "false")
    );
    assert!(load(&[file("t.yaml", &off)]).is_ok());
    let elsewhere = second.replace("    name: train\n", "    name: other\n");
    let apart = format!("{TARGET}{workloads}---\n{elsewhere}{workloads}");
    assert!(load(&[file("t.yaml", &apart)]).is_ok());
}
