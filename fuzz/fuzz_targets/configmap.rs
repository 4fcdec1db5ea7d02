//! Fuzz target `configmap`: see slicectl::fuzzing::configmap.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slicectl::fuzzing::configmap(data));
