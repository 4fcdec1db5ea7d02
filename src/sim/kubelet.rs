//! A simulated VM's node agent: what the startup script, `kubeadm join` and
//! the kubelet do, against a real Kubernetes API server.
//!
//! INTERFACE STUB: being implemented; `spawn` and its types are the contract
//! the compute simulator codes against.

use std::net::SocketAddr;
use std::time::Duration;

/// What a VM's agent needs to know that it does not read from metadata.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The VM's metadata server (`GCE_METADATA_HOST`).
    pub metadata_host: SocketAddr,
    /// `google.com/tpu` chips the VM reports (capacity = allocatable).
    pub chips: u32,
    /// Node heartbeat interval.
    pub heartbeat: Duration,
}

/// A running agent; dropping it stops it (the VM is gone).
#[derive(Debug)]
pub struct AgentHandle {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the agent of one RUNNING VM.
pub fn spawn(cfg: AgentConfig) -> AgentHandle {
    let task = tokio::spawn(async move {
        let _cfg = cfg;
        std::future::pending::<()>().await;
    });
    AgentHandle { task }
}
