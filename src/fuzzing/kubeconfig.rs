//! Kubeconfigs a spec names (untrusted: no credential plugin, no file).

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::kube::kubeconfig::{parse, untrusted_problems};

/// Target `kubeconfig`: the text of a kubeconfig file (slicectl refuses
/// bytes that are not UTF-8 before parsing). A parse error never quotes the
/// file; a kubeconfig re-encoded as YAML reads back the same; one with no
/// plugin or file reference becomes a client configuration without a panic.
pub fn kubeconfig(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let k = match parse(text) {
        Ok(k) => k,
        Err(message) => {
            // Secrets are long words; none may reach the message.
            for word in text.split(|c: char| c.is_whitespace() || c == ':' || c == '"') {
                assert!(
                    word.len() < 16 || !message.contains(word),
                    "a kubeconfig parse error quotes the file ({word:?}): {message}"
                );
            }
            return;
        }
    };
    let problems = untrusted_problems(&k);
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    let written = serde_saphyr::to_string(&k).expect("a kubeconfig serialises to YAML");
    let again = parse(&written)
        .unwrap_or_else(|e| panic!("a kubeconfig written back does not read back: {e}\n{written}"));
    assert_eq!(
        as_json(&again),
        as_json(&k),
        "kubeconfig round trip\n{written}"
    );
    assert_eq!(untrusted_problems(&again), problems);
    if problems.is_empty() {
        let options = KubeConfigOptions::default();
        let _ = futures::executor::block_on(kube::Config::from_custom_kubeconfig(k, &options));
    }
}

fn as_json(k: &Kubeconfig) -> serde_json::Value {
    // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
    serde_json::to_value(k).expect("a kubeconfig serialises to JSON")
}
