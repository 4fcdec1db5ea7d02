//! The README's "Running in a cluster" steps, run as written (issue 19,
//! item 6: every step is one a user can copy), on the binary under test:
//!
//! 1. `scripts/image.sh --tag T` writes `target/image/slicectl-T.oci.tar`,
//!    the archive step 2 pushes;
//! 2. Debian's `skopeo` reads that archive (`oci-archive:`) and copies it
//!    with its digest unchanged (to a local OCI layout here: this machine
//!    has no registry);
//! 3. the overlay step 3 writes, run by bash exactly as in the README,
//!    renders with kubectl's kustomize to the Deployment with the pushed
//!    image and the ServiceAccount with the Google service account, and no
//!    placeholder left.

use std::path::Path;
use std::process::Command;

use crate::common::image::build as image;

/// The README's shell block under "## Running in a cluster".
fn deploy_steps() -> Vec<String> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let section = readme
        .split("\n## Running in a cluster\n")
        .nth(1)
        .expect("README has \"## Running in a cluster\"");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a ```sh block in the section");
    block.lines().map(str::to_string).collect()
}

/// The one line starting with `prefix`.
fn line<'a>(steps: &'a [String], prefix: &str) -> &'a str {
    let found: Vec<&String> = steps.iter().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(found.len(), 1, "one line starting {prefix:?} in {steps:#?}");
    found[0]
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| {
        panic!(
            "{:?} does not run ({e}): install it (skopeo is Debian's package; .ci/run installs it)",
            cmd.get_program()
        )
    });
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
        }
    }
}

#[test]
fn the_readmes_build_push_and_overlay_steps_work_as_written() {
    let steps = deploy_steps();

    // Step 1: the build, and the archive it writes by default.
    let build = line(&steps, "scripts/image.sh ");
    let tag = build
        .split_whitespace()
        .skip_while(|w| *w != "--tag")
        .nth(1)
        .expect("step 1 names a --tag");
    let archive_rel = format!("target/image/slicectl-{tag}.oci.tar");

    // Step 2: skopeo reads that archive and keeps its digest.
    let push = line(&steps, "skopeo copy ");
    let words: Vec<&str> = push.split_whitespace().collect();
    assert_eq!(
        words.get(2).copied(),
        Some(format!("oci-archive:{archive_rel}").as_str()),
        "step 2 pushes what step 1 wrote"
    );
    let pushed = words
        .get(3)
        .and_then(|w| w.strip_prefix("docker://"))
        .expect("step 2 pushes to docker://REGISTRY/NAME:TAG");
    assert!(pushed.ends_with(&format!(":{tag}")), "{pushed}");
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join(&archive_rel);
    let digest = image(tag, &archive);
    let inspect: serde_json::Value = serde_json::from_str(&run(
        Command::new("skopeo").args(["inspect", &format!("oci-archive:{}", archive.display())])
    ))
    .expect("skopeo inspect prints JSON");
    assert_eq!(inspect["Digest"], digest.as_str());
    let layout = dir.path().join("registry");
    run(Command::new("skopeo").args([
        "copy",
        "--quiet",
        &format!("oci-archive:{}", archive.display()),
        &format!("oci:{}:{tag}", layout.display()),
    ]));
    let index: serde_json::Value = serde_json::from_slice(
        &std::fs::read(layout.join("index.json")).expect("the copy's index.json"),
    )
    .expect("JSON");
    assert_eq!(
        index["manifests"][0]["digest"],
        digest.as_str(),
        "skopeo copies the image unchanged"
    );

    // Step 3: the overlay, written by the README's own lines, beside deploy/.
    let start = steps
        .iter()
        .position(|l| l.starts_with("mkdir -p "))
        .expect("step 3 makes the overlay directory");
    let end = start
        + steps[start..]
            .iter()
            .position(|l| l == "EOF")
            .expect("the overlay's heredoc ends with EOF");
    copy_dir(
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy")),
        &dir.path().join("deploy"),
    );
    run(Command::new("bash")
        .args(["-euc", &steps[start..=end].join("\n")])
        .current_dir(dir.path()));
    let apply = line(&steps, "kubectl apply ");
    let overlay = apply
        .split_whitespace()
        .skip_while(|w| *w != "-k")
        .nth(1)
        .expect("step 3 applies with -k DIR");
    let rendered = run(Command::new("kubectl")
        .args(["kustomize", overlay])
        .current_dir(dir.path()));
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&rendered).expect("kustomize output is YAML");
    let find = |kind: &str| {
        docs.iter()
            .find(|d| d["kind"] == kind)
            .unwrap_or_else(|| panic!("a {kind} in the overlay's output"))
    };
    assert_eq!(
        find("Deployment")["spec"]["template"]["spec"]["containers"][0]["image"],
        pushed,
        "the Deployment runs the image step 2 pushed"
    );
    let gsa = &find("ServiceAccount")["metadata"]["annotations"]["iam.gke.io/gcp-service-account"];
    let project = pushed.split('/').nth(1).expect("REGISTRY/PROJECT/…");
    assert_eq!(
        gsa,
        &serde_json::Value::from(format!("slicectl@{project}.iam.gserviceaccount.com")),
        "the ServiceAccount names the Google service account of the same project"
    );
    assert!(
        !rendered.contains("PROJECT_ID"),
        "no placeholder is left:\n{rendered}"
    );
    assert!(
        find("ConfigMap")["data"]
            .as_object()
            .is_some_and(|d| !d.is_empty())
    );
}
