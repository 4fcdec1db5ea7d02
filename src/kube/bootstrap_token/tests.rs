#![cfg(test)]
use super::*;

#[test]
fn generated_tokens_have_the_right_shape_and_differ() {
    let a = BootstrapToken::generate();
    let b = BootstrapToken::generate();
    let text = a.expose();
    let re = regex::Regex::new(r"^[a-z0-9]{6}\.[a-z0-9]{16}$").expect("regex");
    assert!(re.is_match(&text), "{text:?}");
    assert_ne!(text, b.expose());
    let parsed = BootstrapToken::parse(&text).expect("parse");
    assert_eq!(parsed.expose(), text);
}

#[test]
fn parse_rejects_malformed_tokens() {
    for bad in [
        "",
        "abcdef",
        "abcdef.0123456789abcde",
        "abcdef.0123456789abcdef0",
        "ABCDEF.0123456789abcdef",
        "abcdef:0123456789abcdef",
        "abcde.0123456789abcdefg",
    ] {
        assert!(BootstrapToken::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn debug_redacts_the_secret() {
    let token = BootstrapToken::parse("abcdef.0123456789abcdef").expect("parse");
    let shown = format!("{token:?} {token:#?}");
    assert!(shown.contains("abcdef"));
    assert!(!shown.contains("0123456789abcdef"), "{shown}");
}

#[test]
fn secret_has_the_kubeadm_shape() {
    let token = BootstrapToken::parse("abcdef.0123456789abcdef").expect("parse");
    let expiration: jiff::Timestamp = "2030-01-02T03:04:05.678Z".parse().expect("ts");
    let secret = token.to_secret(&TokenSpec::node_join(expiration));
    assert_eq!(
        secret.metadata.name.as_deref(),
        Some("bootstrap-token-abcdef")
    );
    assert_eq!(secret.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        secret.type_.as_deref(),
        Some("bootstrap.kubernetes.io/token")
    );
    let data: BTreeMap<String, String> = secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.0).expect("utf8")))
        .collect();
    let want: BTreeMap<String, String> = [
        ("token-id", "abcdef"),
        ("token-secret", "0123456789abcdef"),
        ("expiration", "2030-01-02T03:04:05Z"),
        ("usage-bootstrap-authentication", "true"),
        ("usage-bootstrap-signing", "true"),
        ("auth-extra-groups", KUBEADM_NODE_TOKEN_GROUP),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(data, want);
}
