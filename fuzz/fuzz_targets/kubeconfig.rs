//! Fuzz target `kubeconfig`: see slicectl::fuzzing::kubeconfig.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slicectl::fuzzing::kubeconfig(data));
