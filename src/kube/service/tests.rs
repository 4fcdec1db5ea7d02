#![cfg(test)]
use super::*;
use crate::kube::TokenSpec;
use jiff::SignedDuration;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn selectors_match_like_the_api_server() {
    let l = labels(&[("slicectl.dev/slice", "a"), ("tier", "x")]);
    for (sel, want) in [
        ("", true),
        ("slicectl.dev/slice=a", true),
        ("slicectl.dev/slice==a", true),
        ("slicectl.dev/slice=b", false),
        ("slicectl.dev/slice!=b", true),
        ("slicectl.dev/slice=a,tier=x", true),
        ("slicectl.dev/slice=a,tier=y", false),
        ("tier", true),
        ("!tier", false),
        ("!other", true),
        ("other!=z", true),
    ] {
        assert_eq!(
            LabelSelector::parse(sel).expect("parse").matches(&l),
            want,
            "{sel}"
        );
    }
    assert!(LabelSelector::parse("tier in (x)").is_err());
}

fn stored(token: &str, expires_in_mins: Option<i64>, now: jiff::Timestamp) -> StoredToken {
    let t = BootstrapToken::parse(token).expect("token");
    let exp = now + SignedDuration::from_mins(expires_in_mins.unwrap_or(60));
    let mut secret = t.to_secret(&TokenSpec::node_join(exp));
    if expires_in_mins.is_none()
        && let Some(d) = secret.data.as_mut()
    {
        d.remove("expiration");
    }
    StoredToken::from_secret(&secret).expect("a token secret")
}

#[test]
fn reads_a_token_secret_back() {
    let now: jiff::Timestamp = "2030-01-01T00:00:00Z".parse().expect("ts");
    let s = stored("abcdef.0123456789abcdef", Some(30), now);
    assert_eq!(s.secret_name, "bootstrap-token-abcdef");
    assert_eq!(
        s.token.as_ref().map(BootstrapToken::expose).as_deref(),
        Some("abcdef.0123456789abcdef")
    );
    assert_eq!(s.remaining(now), Some(SignedDuration::from_mins(30)));
    let shown = format!("{s:?}");
    assert!(!shown.contains("0123456789abcdef"), "{shown}");
}

#[test]
fn malformed_secrets_are_listed_but_never_usable() {
    let now = jiff::Timestamp::now();
    let t = BootstrapToken::parse("abcdef.0123456789abcdef").expect("token");
    let mut secret = t.to_secret(&TokenSpec::node_join(now + SignedDuration::from_hours(1)));
    secret.data.as_mut().expect("data").insert(
        "expiration".into(),
        k8s_openapi::ByteString(b"soon".to_vec()),
    );
    let s = StoredToken::from_secret(&secret).expect("still a token secret");
    assert!(s.token.is_none());
    assert!(!s.usable_for(now, SignedDuration::ZERO));

    // The name must match the id.
    let mut renamed = t.to_secret(&TokenSpec::node_join(now + SignedDuration::from_hours(1)));
    renamed.metadata.name = Some("bootstrap-token-zzzzzz".into());
    assert!(
        StoredToken::from_secret(&renamed)
            .expect("token secret")
            .token
            .is_none()
    );

    // Not a bootstrap token at all.
    secret.type_ = Some("Opaque".into());
    assert!(StoredToken::from_secret(&secret).is_none());
}

#[test]
fn reuse_picks_the_latest_expiry_with_enough_left() {
    let now = jiff::Timestamp::now();
    let ten = SignedDuration::from_mins(10);
    let a = stored("aaaaaa.0123456789abcdef", Some(5), now);
    let b = stored("bbbbbb.0123456789abcdef", Some(40), now);
    let c = stored("cccccc.0123456789abcdef", Some(55), now);
    let d = stored("dddddd.0123456789abcdef", Some(-5), now);
    let tokens = vec![a.clone(), b, c, d.clone()];
    let pick = StoredToken::reusable(&tokens, now, ten).expect("one is reusable");
    assert_eq!(pick.secret_name, "bootstrap-token-cccccc");
    assert!(StoredToken::reusable(&[a, d], now, ten).is_none());
    let forever = stored("eeeeee.0123456789abcdef", None, now);
    assert_eq!(
        StoredToken::reusable(&[tokens[2].clone(), forever], now, ten)
            .map(|t| t.secret_name.as_str()),
        Some("bootstrap-token-eeeeee")
    );
}

#[test]
fn cordoned_needs_both_the_flag_and_the_taint() {
    use k8s_openapi::api::core::v1::NodeSpec;
    let mut node = Node {
        spec: Some(NodeSpec {
            unschedulable: Some(true),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    assert!(!is_cordoned(&node));
    if let Some(s) = node.spec.as_mut() {
        s.taints = Some(vec![unschedulable_taint()]);
    }
    assert!(is_cordoned(&node));
}
