//! `deploy/` is applied server-side to the real test control plane: the
//! manifests are valid Kubernetes objects, and the CronJob runs `slicectl apply`
//! on the mounted specs ConfigMap with `--auto-approve` and without
//! `--allow-empty-source`.

use std::process::Command;

fn kubeconfig() -> String {
    std::env::var("SLICECTL_TEST_KUBECONFIG").unwrap_or_else(|_| {
        panic!("SLICECTL_TEST_KUBECONFIG is not set: start the test control plane first: eval \"$(scripts/k8s-testenv.sh up)\" (scripts/test.sh does this)")
    })
}

fn kubectl(args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .args(args)
        .env("KUBECONFIG", kubeconfig())
        .output()
        .expect("kubectl is needed for this test")
}

#[test]
fn deploy_manifests_apply_server_side() {
    let o = kubectl(&[
        "apply",
        "--server-side",
        "--field-manager=slicectl-tests",
        "-k",
        "deploy/",
    ]);
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = kubectl(&[
        "get",
        "cronjob",
        "slicectl-apply",
        "-n",
        "slicectl",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cj: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pod = &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "slicectl");
    let args: Vec<&str> = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(
        &args[..3],
        &["apply", "/etc/slicectl/specs", "--auto-approve"]
    );
    assert!(!args.contains(&"--allow-empty-source"));
    assert_eq!(pod["volumes"][0]["configMap"]["name"], "slicectl-specs");
    let o = kubectl(&[
        "get",
        "serviceaccount",
        "slicectl",
        "-n",
        "slicectl",
        "-o",
        "jsonpath={.metadata.annotations.iam\\.gke\\.io/gcp-service-account}",
    ]);
    assert!(
        String::from_utf8_lossy(&o.stdout).ends_with(".iam.gserviceaccount.com"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}
