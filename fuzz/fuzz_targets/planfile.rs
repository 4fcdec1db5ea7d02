//! Fuzz target `planfile`: see slicectl::fuzzing::planfile.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| slicectl::fuzzing::planfile(data));
