#![cfg(test)]
use super::*;

const INLINE: &str = "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443', certificate-authority-data: Zm9v}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn an_inline_kubeconfig_loads_untrusted() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "kc", INLINE);
    let k = load(&p, false).unwrap();
    assert_eq!(k.current_context.as_deref(), Some("x"));
}

#[test]
fn an_untrusted_exec_plugin_is_refused_and_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("MARKER");
    let text = INLINE.replace(
            "user: {token: abc}",
            &format!(
                "user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: sh\n      args: ['-c', 'id > {}']",
                marker.display()
            ),
        );
    let p = write(dir.path(), "kubeconfig", &text);
    let e = load(&p, false).unwrap_err();
    assert!(e.contains("runs a credential plugin"), "{e}");
    assert!(e.contains("--trust-kubeconfig"), "{e}");
    assert!(!marker.exists());
}

#[test]
fn auth_providers_and_file_references_are_refused_untrusted() {
    let text = "apiVersion: v1
clusters:
- name: c
  cluster: {server: 'https://h', certificate-authority: /etc/ca.crt}
users:
- name: u
  user:
    tokenFile: /var/run/secrets/token
    client-certificate: /etc/c.crt
    client-key: /etc/c.key
    auth-provider: {name: gcp, config: {cmd-path: /bin/sh}}
";
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "kc", text);
    let e = load(&p, false).unwrap_err();
    for what in [
        "auth provider \"gcp\"",
        "(tokenFile)",
        "(client-certificate)",
        "(client-key)",
        "(certificate-authority)",
    ] {
        assert!(e.contains(what), "{what} not in {e}");
    }
    // The operator's own kubeconfig may use them.
    assert!(load(&p, true).is_ok());
}

#[test]
fn a_parse_error_never_quotes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\npassword: hunter2\n  - [oops\n";
    let p = write(dir.path(), "kc", text);
    for trusted in [false, true] {
        let e = load(&p, trusted).unwrap_err();
        assert!(e.contains("line"), "{e}");
        for secret in ["hunter2", "MIIEvQ", "PRIVATE KEY", "password"] {
            assert!(!e.contains(secret), "{secret} echoed in {e}");
        }
    }
    let p = write(dir.path(), "passwd", "root:x:0:0:root:/root:/bin/bash\n");
    let e = load(&p, false).unwrap_err();
    assert!(!e.contains("root"), "{e}");
}

#[test]
fn devices_and_fifos_are_not_read() {
    let e = load(Path::new("/dev/zero"), false).unwrap_err();
    assert!(e.contains("not a regular file"), "{e}");
    let e = load(Path::new("/nonexistent/kubeconfig"), true).unwrap_err();
    assert_eq!(e, "no such file");
}

#[test]
fn trust_follows_symlinks_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let real = write(dir.path(), "real", INLINE);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let other = write(dir.path(), "other", INLINE);
    let t = TrustedKubeconfigs::from_env(std::slice::from_ref(&real));
    assert!(t.trusts(&real));
    assert!(t.trusts(&link));
    assert!(!t.trusts(&other));
}
