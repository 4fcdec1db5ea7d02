//! Ownership labels: everything slicectl needs to know about what it owns is
//! written onto the live resources. No state file.

use std::collections::BTreeMap;

use crate::resource::LabelLookup;

/// Label key prefix reserved for slicectl.
pub const PREFIX: &str = "slicectl.dev/";
/// `slicectl.dev/managed-by` = `slicectl`.
pub const MANAGED_BY: &str = "slicectl.dev/managed-by";
/// `slicectl.dev/owner` = the target's owner id.
pub const OWNER: &str = "slicectl.dev/owner";
/// `slicectl.dev/slice` = slice name.
pub const SLICE: &str = "slicectl.dev/slice";
/// `slicectl.dev/replica` = replica index.
pub const REPLICA: &str = "slicectl.dev/replica";
/// `slicectl.dev/target` = the name of the Target that last wrote it: the
/// source identity (see [`Ownership::target`]).
pub const TARGET: &str = "slicectl.dev/target";
/// `slicectl.dev/spec-hash` = selective hash of the replacement-class fields.
pub const SPEC_HASH: &str = "slicectl.dev/spec-hash";
/// `slicectl.dev/hash-version` = version of the hash function.
pub const HASH_VERSION: &str = "slicectl.dev/hash-version";
/// `slicectl.dev/prevent-destroy` = `true` when protected.
pub const PREVENT_DESTROY: &str = "slicectl.dev/prevent-destroy";
/// Value of [`MANAGED_BY`].
pub const MANAGER: &str = "slicectl";

/// Who owns a live resource and what it was rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    /// Owner id.
    pub owner: String,
    /// Slice name.
    pub slice: String,
    /// Replica index.
    pub replica: u32,
    /// The Target that last wrote it, on the resource that holds a slice
    /// replica's capacity (a node pool's label, a MIG's description): which
    /// source it came from. Two spec sources that share an ownerId do not
    /// prune each other's slices, because each declares other Targets.
    /// `None` on dependents and on what was made before the stamp existed.
    pub target: Option<String>,
    /// Stored selective hash.
    pub spec_hash: Option<String>,
    /// Stored hash version.
    pub hash_version: Option<String>,
    /// Protected against destruction.
    pub prevent_destroy: bool,
}

impl Ownership {
    /// Reads ownership from Kubernetes-style labels (node pool `config.labels`).
    pub fn from_labels<L: LabelLookup + ?Sized>(labels: &L) -> Option<Ownership> {
        if labels.label(MANAGED_BY).map(String::as_str) != Some(MANAGER) {
            return None;
        }
        // A non-empty owner, and a replica written as slicectl writes it (no
        // sign, no leading zero). The slice is empty on a shared resource
        // (the device plugin).
        let replica_text = labels.label(REPLICA)?;
        let replica: u32 = replica_text.parse().ok()?;
        if replica.to_string() != *replica_text {
            return None;
        }
        Some(Ownership {
            owner: labels.label(OWNER).filter(|v| !v.is_empty())?.clone(),
            slice: labels.label(SLICE)?.clone(),
            replica,
            target: labels.label(TARGET).filter(|v| !v.is_empty()).cloned(),
            spec_hash: labels.label(SPEC_HASH).cloned(),
            hash_version: labels.label(HASH_VERSION).cloned(),
            prevent_destroy: labels.label(PREVENT_DESTROY).map(String::as_str) == Some("true"),
        })
    }

    /// Writes ownership as labels.
    pub fn to_labels(&self) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        l.insert(MANAGED_BY.to_string(), MANAGER.to_string());
        l.insert(OWNER.to_string(), self.owner.clone());
        l.insert(SLICE.to_string(), self.slice.clone());
        l.insert(REPLICA.to_string(), self.replica.to_string());
        if let Some(t) = &self.target {
            l.insert(TARGET.to_string(), t.clone());
        }
        if let Some(h) = &self.spec_hash {
            l.insert(SPEC_HASH.to_string(), h.clone());
        }
        if let Some(v) = &self.hash_version {
            l.insert(HASH_VERSION.to_string(), v.clone());
        }
        if self.prevent_destroy {
            l.insert(PREVENT_DESTROY.to_string(), "true".to_string());
        }
        l
    }

    /// Compute resource policies have no labels: ownership is written into
    /// the description as `slicectl: key=value ...`, with
    /// `prevent-destroy=true` last when protected (only the MIG, which
    /// holds a self-managed slice's capacity, is rendered protected). A
    /// description without the token reads as unprotected, so descriptions
    /// written before the token existed parse as they always did.
    pub fn to_description(&self) -> String {
        let mut s = format!(
            "slicectl: managed-by={MANAGER} owner={} slice={} replica={}",
            self.owner, self.slice, self.replica
        );
        if let Some(t) = &self.target {
            s.push_str(&format!(" target={t}"));
        }
        if let Some(h) = &self.spec_hash {
            s.push_str(&format!(" spec-hash={h}"));
        }
        if let Some(v) = &self.hash_version {
            s.push_str(&format!(" hash-version={v}"));
        }
        if self.prevent_destroy {
            s.push_str(" prevent-destroy=true");
        }
        s
    }

    /// [`Ownership::to_description`] with the protection stamp always
    /// written, `prevent-destroy=true` or `prevent-destroy=false`: the
    /// description of a MIG, whose stamp is authoritative. A description
    /// with neither token was written before slicectl stamped MIGs (never
    /// recorded), which [`description_stamp`] tells apart from "recorded
    /// unprotected".
    pub fn to_stamped_description(&self) -> String {
        let s = self.to_description();
        if self.prevent_destroy {
            s
        } else {
            format!("{s} {PREVENT_DESTROY_TOKEN}=false")
        }
    }

    /// Parses [`Ownership::to_description`], strictly: exactly the format
    /// slicectl writes (`slicectl: ` then `managed-by`, `owner`, `slice`,
    /// `replica`, and optionally `target`, `spec-hash`, `hash-version` and
    /// `prevent-destroy=true|false`, in that order, each once, single
    /// spaces, nothing else). Anything else (a duplicated key, trailing
    /// text, an unknown key) is someone else's description: the resource is
    /// foreign, shown as unmanaged and never deleted.
    pub fn from_description(description: &str) -> Option<Ownership> {
        let rest = description.strip_prefix("slicectl: ")?;
        let mut parts = rest.split(' ');
        let mut take = |key: &str| -> Option<&str> {
            let (k, v) = parts.next()?.split_once('=')?;
            (k == key && !v.is_empty()).then_some(v)
        };
        if take("managed-by")? != MANAGER {
            return None;
        }
        let owner = take("owner")?.to_string();
        let slice = take("slice")?.to_string();
        let replica_text = take("replica")?;
        let replica: u32 = replica_text.parse().ok()?;
        if replica.to_string() != replica_text {
            return None;
        }
        let mut own = Ownership {
            owner,
            slice,
            replica,
            target: None,
            spec_hash: None,
            hash_version: None,
            prevent_destroy: false,
        };
        // The optional keys, in order, each at most once.
        let mut optional = [
            "target",
            "spec-hash",
            "hash-version",
            ADOPTED_TOKEN,
            PREVENT_DESTROY_TOKEN,
        ]
        .into_iter();
        for part in parts {
            let (k, v) = part.split_once('=')?;
            if v.is_empty() {
                return None;
            }
            // Advance past keys this one skips; a key out of order or seen
            // twice is not found and refuses the description.
            optional.find(|key| *key == k)?;
            match k {
                "target" => own.target = Some(v.to_string()),
                "spec-hash" => own.spec_hash = Some(v.to_string()),
                "hash-version" => own.hash_version = Some(v.to_string()),
                // Read by [`description_adopted`]; only `true` is written.
                ADOPTED_TOKEN if v != "true" => return None,
                ADOPTED_TOKEN => {}
                _ => match v {
                    "true" => own.prevent_destroy = true,
                    "false" => {}
                    _ => return None,
                },
            }
        }
        Some(own)
    }

    /// [`Ownership::from_description`] of a resource named `name`, which
    /// must be the name slicectl gives that slice replica's resource of
    /// this kind (`expected`): a description naming another slice or
    /// replica than the resource's own name is foreign too.
    pub fn from_description_named(
        description: &str,
        name: &str,
        expected: impl Fn(&str, u32) -> String,
    ) -> Option<Ownership> {
        Ownership::from_description(description).filter(|o| expected(&o.slice, o.replica) == name)
    }
}

/// The key of the protection stamp in a description.
const PREVENT_DESTROY_TOKEN: &str = "prevent-destroy";

/// The key of the adoption marker in a MIG's description: `adopted=true`
/// says the instance template and workload policy the MIG uses were
/// adopted with it, so they are its slice replica's by reference (their
/// own descriptions cannot change in place). Written by `slicectl adopt`
/// before the protection stamp.
const ADOPTED_TOKEN: &str = "adopted";

/// Whether a slicectl description carries the adoption marker.
pub fn description_adopted(description: &str) -> bool {
    Ownership::from_description(description).is_some()
        && description.split(' ').any(|p| p == "adopted=true")
}

/// `description` with the adoption marker, before its protection stamp
/// (the order [`Ownership::from_description`] takes); unchanged when it
/// has one.
pub fn with_adopted(description: &str) -> String {
    if description.split(' ').any(|p| p == "adopted=true") {
        return description.to_string();
    }
    let (head, stamp): (Vec<&str>, Vec<&str>) = description.split(' ').partition(|p| {
        p.split_once('=')
            .is_none_or(|(k, _)| k != PREVENT_DESTROY_TOKEN)
    });
    let mut parts = head;
    parts.push("adopted=true");
    parts.extend(stamp);
    parts.join(" ")
}

/// The protection stamp a slicectl description records: `Some(true)` or
/// `Some(false)` when it says (see [`Ownership::to_stamped_description`]),
/// `None` when it carries no stamp at all (written before MIGs were
/// stamped, or not a slicectl description).
pub fn description_stamp(description: &str) -> Option<bool> {
    let rest = description.strip_prefix("slicectl: ")?;
    rest.split_whitespace()
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| *k == PREVENT_DESTROY_TOKEN)
        .map(|(_, v)| v == "true")
}

/// `description` with its protection stamp set to `protected` (replacing
/// any stamp it has, appending one otherwise), everything else kept: how a
/// MIG's stamp is kept in step in place.
pub fn with_description_stamp(description: &str, protected: bool) -> String {
    let kept: Vec<&str> = description
        .split(' ')
        .filter(|p| {
            p.split_once('=')
                .is_none_or(|(k, _)| k != PREVENT_DESTROY_TOKEN)
        })
        .collect();
    format!("{} {PREVENT_DESTROY_TOKEN}={protected}", kept.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Ownership {
        Ownership {
            owner: "team-llm".into(),
            slice: "llm".into(),
            replica: 2,
            target: None,
            spec_hash: Some("abc".into()),
            hash_version: Some("v1".into()),
            prevent_destroy: true,
        }
    }

    #[test]
    fn labels_round_trip() {
        assert_eq!(
            Ownership::from_labels(&sample().to_labels()),
            Some(sample())
        );
        let mut l = sample().to_labels();
        l.insert(MANAGED_BY.into(), "someone-else".into());
        assert_eq!(Ownership::from_labels(&l), None);
    }

    #[test]
    fn description_round_trip() {
        let mut o = sample();
        o.prevent_destroy = false;
        assert_eq!(Ownership::from_description(&o.to_description()), Some(o));
        assert_eq!(Ownership::from_description("made by hand"), None);
        // The protection stamp round-trips, and is written only when set.
        let o = sample();
        assert!(o.to_description().ends_with(" prevent-destroy=true"));
        assert_eq!(Ownership::from_description(&o.to_description()), Some(o));
    }

    #[test]
    fn a_description_written_before_the_stamp_existed_reads_unprotected() {
        // The exact format of every description written so far.
        let old = "slicectl: managed-by=slicectl owner=team-llm slice=llm replica=2 spec-hash=abc hash-version=v1";
        let mut want = sample();
        want.prevent_destroy = false;
        assert_eq!(Ownership::from_description(old), Some(want.clone()));
        assert_eq!(want.to_description(), old);
        assert_eq!(description_stamp(old), None);
    }

    /// The Target stamp: written after the replica on the resource that
    /// holds the capacity, read back from labels and descriptions, and in
    /// its place only (a `target=` elsewhere is foreign).
    #[test]
    fn the_target_stamp_round_trips_in_its_place() {
        let mut o = sample();
        o.target = Some("train".into());
        let d = o.to_stamped_description();
        assert!(d.starts_with("slicectl: managed-by=slicectl owner=team-llm slice=llm replica=2 target=train spec-hash="), "{d}");
        assert_eq!(Ownership::from_description(&d), Some(o.clone()));
        assert_eq!(Ownership::from_labels(&o.to_labels()), Some(o.clone()));
        assert_eq!(o.to_labels().get(TARGET).map(String::as_str), Some("train"));
        let late = "slicectl: managed-by=slicectl owner=team-llm slice=llm replica=2 spec-hash=abc target=train";
        assert_eq!(Ownership::from_description(late), None);
        let twice =
            "slicectl: managed-by=slicectl owner=team-llm slice=llm replica=2 target=a target=b";
        assert_eq!(Ownership::from_description(twice), None);
        let empty = "slicectl: managed-by=slicectl owner=team-llm slice=llm replica=2 target=";
        assert_eq!(Ownership::from_description(empty), None);
    }

    /// The adoption marker sits before the protection stamp, survives a
    /// change of the stamp, and is read only from a slicectl description.
    #[test]
    fn the_adoption_marker_round_trips_before_the_stamp() {
        let o = sample();
        let d = with_adopted(&o.to_stamped_description());
        assert!(d.ends_with(" adopted=true prevent-destroy=true"), "{d}");
        assert_eq!(Ownership::from_description(&d), Some(o.clone()));
        assert!(description_adopted(&d));
        assert_eq!(with_adopted(&d), d);
        let off = with_description_stamp(&d, false);
        assert!(description_adopted(&off), "{off}");
        assert_eq!(description_stamp(&off), Some(false));
        assert!(!description_adopted(&o.to_stamped_description()));
        assert!(!description_adopted("made by hand adopted=true"));
        let bad = "slicectl: managed-by=slicectl owner=o slice=s replica=0 adopted=yes";
        assert_eq!(Ownership::from_description(bad), None);
        let late = "slicectl: managed-by=slicectl owner=o slice=s replica=0 prevent-destroy=false adopted=true";
        assert_eq!(Ownership::from_description(late), None);
    }

    #[test]
    fn a_stamped_description_says_unprotected_too() {
        let mut o = sample();
        assert_eq!(description_stamp(&o.to_stamped_description()), Some(true));
        o.prevent_destroy = false;
        let d = o.to_stamped_description();
        assert!(d.ends_with(" prevent-destroy=false"), "{d}");
        assert_eq!(description_stamp(&d), Some(false));
        assert_eq!(Ownership::from_description(&d), Some(o.clone()));
        // Set in place, whatever was there.
        let old = o.to_description();
        assert_eq!(with_description_stamp(&old, false), d);
        let on = with_description_stamp(&d, true);
        assert_eq!(description_stamp(&on), Some(true));
        assert_eq!(with_description_stamp(&on, false), d);
        assert_eq!(description_stamp("made by hand"), None);
    }

    /// Issue 24: ownership read back from a description is strict. Only the
    /// exact format slicectl writes is slicectl's; a duplicated key,
    /// trailing text, an unknown or out-of-order key, or a slice and replica
    /// that do not agree with the resource's name make it foreign (shown as
    /// unmanaged, never deleted). Each of these was accepted before.
    #[test]
    fn only_the_exact_description_format_is_slicectls() {
        let good = "slicectl: managed-by=slicectl owner=team-c slice=llm replica=2 spec-hash=abc hash-version=v1";
        assert!(Ownership::from_description(good).is_some());
        for bad in [
            "slicectl: managed-by=slicectl owner=team-c owner=owner-b slice=llm replica=2",
            "slicectl: managed-by=slicectl owner=team-c slice=llm replica=2 hash-version=v1 -- do not delete, owned by team-c",
            "slicectl: managed-by=slicectl owner=team-c slice=llm replica=2 note=mine",
            "slicectl: managed-by=slicectl owner=team-c slice=llm replica=2 hash-version=v1 spec-hash=abc",
            "slicectl: managed-by=slicectl owner=team-c slice=llm replica=2 spec-hash=abc spec-hash=abc",
            "slicectl: managed-by=slicectl owner=team-c slice=llm replica=02",
            "slicectl: managed-by=slicectl owner=team-c slice=llm replica=2 prevent-destroy=yes",
            "slicectl: managed-by=slicectl  owner=team-c slice=llm replica=2",
            "slicectl: managed-by=slicectl owner= slice=llm replica=2",
            "slicectl: owner=team-c managed-by=slicectl slice=llm replica=2",
        ] {
            assert_eq!(Ownership::from_description(bad), None, "{bad}");
        }
        // The name must be the one slicectl gives that slice replica.
        let named = |name: &str| {
            Ownership::from_description_named(good, name, crate::spec::names::workload_policy)
        };
        assert!(named("llm-2-wp").is_some());
        assert_eq!(named("other-2-wp"), None);
        assert_eq!(named("llm-3-wp"), None);
    }
}
