//! slicectl and its simulator keep separate copies of what they both must
//! know: the TPU catalogue (the client's `spec::catalog`, the simulator's
//! `slicectl_sim::tpu`, each written from Google's pages) and the VM
//! bootstrap contract (the client's `bootstrap` and `kube` token/CA code, the
//! simulated VM's `slicectl_sim::contract` and `slicectl_sim::kubeadm`).
//! These tests are where the copies meet: a mistake in either shows up here
//! as a disagreement instead of being agreed with.

use std::collections::BTreeMap;

use slicectl::bootstrap::{self, BootstrapStatus, Taint, TaintEffect};
use slicectl::kube::{BootstrapToken, ca_cert_hash};
use slicectl::spec::catalog;
use slicectl_sim::{contract, kubeadm, tpu};

/// Every machine type the client's catalogue offers is one the simulator
/// knows, of the same generation, with the same chips per VM; every
/// topology the client offers for it is one Google (the simulator's tables)
/// accepts, and every zone the client offers it in is one Google offers it in.
#[test]
fn the_catalogue_agrees_with_the_simulators_tpu_tables() {
    let mut problems = Vec::new();
    for g in catalog::GENERATIONS {
        for m in g.machine_types {
            let Some(sim) = tpu::machine_type(m.name) else {
                problems.push(format!("{}: unknown to the simulator", m.name));
                continue;
            };
            if sim.generation.accelerator != g.accelerator {
                problems.push(format!(
                    "{}: the catalogue says {}, the simulator {}",
                    m.name, g.accelerator, sim.generation.accelerator
                ));
            }
            if sim.chips_per_vm != m.chips_per_host {
                problems.push(format!(
                    "{}: the catalogue says {} chips per VM, the simulator {}",
                    m.name, m.chips_per_host, sim.chips_per_vm
                ));
            }
            for t in g.topologies {
                if !sim.generation.accepts_topology(t) {
                    problems.push(format!(
                        "{}: topology {t} offered by the catalogue, refused by the simulator",
                        g.accelerator
                    ));
                }
                assert_eq!(catalog::chips(t), tpu::chips(t), "{t}");
            }
            for z in g.zones {
                if !sim.generation.offered_in(z) {
                    problems.push(format!(
                        "{}: zone {z} offered by the catalogue, not by the simulator's table",
                        m.name
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The other way round: every machine type of a generation both know is in
/// both, so a machine type one side forgot is noticed.
#[test]
fn both_tables_list_the_same_machine_types_per_generation() {
    for sim in tpu::GENERATIONS {
        let Some(g) = catalog::generation(sim.accelerator) else {
            continue;
        };
        let mut client: Vec<(&str, u32)> = g
            .machine_types
            .iter()
            .map(|m| (m.name, m.chips_per_host))
            .collect();
        let mut ours = sim.machine_types.to_vec();
        client.sort_unstable();
        ours.sort_unstable();
        assert_eq!(client, ours, "{}", sim.accelerator);
    }
}

#[test]
fn region_of_agrees() {
    for z in [
        "us-central1-a",
        "europe-west4-b",
        "us-central2-b",
        "asia-northeast1-b",
    ] {
        assert_eq!(
            slicectl::spec::validate::region_of(z),
            tpu::region_of(z),
            "{z}"
        );
    }
}

/// The metadata keys, guest-attribute path and status values the client
/// writes and reads are the ones the simulated VM reads and writes.
#[test]
fn the_bootstrap_contract_agrees() {
    assert_eq!(bootstrap::KUBE_LABELS_KEY, contract::KUBE_LABELS_KEY);
    assert_eq!(bootstrap::KUBE_TAINTS_KEY, contract::KUBE_TAINTS_KEY);
    assert_eq!(bootstrap::JOIN_TOKEN_KEY, contract::JOIN_TOKEN_KEY);
    assert_eq!(bootstrap::API_ENDPOINT_KEY, contract::API_ENDPOINT_KEY);
    assert_eq!(bootstrap::CA_HASH_KEY, contract::CA_HASH_KEY);
    assert_eq!(bootstrap::GUEST_NAMESPACE, contract::GUEST_NAMESPACE);
    assert_eq!(
        bootstrap::GUEST_BOOTSTRAP_KEY,
        contract::GUEST_BOOTSTRAP_KEY
    );
    assert_eq!(
        bootstrap::GUEST_BOOTSTRAP_PATH,
        contract::GUEST_BOOTSTRAP_PATH
    );

    // What the simulated VM writes, the client reads back as the same status.
    for (sim, client) in [
        (
            contract::BootstrapStatus::WaitingForToken,
            BootstrapStatus::WaitingForToken,
        ),
        (contract::BootstrapStatus::Joining, BootstrapStatus::Joining),
        (contract::BootstrapStatus::Joined, BootstrapStatus::Joined),
        (
            contract::BootstrapStatus::Failed("no token\nyet".into()),
            BootstrapStatus::Failed("no token yet".into()),
        ),
    ] {
        assert_eq!(BootstrapStatus::parse(&sim.to_string()), Some(client));
    }

    // What the client encodes, the simulated VM decodes to the same values.
    let labels: BTreeMap<String, String> = [
        ("cloud.google.com/gke-tpu-topology", "2x2x4"),
        ("slicectl.dev/slice", "a"),
        ("empty", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(
        contract::decode_labels(&bootstrap::encode_labels(&labels)),
        Ok(labels)
    );
    let taints = [
        Taint {
            key: "google.com/tpu".into(),
            value: "present".into(),
            effect: TaintEffect::NoSchedule,
        },
        Taint {
            key: "k".into(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
        },
        Taint {
            key: "p".into(),
            value: "v".into(),
            effect: TaintEffect::PreferNoSchedule,
        },
    ];
    let decoded = contract::decode_taints(&bootstrap::encode_taints(&taints)).unwrap();
    assert_eq!(decoded.len(), taints.len());
    for (d, t) in decoded.iter().zip(&taints) {
        assert_eq!(
            (d.key.as_str(), d.value.as_str()),
            (t.key.as_str(), t.value.as_str())
        );
        assert_eq!(d.effect, t.effect.as_str());
    }
    // Both refuse the same malformed input.
    for bad in ["a", "=x", "a=1,a=2"] {
        assert_eq!(
            bootstrap::decode_labels(bad).is_err(),
            contract::decode_labels(bad).is_err(),
            "{bad}"
        );
    }
    for bad in ["k", ":NoSchedule", "k:Never", "k=v:NoSchedule"] {
        assert_eq!(
            bootstrap::decode_taints(bad).is_err(),
            contract::decode_taints(bad).is_err(),
            "{bad}"
        );
    }
    for key in [
        "team",
        "slicectl.dev/slice",
        "kubernetes.io/hostname",
        "kubernetes.io/x",
        "node.kubernetes.io/x",
        "a.kubelet.kubernetes.io/y",
        "node-restriction.kubernetes.io/z",
        "k8s.io/x",
        "cloud.google.com/gke-tpu-topology",
    ] {
        assert_eq!(
            bootstrap::node_may_set_label(key),
            contract::node_may_set_label(key),
            "{key}"
        );
    }
    assert_eq!(
        bootstrap::provider_id("p", "us-central1-a", "vm-0"),
        contract::provider_id("p", "us-central1-a", "vm-0")
    );
}

/// A token the client generates is one the simulated VM's kubeadm accepts,
/// and both pin a CA the same way.
#[test]
fn tokens_and_ca_pins_agree() {
    for _ in 0..16 {
        let token = BootstrapToken::generate();
        let parsed = kubeadm::BootstrapToken::parse(&token.expose()).unwrap();
        assert_eq!(parsed.id(), token.id());
        assert_eq!(parsed.expose(), token.expose());
    }
    for bad in ["abcdef", "abcdef.0123", "ABCDEF.0123456789abcdef"] {
        assert_eq!(
            BootstrapToken::parse(bad).is_err(),
            kubeadm::BootstrapToken::parse(bad).is_err(),
            "{bad}"
        );
    }
    const CA: &str = "-----BEGIN CERTIFICATE-----
MIIBlzCCAT2gAwIBAgIUWUgIFdphsweI8FqOKsfZKKoBBkUwCgYIKoZIzj0EAwIw
IDEeMBwGA1UEAwwVc2xpY2VjdGwtdW5pdC10ZXN0LWNhMCAXDTI2MTEyMjEyNTA1
NFoYDzIxMjYxMDI5MTI1MDU0WjAgMR4wHAYDVQQDDBVzbGljZWN0bC11bml0LXRl
c3QtY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATNGP4qJOYbld1EIbpasluv
cOTrJPEPbUVempqeT3jrpHo42PHbkrRkoQQY5GdeojNYWQc5X7OEJSH2w4+4QANx
o1MwUTAdBgNVHQ4EFgQURktRZcoBx7TAqVvpi8ASxH159OMwHwYDVR0jBBgwFoAU
RktRZcoBx7TAqVvpi8ASxH159OMwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQD
AgNIADBFAiBHmPvFnVpxcKVe/r9Ql5WDLaSkoUFESJlVKZGJY2HWywIhAPLMmShG
+AEKlcmhb/TsgMnvrj6iYv2o98lXND5LNhuF
-----END CERTIFICATE-----
";
    assert_eq!(
        ca_cert_hash(CA).unwrap(),
        kubeadm::ca_cert_hash(CA).unwrap()
    );
}

/// Only the CLI wiring (`slicectl sim`, `--sim`) uses the simulator crate in
/// slicectl's own code; elsewhere it may appear only in unit tests (after a
/// file's first `#[cfg(test)]`) and comments.
#[test]
fn only_the_cli_uses_the_simulator_crate() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut offenders = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        if rel.starts_with("cli") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        // A test-only file (`#![cfg(test)]` on its first line) is all test.
        if text.starts_with("#![cfg(test)]") {
            continue;
        }
        let until = text.find("#[cfg(test)]").unwrap_or(text.len());
        for (n, line) in text[..until].lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") && code.contains("slicectl_sim") {
                offenders.push(format!("src/{}:{}: {line}", rel.display(), n + 1));
            }
        }
    }
    assert!(offenders.is_empty(), "{}", offenders.join("\n"));
}
