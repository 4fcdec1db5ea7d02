//! Saved plans (`plan --out FILE`, read by `apply FILE`).

use std::path::Path;

use crate::cli::planfile::{SavedPlan, decode, reseal};

/// What `apply FILE` does with a plan file it accepted before planning
/// again: load the specs it embeds.
fn check(saved: &SavedPlan) {
    if let Err(diagnostics) = crate::spec::load(&saved.specs) {
        for d in &diagnostics {
            super::spec::assert_located(d, &saved.specs);
        }
    }
}

/// Target `planfile`: the bytes of a plan file. Most mutations break the
/// digest, so each input is also tried sealed again with its own digest,
/// which must then never be refused as edited (the digest is stable over a
/// write and a read), and decodes again to the same plan once more.
pub fn planfile(data: &[u8]) {
    let path = Path::new("plan.json");
    if let Ok(saved) = decode(path, data) {
        check(&saved);
    }
    let Some(sealed) = reseal(data) else {
        return;
    };
    match decode(path, &sealed) {
        Ok(saved) => {
            check(&saved);
            // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
            let again = reseal(&sealed).expect("a sealed plan file reseals");
            // A fuzz invariant, not input handling: this panic is the finding the fuzzer reports.
            let reread = decode(path, &again).expect("a plan file read back decodes");
            assert_eq!(reread, saved, "plan file round trip");
        }
        Err(e) => {
            let message = format!("{e:#}");
            assert!(
                !message.contains("was edited after"),
                "a plan file sealed with its own digest is refused as edited: {message}"
            );
        }
    }
}
