#![cfg(test)]
//! Unit tests of [`super`]: how adoption reads MIG names and descriptions.

use super::*;

#[test]
fn names_split_as_slicectl_names_migs() {
    assert_eq!(split_name("llm-0"), Some(("llm".into(), 0)));
    assert_eq!(split_name("llm-01"), None);
    assert_eq!(split_name("llm"), None);
    assert!(tpu_operator_name("train-mig-0a1b2c3d", "mig"));
    assert!(!tpu_operator_name("train-mig-0", "mig"));
    assert!(!tpu_operator_name("train-template-0a1b2c3d", "mig"));
}

#[test]
fn a_tpu_operator_mig_is_the_slice_of_its_group() {
    assert_eq!(tpu_operator_group("grp-mig-1a2b3c4d"), Some("grp"));
    assert_eq!(tpu_operator_group("a-b-mig-0000ffff"), Some("a-b"));
    assert_eq!(tpu_operator_group("grp-mig-1a2b3c"), None);
    assert_eq!(tpu_operator_group("-mig-1a2b3c4d"), None);
    assert_eq!(tpu_operator_group("grp-template-1a2b3c4d"), None);
}

#[test]
fn a_released_description_says_whose_it_was() {
    let o = Ownership {
        owner: "team".into(),
        slice: "grp".into(),
        replica: 0,
        target: None,
        spec_hash: None,
        hash_version: None,
        prevent_destroy: false,
    };
    let d = released_description(&o);
    let back = released_from(&d).unwrap();
    assert_eq!(
        (back.owner, back.slice, back.replica),
        ("team".into(), "grp".into(), 0)
    );
    assert!(released_from("released by slicectl (owner a, slice b)").is_none());
    assert!(released_from("made by a script").is_none());
    assert!(Ownership::from_description(&d).is_none(), "{d}");
}
