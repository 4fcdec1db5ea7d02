//! Fuzz target `live`: see slicectl::fuzzing::live.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slicectl::fuzzing::live(data));
