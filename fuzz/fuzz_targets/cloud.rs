//! Fuzz target `cloud`: see slicectl::fuzzing::cloud.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slicectl::fuzzing::cloud(data));
