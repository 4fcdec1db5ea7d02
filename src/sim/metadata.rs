//! The GCE metadata server of simulated VMs (one loopback listener per VM).
//!
//! INTERFACE STUB: the protocol is being implemented; the types and the
//! `start` signature are the contract the compute simulator and the kubelet
//! agent code against.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use tokio::sync::watch;

/// What one VM's metadata server serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VmMetadata {
    /// `project/project-id`.
    pub project_id: String,
    /// `project/numeric-project-id`.
    pub numeric_project_id: String,
    /// Short zone name (served as `instance/zone` = `projects/NUM/zones/ZONE`).
    pub zone: String,
    /// `instance/name`.
    pub name: String,
    /// `instance/id`.
    pub id: String,
    /// Short machine type (served as `instance/machine-type` = `projects/NUM/machineTypes/MT`).
    pub machine_type: String,
    /// `instance/attributes/…`: the instance's custom metadata (template
    /// metadata plus `setMetadata` writes).
    pub attributes: BTreeMap<String, String>,
}

/// Guest attributes a VM wrote (`PUT instance/guest-attributes/NS/KEY`),
/// keyed `NS/KEY`; the compute simulator serves them back through
/// `instances.getGuestAttributes`.
pub type GuestAttributes = std::sync::Arc<std::sync::Mutex<BTreeMap<String, String>>>;

/// A running metadata server.
#[derive(Debug)]
pub struct MetadataServer {
    /// Where it listens (what `GCE_METADATA_HOST` is set to).
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetadataServer {
    /// Starts a server for one VM on 127.0.0.1 (ephemeral port) serving the
    /// current value of `rx`; `wait_for_change` requests wake when it changes.
    /// Guest attributes written by the VM land in `guest`.
    pub async fn start(
        rx: watch::Receiver<VmMetadata>,
        guest: GuestAttributes,
    ) -> std::io::Result<MetadataServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _keep = (listener, rx, guest);
            std::future::pending::<()>().await;
        });
        Ok(MetadataServer { addr, task })
    }
}

impl Drop for MetadataServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
