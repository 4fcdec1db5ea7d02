#![cfg(test)]
use super::*;

#[tokio::test]
async fn static_token_is_redacted_in_debug() {
    let t = StaticToken::new("ya29.super-secret-token");
    let dbg = format!("{t:?}");
    assert!(!dbg.contains("super-secret"), "{dbg}");
    assert!(dbg.contains("redacted"));
    assert_eq!(
        t.token().await.ok().flatten().as_deref(),
        Some("ya29.super-secret-token")
    );
}

#[tokio::test]
async fn no_auth_gives_no_token() {
    assert!(matches!(NoAuth.token().await, Ok(None)));
    assert!(!NoAuth.sends_credentials());
    assert!(StaticToken::new("t").sends_credentials());
    assert!(GcpAuth::new().sends_credentials());
}

#[tokio::test]
async fn access_token_file_is_read_at_each_use_trimmed_and_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    let src = AccessTokenFile::new(&path);
    // Nothing is read when it is made: a missing file fails at use, naming it.
    let e = src.token().await.unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("cannot read"), "{e}");
    std::fs::write(&path, "ya29.first-secret\n").unwrap();
    assert_eq!(
        src.token().await.unwrap().as_deref(),
        Some("ya29.first-secret")
    );
    // Rewritten (a token minted again): the next use sends the new one.
    std::fs::write(&path, "  ya29.second-secret  \r\n").unwrap();
    assert_eq!(
        src.token().await.unwrap().as_deref(),
        Some("ya29.second-secret")
    );
    assert!(src.sends_credentials());
    let dbg = format!("{src:?}");
    assert!(!dbg.contains("secret"), "{dbg}");
    assert!(dbg.contains("token"), "{dbg}");
}

#[tokio::test]
async fn an_empty_or_garbled_token_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    std::fs::write(&path, " \n\n").unwrap();
    let e = AccessTokenFile::new(&path)
        .token()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("is empty"), "{e}");
    assert!(e.contains(&path.display().to_string()), "{e}");
    std::fs::write(&path, "ya29.one\nya29.two-secret\n").unwrap();
    let e = AccessTokenFile::new(&path)
        .token()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("only an access token"), "{e}");
    assert!(!e.contains("two-secret"), "the token never shows: {e}");
    // A directory is unreadable as a token.
    let e = AccessTokenFile::new(dir.path())
        .token()
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read the access token file"), "{e}");
}

#[test]
fn gcp_auth_is_lazy_and_debug_has_no_secret() {
    // Building it touches no credentials.
    let g = GcpAuth::new();
    let dbg = format!("{g:?}");
    assert!(dbg.contains("initialized: false"), "{dbg}");
}
