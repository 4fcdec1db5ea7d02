#![cfg(test)]
//! Unit tests of reading a token file.

use super::*;
use clap::Parser;

fn conn(args: &[&str]) -> Connection {
    let mut argv = vec!["slicectl", "plan", "specs"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).map(|c| c.command) {
        Ok(Command::Plan { conn, .. }) => conn,
        other => panic!("not a plan: {other:?}"),
    }
}

fn client(c: &Connection) -> std::result::Result<CloudClient, crate::cloud::CloudError> {
    CloudClient::new(ClientOptions {
        api_endpoint: c.api_endpoint.clone(),
        token_source: token_source(c),
        allow_insecure_http: c.allow_insecure_http,
        ..ClientOptions::default()
    })
}

#[tokio::test]
async fn the_token_file_authenticates_a_loopback_simulator_and_is_read_at_use() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("token");
    let c = conn(&[
        "--api-endpoint",
        "http://127.0.0.1:8080",
        "--access-token-file",
        path.to_str().unwrap(),
    ]);
    // Built before the file exists: nothing is read until a call needs it.
    let cl = client(&c).unwrap();
    let tokens = cl.token_source();
    assert!(
        tokens.sends_credentials(),
        "a loopback endpoint still gets the token"
    );
    let e = tokens.token().await.unwrap_err().to_string();
    assert!(e.contains(&path.display().to_string()), "{e}");
    std::fs::write(&path, "tok-1\n").unwrap();
    assert_eq!(tokens.token().await.unwrap().as_deref(), Some("tok-1"));
    assert!(!cl.credentials_in_clear());
    // Without the flag a loopback endpoint gets no credentials at all.
    let plain = client(&conn(&["--api-endpoint", "http://127.0.0.1:8080"])).unwrap();
    assert!(!plain.token_source().sends_credentials());
}

#[test]
fn the_token_file_follows_the_plain_http_rule_off_loopback() {
    let e = client(&conn(&[
        "--api-endpoint",
        "http://10.1.2.3:8080",
        "--access-token-file",
        "/nonexistent/token",
    ]))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("refusing to send Google Cloud credentials"),
        "{e}"
    );
    let cl = client(&conn(&[
        "--api-endpoint",
        "http://10.1.2.3:8080",
        "--access-token-file",
        "/nonexistent/token",
        "--allow-insecure-http",
    ]))
    .unwrap();
    assert!(cl.credentials_in_clear());
    let cl = client(&conn(&[
        "--api-endpoint",
        "https://10.1.2.3:8443",
        "--access-token-file",
        "/nonexistent/token",
    ]))
    .unwrap();
    assert!(!cl.credentials_in_clear());
}

#[test]
fn under_sim_no_token_is_read_even_with_a_token_file() {
    let c = conn(&["--sim", "--access-token-file", "/nonexistent/token"]);
    let t = token_source(&c).unwrap();
    assert!(!t.sends_credentials());
}
