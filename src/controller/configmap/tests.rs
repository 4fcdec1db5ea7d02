#![cfg(test)]
//! Unit tests of the ConfigMap spec source.

use super::*;

#[test]
fn keys_are_file_names_and_only_spec_files_count() {
    let s = Snapshot::Data(BTreeMap::from([
        ("b.yaml".to_string(), b"B".to_vec()),
        ("a.yml".to_string(), b"A".to_vec()),
        ("README.md".to_string(), b"x".to_vec()),
    ]));
    let f = s.files("specs").unwrap().unwrap().files;
    let paths: Vec<_> = f.iter().map(|f| f.path.display().to_string()).collect();
    assert_eq!(paths, vec!["specs/a.yml", "specs/b.yaml"]);
    assert_eq!(f[1].text, "B");
    assert!(Snapshot::Absent.files("specs").is_none());
    assert_eq!(snapshot(None), Snapshot::Absent);
    assert_eq!(
        snapshot(Some(ConfigMap::default())),
        Snapshot::Data(BTreeMap::new())
    );
}

/// The kubelet mounts `binaryData` keys as files, so the API reads them
/// by the same rule: a spec-named one is a spec file (an error when it is
/// not UTF-8, as in a mounted directory).
#[test]
fn binary_data_keys_are_read_like_mounted_files() {
    use k8s_openapi::ByteString;
    let cm = |bytes: &[u8]| ConfigMap {
        data: Some(BTreeMap::from([("a.yaml".to_string(), "A".to_string())])),
        binary_data: Some(BTreeMap::from([
            ("b.yaml".to_string(), ByteString(bytes.to_vec())),
            ("blob.bin".to_string(), ByteString(vec![0xff])),
        ])),
        ..ConfigMap::default()
    };
    let listing = snapshot(Some(cm(b"B"))).files("specs").unwrap().unwrap();
    let texts: Vec<_> = listing.files.iter().map(|f| f.text.as_str()).collect();
    assert_eq!(texts, vec!["A", "B"]);
    let err = snapshot(Some(cm(b"B\xff")))
        .files("specs")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::NotUtf8 { offset: 1, path } if path.ends_with("specs/b.yaml")),
        "{err}"
    );
}

/// A label selector's ConfigMaps are one listing: files as `NAME/KEY`
/// sorted by ConfigMap then key, stamped by content (the stamp moves with
/// any file and with a ConfigMap leaving the set); none matching is no
/// listing; a file that is not UTF-8 names its ConfigMap and key.
#[test]
fn selected_configmaps_are_one_stamped_listing() {
    let data = |pairs: &[(&str, &[u8])]| -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_vec()))
            .collect()
    };
    let set = Selected(BTreeMap::from([
        (
            "team-b".to_string(),
            data(&[("x.yaml", b"X"), ("x.yaml.bak", b"n")]),
        ),
        (
            "team-a".to_string(),
            data(&[("z.yaml", b"Z"), ("a.yaml", b"A")]),
        ),
    ]));
    let l = set.files().unwrap().unwrap();
    let paths: Vec<_> = l
        .files
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    assert_eq!(paths, ["team-a/a.yaml", "team-a/z.yaml", "team-b/x.yaml"]);
    assert_eq!(l.skipped.len(), 1);
    assert!(l.skipped[0].path.ends_with("team-b/x.yaml.bak"));
    assert_eq!(l.stamp.as_str().len(), 64);
    assert_eq!(
        set.files().unwrap().unwrap().stamp,
        l.stamp,
        "same set, same stamp"
    );

    let mut fewer = set.clone();
    fewer.0.remove("team-b");
    assert_ne!(fewer.files().unwrap().unwrap().stamp, l.stamp);
    let mut edited = set.clone();
    edited
        .0
        .get_mut("team-a")
        .unwrap()
        .insert("a.yaml".into(), b"A2".to_vec());
    assert_ne!(edited.files().unwrap().unwrap().stamp, l.stamp);

    assert!(Selected::default().files().is_none(), "none matching");
    let bad = Selected(BTreeMap::from([(
        "team-c".to_string(),
        data(&[("c.yaml", b"\xff")]),
    )]));
    let err = bad.files().unwrap().unwrap_err();
    assert!(err.to_string().contains("team-c/c.yaml"), "{err}");
}
