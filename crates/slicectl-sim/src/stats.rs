//! Request counters: every API request by discovery method id, split into
//! reads and writes, plus the number of injected faults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Counters since start (or the last reset).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimStats {
    /// Read requests (GET, list, operation get/wait).
    pub reads: u64,
    /// Write requests (create/insert, update, delete).
    pub writes: u64,
    /// Requests per discovery method id, e.g.
    /// `container.projects.locations.clusters.nodePools.create`.
    pub by_method: BTreeMap<String, u64>,
    /// Injected faults (429, 503, write rate limit, stockout).
    pub faults_injected: u64,
}

impl SimStats {
    /// Counts one request.
    pub(crate) fn count(&mut self, method_id: &str, write: bool) {
        if write {
            self.writes += 1;
        } else {
            self.reads += 1;
        }
        *self.by_method.entry(method_id.to_string()).or_default() += 1;
    }
}
