//! The bodies of the front-end fuzz targets (`fuzz/`, cargo-fuzz) and of
//! their stable replay (`tests/integration/fuzz_front.rs`): one function per
//! target, taking the raw bytes an outside party could hand slicectl, and
//! panicking only when an invariant breaks (a crash the fuzzer reports):
//!
//! - decoding never panics, whatever the bytes;
//! - every spec diagnostic names its file and a line and column inside it;
//! - a value that decodes re-encodes and decodes to the same value where the
//!   format round-trips (spec documents, ConfigMaps, saved plans,
//!   kubeconfigs, the cloud's wire types, observed resource bodies).
//!
//! Compiled for tests and the `test-support` feature only; never in the
//! product. See docs/testing.md, "Fuzzing the front end".

mod cloud;
mod kubeconfig;
mod live;
mod planfile;
mod spec;

pub use cloud::cloud;
pub use kubeconfig::kubeconfig;
pub use live::live;
pub use planfile::planfile;
pub use spec::{configmap, spec};

/// A fuzz target: the bytes of one input.
pub type Target = fn(&[u8]);

/// Every target by name (the name of its `fuzz/fuzz_targets/NAME.rs` and of
/// its corpus directory `fuzz/corpus/NAME/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("spec", spec),
    ("configmap", configmap),
    ("planfile", planfile),
    ("kubeconfig", kubeconfig),
    ("cloud", cloud),
    ("live", live),
];
