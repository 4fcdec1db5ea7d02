//! `scripts/image.sh`, the image recipe users and CI run (issue 19, item 1),
//! on the binary under test:
//!
//! - reproducible: two builds into different places, with the temporary
//!   directories and times differing, give byte-identical archives and the
//!   same digest; a different tag changes only the index, not the manifest;
//! - what the image holds: one gzip layer of files owned 0:0 with mtime 0,
//!   the binary as entrypoint, user 65532:65532 (deploy/deployment.yaml's
//!   runAsUser, checked here too), Debian's CA bundle and SSL_CERT_FILE
//!   naming it, /etc/passwd naming 65532, no `created` date;
//! - complete: the packaged binary runs with only the image's own loader
//!   and libraries (`--version`).
//!
//! It runs on a real kubelet in tests/controlplane/real_kubelet.rs.

use std::path::Path;
use std::process::Command;

use crate::common::image::build as image;

fn tar(args: &[&str], dir: &Path) -> Vec<u8> {
    let o = Command::new("tar")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("tar");
    assert!(
        o.status.success(),
        "tar {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("JSON")
}

fn blob(layout: &Path, digest: &str) -> std::path::PathBuf {
    layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"))
}

#[test]
fn the_image_is_reproducible_non_root_with_ca_certificates_and_runs_from_its_own_libraries() {
    let d1 = tempfile::tempdir().expect("tempdir");
    let d2 = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (
        d1.path().join("a.oci.tar"),
        d2.path().join("nested/b.oci.tar"),
        d2.path().join("c.oci.tar"),
    );
    let digest = image("test", &a);
    std::thread::sleep(std::time::Duration::from_millis(1100)); // a later second
    assert_eq!(image("test", &b), digest, "same inputs, same digest");
    assert_eq!(
        std::fs::read(&a).expect("read"),
        std::fs::read(&b).expect("read"),
        "same inputs, same bytes"
    );
    assert_eq!(
        image("other", &c),
        digest,
        "a tag names the image, it is not in it"
    );
    let size = std::fs::metadata(&a).expect("stat").len();
    eprintln!(
        "image archive of the test binary: {} KiB, {digest}",
        size / 1024
    );

    // The layout.
    let layout = d1.path().join("layout");
    std::fs::create_dir(&layout).expect("mkdir");
    tar(&["-xf", a.to_str().expect("utf-8")], &layout);
    let index = json(&layout.join("index.json"));
    let m = &index["manifests"][0];
    assert_eq!(m["digest"], digest.as_str());
    assert_eq!(
        m["annotations"]["io.containerd.image.name"],
        "localhost/slicectl:test"
    );
    assert_eq!(
        m["annotations"]["org.opencontainers.image.ref.name"],
        "test"
    );
    let manifest = json(&blob(&layout, &digest));
    let config = json(&blob(
        &layout,
        manifest["config"]["digest"].as_str().expect("config"),
    ));
    assert_eq!(config["config"]["User"], "65532:65532");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/slicectl"])
    );
    assert!(
        config["config"]["Env"]
            .as_array()
            .expect("Env")
            .contains(&"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt".into())
    );
    assert!(config.get("created").is_none(), "no build date: {config}");
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1);
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );

    // The same uid as deploy/.
    let deployment = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/deployment.yaml"
    ))
    .expect("read deploy/deployment.yaml");
    assert!(deployment.contains("runAsUser: 65532") && deployment.contains("runAsGroup: 65532"));

    // The layer: owners, times, contents.
    let layer = blob(&layout, layers[0]["digest"].as_str().expect("layer"));
    let listing = String::from_utf8(tar(
        &[
            "--numeric-owner",
            "--full-time",
            "-tvzf",
            layer.to_str().expect("utf-8"),
        ],
        &layout,
    ))
    .expect("utf-8");
    for line in listing.lines() {
        assert!(line.contains(" 0/0 "), "owned by 0:0: {line}");
        assert!(line.contains(" 1970-01-01 00:00:00 "), "mtime 0: {line}");
    }
    for path in [
        "./usr/local/bin/slicectl",
        "./etc/ssl/certs/ca-certificates.crt",
        "./etc/passwd",
        "./lib64/ld-linux-x86-64.so.2",
    ] {
        assert!(
            listing.lines().any(|l| l.ends_with(path)),
            "{path} in the layer:\n{listing}"
        );
    }
    let rootfs = layout.join("rootfs");
    std::fs::create_dir(&rootfs).expect("mkdir");
    tar(&["-xzf", layer.to_str().expect("utf-8")], &rootfs);
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).expect("passwd");
    assert!(passwd.contains(":65532:65532:"), "{passwd}");
    let ca = std::fs::read_to_string(rootfs.join("etc/ssl/certs/ca-certificates.crt")).expect("ca");
    assert!(
        ca.matches("BEGIN CERTIFICATE").count() > 50,
        "a real CA bundle"
    );

    // The binary runs from the image's own loader and libraries only.
    let o = Command::new(rootfs.join("lib64/ld-linux-x86-64.so.2"))
        .arg("--library-path")
        .arg(rootfs.join("lib/x86_64-linux-gnu"))
        .arg(rootfs.join("usr/local/bin/slicectl"))
        .arg("--version")
        .env_clear()
        .output()
        .expect("the image's loader runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("slicectl "));
}
