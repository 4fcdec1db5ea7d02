//! Fuzz target `spec`: see slicectl::fuzzing::spec.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slicectl::fuzzing::spec(data));
