//! The simulated GCE metadata server over HTTP: each protocol rule
//! (gcp-api.md §5) through a real client.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use slicectl_sim::metadata::{GuestAttributes, MetadataServer, VmMetadata};
use tokio::sync::watch;

fn vm() -> VmMetadata {
    VmMetadata {
        project_id: "example-project".to_owned(),
        numeric_project_id: "123456789012".to_owned(),
        zone: "us-central1-a".to_owned(),
        name: "slice-a-0".to_owned(),
        id: "8123456789012345678".to_owned(),
        machine_type: "ct5p-hightpu-4t".to_owned(),
        attributes: [
            ("kube-labels", "a=1"),
            ("slicectl-kubernetes-version", "1.36"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    }
}

struct Fixture {
    server: MetadataServer,
    tx: watch::Sender<VmMetadata>,
    guest: GuestAttributes,
    http: reqwest::Client,
}

async fn fixture() -> Fixture {
    // reqwest is built without a default TLS provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (tx, rx) = watch::channel(vm());
    let guest = GuestAttributes::default();
    let server = MetadataServer::start(rx, guest.clone()).await.unwrap();
    Fixture {
        server,
        tx,
        guest,
        http: reqwest::Client::new(),
    }
}

impl Fixture {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base_url())
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .header("Metadata-Flavor", "Google")
            .send()
            .await
            .unwrap()
    }

    async fn etag(&self, path: &str) -> String {
        let r = self.get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        r.headers()["etag"].to_str().unwrap().to_owned()
    }

    fn set_attr(&self, k: &str, v: Option<&str>) {
        self.tx.send_modify(|m| {
            match v {
                Some(v) => m.attributes.insert(k.to_owned(), v.to_owned()),
                None => m.attributes.remove(k),
            };
        });
    }
}

#[tokio::test]
async fn flavor_header_is_required_and_echoed() {
    let f = fixture().await;
    let none = f.http.get(f.url("instance/name")).send().await.unwrap();
    assert_eq!(none.status(), 403);
    let wrong = f
        .http
        .get(f.url("instance/name"))
        .header("Metadata-Flavor", "Amazon")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 403);
    let proxied = f
        .http
        .get(f.url("instance/name"))
        .header("Metadata-Flavor", "Google")
        .header("X-Forwarded-For", "10.0.0.9")
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), 403);
    let ok = f.get("instance/name").await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["metadata-flavor"], "Google");
    assert_eq!(ok.text().await.unwrap(), "slice-a-0");
}

#[tokio::test]
async fn instance_and_project_entries() {
    let f = fixture().await;
    for (path, want) in [
        ("instance/name", "slice-a-0"),
        ("instance/id", "8123456789012345678"),
        ("instance/zone", "projects/123456789012/zones/us-central1-a"),
        (
            "instance/machine-type",
            "projects/123456789012/machineTypes/ct5p-hightpu-4t",
        ),
        (
            "instance/hostname",
            "slice-a-0.us-central1-a.c.example-project.internal",
        ),
        ("project/project-id", "example-project"),
        ("project/numeric-project-id", "123456789012"),
    ] {
        let r = f.get(path).await;
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        assert_eq!(r.text().await.unwrap(), want, "{path}");
    }
    assert_eq!(f.get("instance/nothing").await.status(), 404);
    assert_eq!(f.get("nothing").await.status(), 404);
}

#[tokio::test]
async fn attributes_listing_value_and_recursive_json() {
    let f = fixture().await;
    let list = f.get("instance/attributes/").await;
    assert_eq!(list.status(), 200);
    assert_eq!(
        list.text().await.unwrap(),
        "kube-labels\nslicectl-kubernetes-version\n"
    );
    let v = f
        .get("instance/attributes/slicectl-kubernetes-version")
        .await;
    assert_eq!(v.headers()["content-type"], "text/plain");
    assert_eq!(v.text().await.unwrap(), "1.36");
    assert_eq!(f.get("instance/attributes/missing").await.status(), 404);
    let json = f.get("instance/attributes/?recursive=true").await;
    assert_eq!(json.headers()["content-type"], "application/json");
    let body: serde_json::Value = json.json().await.unwrap();
    assert_eq!(
        body,
        serde_json::json!({"kube-labels": "a=1", "slicectl-kubernetes-version": "1.36"})
    );
    // alt=json on a leaf, alt=text on a recursive directory.
    let leaf = f.get("instance/attributes/kube-labels?alt=json").await;
    assert_eq!(leaf.text().await.unwrap(), "\"a=1\"");
    let text = f.get("instance/attributes/?recursive=true&alt=text").await;
    assert_eq!(
        text.text().await.unwrap(),
        "kube-labels a=1\nslicectl-kubernetes-version 1.36\n"
    );
    // The whole instance, camelCase as Google's recursive JSON.
    let inst: serde_json::Value = f
        .get("instance/?recursive=true")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(inst["name"], "slice-a-0");
    assert_eq!(
        inst["machineType"],
        "projects/123456789012/machineTypes/ct5p-hightpu-4t"
    );
    assert_eq!(inst["attributes"]["kube-labels"], "a=1");
}

#[tokio::test]
async fn bad_queries_are_400() {
    let f = fixture().await;
    for q in [
        "instance/attributes/?alt=json",
        "instance/attributes/?alt=text",
        "instance/name?alt=xml",
        "instance/attributes/?wait_for_change=true",
        "instance/name?wait_for_change=true&timeout_sec=0",
    ] {
        assert_eq!(f.get(q).await.status(), 400, "{q}");
    }
}

#[tokio::test]
async fn etag_rules() {
    let f = fixture().await;
    let a = f.etag("instance/attributes/kube-labels").await;
    assert_eq!(a.len(), 16);
    assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(a, f.etag("instance/attributes/kube-labels?alt=json").await);
    assert_eq!(a, f.etag("instance/attributes/kube-labels?alt=text").await);
    assert_eq!(a, f.etag("instance/attributes/kube-labels/").await);
    let rec = f.etag("instance/attributes/?recursive=true").await;
    assert_eq!(
        rec,
        f.etag("instance/attributes?recursive=true&alt=text").await
    );
    assert_ne!(rec, f.etag("instance/attributes/").await);
    // Changes with the value, reverts with it.
    f.set_attr("kube-labels", Some("a=2"));
    let changed = f.etag("instance/attributes/kube-labels").await;
    assert_ne!(changed, a);
    assert_ne!(rec, f.etag("instance/attributes/?recursive=true").await);
    f.set_attr("kube-labels", Some("a=1"));
    assert_eq!(a, f.etag("instance/attributes/kube-labels").await);
    assert_eq!(rec, f.etag("instance/attributes/?recursive=true").await);
}

#[tokio::test]
async fn wait_for_change_returns_at_once_on_a_stale_etag() {
    let f = fixture().await;
    let t = Instant::now();
    let r = f
        .get("instance/attributes/?recursive=true&wait_for_change=true&last_etag=0000000000000000&timeout_sec=30")
        .await;
    assert_eq!(r.status(), 200);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // guest-agent's first poll: last_etag=NONE.
    let t = Instant::now();
    let r = f
        .get("instance/attributes/?recursive=true&wait_for_change=true&last_etag=NONE&timeout_sec=30")
        .await;
    assert_eq!(r.status(), 200);
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn wait_for_change_times_out_with_the_unchanged_value() {
    let f = fixture().await;
    let tag = f.etag("instance/attributes/?recursive=true").await;
    let t = Instant::now();
    let r = f
        .get(&format!(
            "instance/attributes/?recursive=true&wait_for_change=true&last_etag={tag}&timeout_sec=2"
        ))
        .await;
    assert!(t.elapsed() >= Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["etag"].to_str().unwrap(), tag);
}

#[tokio::test]
async fn wait_for_change_wakes_on_a_change() {
    let f = fixture().await;
    let tag = f.etag("instance/attributes/?recursive=true").await;
    let url = f.url(&format!(
        "instance/attributes/?recursive=true&wait_for_change=true&last_etag={tag}&timeout_sec=60"
    ));
    let http = f.http.clone();
    let waiter = tokio::spawn(async move {
        let t = Instant::now();
        let r = http
            .get(url)
            .header("Metadata-Flavor", "Google")
            .send()
            .await
            .unwrap();
        let etag = r.headers()["etag"].to_str().unwrap().to_owned();
        let body: serde_json::Value = r.json().await.unwrap();
        (t.elapsed(), etag, body)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A change elsewhere does not wake a leaf's waiter, but one inside the
    // watched directory wakes this one.
    f.set_attr("kubeadm-join-token", Some("abcdef.0123456789abcdef"));
    let (elapsed, etag, body) = waiter.await.unwrap();
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_ne!(etag, tag);
    assert_eq!(body["kubeadm-join-token"], "abcdef.0123456789abcdef");

    // Leaf wait without last_etag: waits for the next change of that leaf
    // only.
    let url = f.url("instance/attributes/kube-labels?wait_for_change=true&timeout_sec=60");
    let http = f.http.clone();
    let waiter = tokio::spawn(async move {
        let r = http
            .get(url)
            .header("Metadata-Flavor", "Google")
            .send()
            .await
            .unwrap();
        r.text().await.unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    f.set_attr("other", Some("x"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "woke on an unrelated change");
    f.set_attr("kube-labels", Some("b=2"));
    assert_eq!(waiter.await.unwrap(), "b=2");
}

#[tokio::test]
async fn guest_attributes_put_get_delete() {
    let f = fixture().await;
    let url = f.url("instance/guest-attributes/slicectl/bootstrap");
    let put = f
        .http
        .put(&url)
        .header("Metadata-Flavor", "Google")
        .body("joining")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let want: BTreeMap<String, String> =
        [("slicectl/bootstrap".to_owned(), "joining".to_owned())].into();
    assert_eq!(*f.guest.lock().unwrap(), want);
    assert_eq!(
        f.get("instance/guest-attributes/slicectl/bootstrap")
            .await
            .text()
            .await
            .unwrap(),
        "joining"
    );
    assert_eq!(
        f.get("instance/guest-attributes/slicectl/")
            .await
            .text()
            .await
            .unwrap(),
        "bootstrap\n"
    );
    // Without the flavor header the write is refused.
    let anon = f.http.put(&url).body("x").send().await.unwrap();
    assert_eq!(anon.status(), 403);
    let del = f
        .http
        .delete(&url)
        .header("Metadata-Flavor", "Google")
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 200);
    assert!(f.guest.lock().unwrap().is_empty());
    assert_eq!(
        f.get("instance/guest-attributes/slicectl/bootstrap")
            .await
            .status(),
        404
    );
    let bad = f
        .http
        .put(f.url("instance/guest-attributes/sl!ce/key"))
        .header("Metadata-Flavor", "Google")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn metadata_is_read_only() {
    let f = fixture().await;
    let r = f
        .http
        .put(f.url("instance/attributes/kube-labels"))
        .header("Metadata-Flavor", "Google")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
}
