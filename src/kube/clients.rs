//! The real [`KubeService`]: kube-rs clients, one per cluster, built lazily
//! from each cluster's [`KubeApi`] (a kubeconfig or in-cluster), or for a
//! GKE cluster from `clusters.get` and the Google access token
//! ([`super::gke`]), and cached (a client holding a Google token is rebuilt
//! every [`GOOGLE_TOKEN_RENEW`]).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, ServiceAccount, Taint};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::KubeConfigOptions;
use kube::{Client, Config, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::bootstrap_token::{BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_SECRET_TYPE};
use super::error::{Attempt, KubeError, chain};
use super::kubeconfig::{Origin, TrustedKubeconfigs};
use super::service::{
    DevicePluginObjects, Eviction, FIELD_MANAGER, KubeService, StoredToken,
    UNSCHEDULABLE_TAINT_KEY, expiration_after, is_cordoned, unschedulable_taint,
};
use super::{BootstrapToken, TokenSpec, ca_cert_hash};
use crate::cloud::{GkeService, TokenSource};
use crate::resource::{ClusterRef, KubeRef};
use crate::spec::disruption::CORDONED_BY_SLICECTL;
use crate::spec::model::{GkeAccess, GkeEndpoint, KubeApi};

/// How long dialling an API server may take before it counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a response may take (slicectl never watches through these
/// clients, so a bound is safe).
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The bound of [`KubeService::reachable`], connection included.
pub const REACHABLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Page size of list calls.
const PAGE: u32 = 500;
/// Attempts of a read-modify-write (cordon) that meets a conflict.
const CONFLICT_ATTEMPTS: usize = 5;

/// How a cluster's API is reached.
#[derive(Debug, Clone)]
enum How {
    /// A kubeconfig (and context), or in-cluster.
    Api(KubeApi),
    /// A GKE cluster's endpoint and CA from `clusters.get`, with the Google
    /// access token ([`super::gke`]).
    Gke {
        cluster: ClusterRef,
        endpoint: GkeEndpoint,
    },
}

/// One cluster: how to reach it, who named that, and its client once built.
struct Slot {
    how: How,
    /// The Target that names this cluster's kubeconfig (`None`: the caller's
    /// own configuration, trusted).
    origin: Option<Origin>,
    client: Mutex<Option<Built>>,
}

impl Slot {
    fn new(how: How, origin: Option<Origin>) -> Slot {
        Slot {
            how,
            origin,
            client: Mutex::new(None),
        }
    }
}

/// A built client, its server URL, and when to build it again (a client
/// holding a Google access token is rebuilt before the token expires).
struct Built {
    client: Client,
    /// The same cluster's client without kube's retry layer, for the
    /// Eviction API (see [`Cx::evict`]).
    evict: Client,
    server: String,
    renew_at: Option<Instant>,
}

/// How long a client built with a Google access token is used. Google's
/// access tokens are valid for an hour ("By default, access tokens are good
/// for 1 hour", Google Identity, *Using OAuth 2.0 to Access Google APIs*);
/// the token source caches and refreshes them, so a rebuild after half of
/// that always sends a valid one.
pub const GOOGLE_TOKEN_RENEW: Duration = Duration::from_secs(30 * 60);

/// What reaches GKE for `clusters.get`, and the Google token GKE clusters'
/// API servers accept.
#[derive(Clone)]
pub struct GkeLink {
    /// `clusters.get`.
    pub service: Arc<dyn GkeService>,
    /// The Google access token (never logged; `Debug` of the sources redacts).
    pub tokens: Arc<dyn TokenSource>,
    /// `clusters.get` answers, shared by every [`KubeClients`] made with
    /// this link (the controller makes one per cycle).
    pub cache: Arc<ClusterAccessCache>,
}

impl GkeLink {
    /// A link with an empty cache of its own.
    pub fn new(service: Arc<dyn GkeService>, tokens: Arc<dyn TokenSource>) -> GkeLink {
        GkeLink {
            service,
            tokens,
            cache: Arc::default(),
        }
    }
}

/// How long a `clusters.get` answer (a GKE cluster's endpoints and CA) is
/// used before it is read again. The controller reaches each cluster's API
/// every cycle; reading the cluster once per cycle would cost one GKE read
/// per cluster per cycle for what changes only when the cluster is
/// recreated, or its CA rotated (GKE's credential rotation keeps the old CA
/// valid until the rotation is completed, which takes far longer than
/// this). A failed `clusters.get` is not kept: the next use asks again.
pub const CLUSTER_ACCESS_REFRESH: Duration = Duration::from_secs(10 * 60);

/// The `clusters.get` answers of a [`GkeLink`], each kept for
/// [`CLUSTER_ACCESS_REFRESH`].
#[derive(Debug, Default)]
pub struct ClusterAccessCache(
    std::sync::Mutex<HashMap<ClusterRef, (Instant, crate::resource::gke::ClusterAccess)>>,
);

impl ClusterAccessCache {
    /// The answer for `c`, if one is fresh.
    pub fn get(&self, c: &ClusterRef) -> Option<crate::resource::gke::ClusterAccess> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(c)
            .filter(|(at, _)| at.elapsed() < CLUSTER_ACCESS_REFRESH)
            .map(|(_, a)| a.clone())
    }

    /// Keeps the answer for `c`.
    pub fn put(&self, c: &ClusterRef, access: crate::resource::gke::ClusterAccess) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(c.clone(), (Instant::now(), access));
    }
}

/// Which kubeconfigs may run credential plugins and read files.
#[derive(Debug)]
enum Policy {
    /// Every kubeconfig was named by the caller (tests, library use).
    TrustAll,
    /// Kubeconfigs come from specs: only these are trusted
    /// ([`super::kubeconfig`]).
    Specs(TrustedKubeconfigs),
    /// `--sim`: no real Kubernetes API is ever reached.
    Sealed,
}

/// Why every call fails under `--sim`.
pub const SEALED_MESSAGE: &str = "under --sim slicectl reaches no real Kubernetes API (its Google side \
     is simulated and its Kubernetes side is deferred); to link the simulator to a real cluster on \
     purpose, run `slicectl sim --listen ADDR` and pass `--api-endpoint http://ADDR` instead of --sim";

/// The real Kubernetes seam: a client per cluster, built on first use from
/// the cluster's [`KubeApi`] (a kubeconfig and context, or in-cluster) with
/// short timeouts, then reused.
pub struct KubeClients {
    slots: HashMap<KubeRef, Arc<Slot>>,
    /// GKE clusters no Target named (reached the default way: the public
    /// endpoint from `clusters.get` and the Google token), made on first use.
    gke_default: std::sync::Mutex<HashMap<KubeRef, Arc<Slot>>>,
    policy: Policy,
    gke: Option<GkeLink>,
}

impl std::fmt::Debug for KubeClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut clusters: Vec<_> = self.slots.keys().map(|k| k.endpoint.as_str()).collect();
        clusters.sort_unstable();
        f.debug_struct("KubeClients")
            .field("clusters", &clusters)
            .finish()
    }
}

/// Expands a leading `~` (alone or `~/…`) to `$HOME`.
pub fn expand_home(path: &str) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    if path == "~" {
        if let Some(h) = home() {
            return h;
        }
    } else if let Some(rest) = path.strip_prefix("~/")
        && let Some(h) = home()
    {
        return h.join(rest);
    }
    PathBuf::from(path)
}

impl KubeClients {
    /// Clients for these clusters, whose kubeconfigs the caller vouches for
    /// (tests and library use); nothing is read or dialled until a cluster is
    /// first used.
    pub fn new(clusters: impl IntoIterator<Item = (KubeRef, KubeApi)>) -> Self {
        Self {
            slots: clusters
                .into_iter()
                .map(|(k, api)| (k, Arc::new(Slot::new(How::Api(api), None))))
                .collect(),
            gke_default: std::sync::Mutex::default(),
            policy: Policy::TrustAll,
            gke: None,
        }
    }

    /// Clients for the clusters specs name: a kubeconfig only a spec names
    /// may not run a credential plugin or read a file; only `trusted` ones
    /// (the operator's) may ([`super::kubeconfig`]).
    pub fn for_specs(
        clusters: impl IntoIterator<Item = (KubeRef, KubeApi, Origin)>,
        trusted: TrustedKubeconfigs,
    ) -> Self {
        Self {
            slots: clusters
                .into_iter()
                .map(|(k, api, origin)| (k, Arc::new(Slot::new(How::Api(api), Some(origin)))))
                .collect(),
            gke_default: std::sync::Mutex::default(),
            policy: Policy::Specs(trusted),
            gke: None,
        }
    }

    /// The same clients, with these GKE clusters' Kubernetes APIs (keyed by
    /// [`KubeRef::gke`]): reached through a kubeconfig or in-cluster as
    /// their Target says, or by default through the endpoint and CA
    /// `clusters.get` gives (through `link.service`) and the Google access
    /// token (`link.tokens`), as `gke-gcloud-auth-plugin` does.
    pub fn with_gke(
        mut self,
        clusters: impl IntoIterator<Item = (ClusterRef, GkeAccess, Option<Origin>)>,
        link: GkeLink,
    ) -> Self {
        for (c, access, origin) in clusters {
            let how = match access {
                GkeAccess::Api(api) => How::Api(api),
                GkeAccess::Endpoint(endpoint) => How::Gke {
                    cluster: c.clone(),
                    endpoint,
                },
            };
            self.slots
                .insert(KubeRef::gke(&c), Arc::new(Slot::new(how, origin)));
        }
        self.gke = Some(link);
        self
    }

    /// `--sim`: every call fails with [`SEALED_MESSAGE`], before any file is
    /// read or any address dialled.
    pub fn sealed() -> Self {
        Self {
            slots: HashMap::new(),
            gke_default: std::sync::Mutex::default(),
            policy: Policy::Sealed,
            gke: None,
        }
    }

    /// Whether this is [`KubeClients::sealed`].
    pub fn is_sealed(&self) -> bool {
        matches!(self.policy, Policy::Sealed)
    }

    /// The client configuration of a cluster, with slicectl's timeouts.
    pub async fn config(&self, k: &KubeRef) -> Result<Config, KubeError> {
        let slot = self.slot(k)?;
        let mut config = match &slot.how {
            How::Api(api) => {
                // Whether the kubeconfig a spec names is one the operator trusts
                // (decided here, before any await: the file is only read below).
                let trusted = match (&self.policy, &api.kubeconfig) {
                    (Policy::TrustAll, _) | (Policy::Specs(_), None) => true,
                    (Policy::Specs(t), Some(p)) => t.trusts(&expand_home(p)),
                    (Policy::Sealed, _) => false,
                };
                load_config(k, api, slot.origin.as_ref(), trusted).await?
            }
            How::Gke { cluster, endpoint } => self.gke_config(k, cluster, *endpoint).await?,
        };
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(READ_TIMEOUT);
        config.reset_reader_on_write = true;
        Ok(config)
    }

    /// A GKE cluster's client configuration: `clusters.get`, the endpoint
    /// the Target chose, its CA, and the Google access token.
    async fn gke_config(
        &self,
        k: &KubeRef,
        c: &ClusterRef,
        endpoint: GkeEndpoint,
    ) -> Result<Config, KubeError> {
        let config_err = |message: String| KubeError::Config {
            endpoint: k.endpoint.clone(),
            message,
        };
        // The error names the cluster (gke://PROJECT/LOCATION/NAME) once;
        // the messages below do not repeat it.
        let link = self.gke.as_ref().ok_or_else(|| {
            config_err(
                "no GKE client to read the cluster with (clusters.get); set gke.kubeApi.kubeconfig"
                    .to_owned(),
            )
        })?;
        let cluster = match link.cache.get(c) {
            Some(cached) => cached,
            None => {
                let fresh = link.service.get_cluster(c).await.map_err(|e| {
                    config_err(format!(
                        "its Kubernetes API server is not known without clusters.get, which failed: {e}"
                    ))
                })?;
                link.cache.put(c, fresh.clone());
                fresh
            }
        };
        let server = super::gke::resolve_server(c, &cluster, endpoint).map_err(config_err)?;
        let token = link
            .tokens
            .token()
            .await
            .map_err(|e| {
                config_err(format!(
                    "cannot get a Google access token for its Kubernetes API: {e}"
                ))
            })?
            .map(secrecy::SecretString::from);
        tracing::debug!(cluster = %c, server = %server.url, endpoint = server.used.as_str(), "GKE API server from clusters.get");
        let kubeconfig = super::gke::kubeconfig(c, &server, token);
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| {
                config_err(format!(
                    "its endpoint {} and CA from clusters.get: {}",
                    server.url,
                    chain(&e)
                ))
            })
    }

    fn slot(&self, k: &KubeRef) -> Result<Arc<Slot>, KubeError> {
        if self.is_sealed() {
            return Err(KubeError::Config {
                endpoint: k.endpoint.clone(),
                message: SEALED_MESSAGE.to_owned(),
            });
        }
        if let Some(slot) = self.slots.get(k) {
            return Ok(slot.clone());
        }
        // A GKE cluster no Target named: the default way, when GKE is linked.
        if let (Some(cluster), Some(_)) = (k.gke_cluster(), &self.gke) {
            let mut defaults = self
                .gke_default
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let slot = defaults.entry(k.clone()).or_insert_with(|| {
                Arc::new(Slot::new(
                    How::Gke {
                        cluster,
                        endpoint: GkeEndpoint::Public,
                    },
                    None,
                ))
            });
            return Ok(slot.clone());
        }
        Err(KubeError::Config {
            endpoint: k.endpoint.clone(),
            message: "no Kubernetes API configured for this cluster (the target's gce.kubeApi \
                      or gke.kubeApi)"
                .to_owned(),
        })
    }

    /// The cached client of a cluster and its server URL (built again when
    /// the Google token it holds is due for renewal).
    async fn client<'a>(&'a self, k: &'a KubeRef) -> Result<Cx<'a>, KubeError> {
        let slot = self.slot(k)?;
        let mut cached = slot.client.lock().await;
        if let Some(b) = cached.as_ref()
            && b.renew_at.is_none_or(|at| Instant::now() < at)
        {
            return Ok(Cx {
                k,
                client: b.client.clone(),
                evict: b.evict.clone(),
                server: b.server.clone(),
            });
        }
        let config = self.config(k).await?;
        let server = config.cluster_url.to_string();
        let build = |config: Config| {
            Client::try_from(config).map_err(|e| KubeError::Config {
                endpoint: k.endpoint.clone(),
                message: format!("cannot build a client: {}", chain(&e)),
            })
        };
        // kube's default retry layer answers a 429 by trying again with
        // exponential backoff (up to 15 times, minutes in all). An eviction
        // a PodDisruptionBudget refuses is a 429 too, which the drain must
        // see at once: it asks again on its own poll and keeps its own
        // deadline (`drainTimeout`).
        let mut once = config.clone();
        once.default_retry = false;
        let evict = build(once)?;
        let client = build(config)?;
        tracing::debug!(cluster = %k.endpoint, %server, "kubernetes client ready");
        let renew_at =
            matches!(slot.how, How::Gke { .. }).then(|| Instant::now() + GOOGLE_TOKEN_RENEW);
        *cached = Some(Built {
            client: client.clone(),
            evict: evict.clone(),
            server: server.clone(),
            renew_at,
        });
        Ok(Cx {
            k,
            client,
            evict,
            server,
        })
    }
}

/// Loads the client configuration a cluster's [`KubeApi`] describes.
/// `trusted` says whether the kubeconfig the Target names may use credential
/// plugins and file references; the default kubeconfig (none named) always
/// may: it is the operator's.
async fn load_config(
    k: &KubeRef,
    api: &KubeApi,
    origin: Option<&Origin>,
    trusted: bool,
) -> Result<Config, KubeError> {
    let named_by = origin
        .map(|o| format!(" (named by Target {:?} at {})", o.target, o.location))
        .unwrap_or_default();
    let config_err = |message: String| KubeError::Config {
        endpoint: k.endpoint.clone(),
        message,
    };
    if api.in_cluster {
        return Config::incluster().map_err(|e| {
            config_err(format!(
                "in-cluster configuration unavailable (is slicectl running in a pod of this \
                 cluster?){named_by}: {}",
                chain(&e)
            ))
        });
    }
    let (path, is_trusted) = match &api.kubeconfig {
        Some(p) => (expand_home(p), trusted),
        None => (
            default_kubeconfig().ok_or_else(|| {
                config_err("no kubeconfig given and neither KUBECONFIG nor HOME is set".to_owned())
            })?,
            true,
        ),
    };
    let shown = path.display().to_string();
    let kubeconfig = super::kubeconfig::load(&path, is_trusted)
        .map_err(|e| config_err(format!("kubeconfig {shown}{named_by}: {e}")))?;
    if let Some(context) = &api.context
        && !kubeconfig.contexts.iter().any(|c| &c.name == context)
    {
        let known: Vec<&str> = kubeconfig
            .contexts
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        return Err(config_err(format!(
            "context {context:?} not found in kubeconfig {shown}{named_by} (it has: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )));
    }
    let options = KubeConfigOptions {
        context: api.context.clone(),
        ..KubeConfigOptions::default()
    };
    Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| config_err(format!("kubeconfig {shown}{named_by}: {}", chain(&e))))
}

/// `$KUBECONFIG` (its first entry) or `~/.kube/config`.
fn default_kubeconfig() -> Option<PathBuf> {
    super::kubeconfig::env_kubeconfigs()
        .into_iter()
        .next()
        .or_else(super::kubeconfig::home_kubeconfig)
}

/// One call's context: the cluster, its client and server URL.
struct Cx<'a> {
    k: &'a KubeRef,
    client: Client,
    /// For the Eviction API: no retry layer. A PodDisruptionBudget that
    /// refuses an eviction is answered `429 Too Many Requests`, "the
    /// eviction is not currently allowed because of the configured
    /// PodDisruptionBudget. You may be able to attempt the eviction again
    /// later" (Kubernetes, *API-initiated Eviction*); the drain does that
    /// itself, every [`crate::apply::drain::POLL`].
    evict: Client,
    server: String,
}

impl Cx<'_> {
    fn err(&self, attempt: Attempt, e: ::kube::Error) -> KubeError {
        KubeError::from_client(&self.k.endpoint, &self.server, attempt, e)
    }

    /// A read-modify-write of Node `name`: `patch` looks at the Node read
    /// and gives the merge patch to send (with the Node's resourceVersion,
    /// so that the write is conditional on nobody else having changed the
    /// Node since the read) and what to log once it is written, or `None`
    /// for nothing to do. A conflict reads again, up to
    /// [`CONFLICT_ATTEMPTS`] times; a missing Node is fine when `missing_ok`.
    async fn patch_node_read(
        &self,
        name: &str,
        missing_ok: bool,
        patch: impl Fn(&Node) -> Option<(serde_json::Value, &'static str)>,
    ) -> Result<(), KubeError> {
        let nodes = self.all::<Node>();
        let mut last = None;
        for _ in 0..CONFLICT_ATTEMPTS {
            let node = match nodes.get_opt(name).await {
                Ok(Some(n)) => n,
                Ok(None) if missing_ok => return Ok(()),
                Ok(None) => {
                    return Err(KubeError::NotFound {
                        endpoint: self.k.endpoint.clone(),
                        attempt: Attempt::on("get", "nodes", name),
                        message: format!("nodes \"{name}\" not found"),
                    });
                }
                Err(e) => return Err(self.err(Attempt::on("get", "nodes", name), e)),
            };
            let Some((body, done)) = patch(&node) else {
                return Ok(());
            };
            let attempt = Attempt::on("patch", "nodes", name);
            match nodes
                .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => {
                    tracing::info!(cluster = %self.k.endpoint, node = name, "{done}");
                    return Ok(());
                }
                Err(e) => {
                    let e = self.err(attempt, e);
                    if !e.is_conflict() {
                        return Err(e);
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| {
            self.invalid(Attempt::on("patch", "nodes", name), "no attempt made")
        }))
    }

    fn invalid(&self, attempt: Attempt, message: impl Into<String>) -> KubeError {
        KubeError::Invalid {
            endpoint: self.k.endpoint.clone(),
            attempt,
            message: message.into(),
        }
    }

    fn all<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::ClusterResourceScope>,
        K::DynamicType: Default,
    {
        Api::all(self.client.clone())
    }

    fn all_pods(&self) -> Api<Pod> {
        Api::all(self.client.clone())
    }

    fn namespaced<K>(&self, ns: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), ns)
    }

    /// Every object of a list, following `continue` tokens.
    async fn list_all<K>(
        &self,
        api: &Api<K>,
        selector: Option<&str>,
        attempt: Attempt,
    ) -> Result<Vec<K>, KubeError>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        let mut out = Vec::new();
        let mut continue_token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(PAGE);
            if let Some(s) = selector {
                lp = lp.labels(s);
            }
            if let Some(c) = continue_token.take() {
                lp = lp.continue_token(&c);
            }
            let page = api
                .list(&lp)
                .await
                .map_err(|e| self.err(attempt.clone(), e))?;
            out.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => continue_token = Some(c),
                None => return Ok(out),
            }
        }
    }

    /// Deletes an object; 404 is success.
    async fn delete_quiet<K>(
        &self,
        api: &Api<K>,
        name: &str,
        attempt: Attempt,
    ) -> Result<(), KubeError>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {
                tracing::info!(cluster = %self.k.endpoint, %attempt, "deleted");
                Ok(())
            }
            Err(::kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(self.err(attempt, e)),
        }
    }

    /// Server-side applies one object (field manager `slicectl`, forced).
    async fn apply<K>(&self, api: &Api<K>, obj: &K, resource: &'static str) -> Result<K, KubeError>
    where
        K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    {
        let meta = obj.meta();
        let name = meta.name.clone().unwrap_or_default();
        let shown = match &meta.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name.clone(),
        };
        let attempt = Attempt::on("patch", resource, shown);
        if name.is_empty() {
            return Err(self.invalid(attempt, "the object to apply has no name"));
        }
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        let applied = api
            .patch(&name, &pp, &Patch::Apply(obj))
            .await
            .map_err(|e| self.err(attempt.clone(), e))?;
        tracing::debug!(
            cluster = %self.k.endpoint,
            %attempt,
            resource_version = applied.meta().resource_version.as_deref().unwrap_or(""),
            "applied"
        );
        Ok(applied)
    }
}

/// How long the API server asks a refused eviction to wait: the
/// `Retry-After` header (seconds), else the Status' `details.retryAfterSeconds`
/// (the API server writes the one from the other); `None` when neither says
/// (a PodDisruptionBudget's refusal usually does not: kubernetes/kubernetes
/// issue 36409), or says 0.
pub fn retry_after(header: Option<&str>, details_secs: Option<u32>) -> Option<Duration> {
    header
        .and_then(|h| h.trim().parse::<u64>().ok())
        .or(details_secs.map(u64::from))
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
}

fn namespace_of<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().namespace.as_deref().filter(|n| !n.is_empty())
}

#[async_trait]
impl KubeService for KubeClients {
    fn deferred(&self, k: &KubeRef) -> Option<String> {
        let cluster = k.gke_cluster()?;
        // A GKE cluster named by no Target is reached the default way.
        if let Some(slot) = self.slots.get(k)
            && !matches!(slot.how, How::Gke { .. })
        {
            return None;
        }
        if self.is_sealed() {
            return None;
        }
        let Some(link) = &self.gke else {
            return Some(format!(
                "no GKE access is configured for GKE cluster {cluster}'s Kubernetes API (no \
                 clusters.get, no Google token): its Nodes are not read and readiness is not known"
            ));
        };
        (!link.tokens.sends_credentials()).then(|| {
            format!(
                "slicectl sends no Google credentials to this Google API endpoint (--api-endpoint \
                 on loopback: a simulator or a local proxy), so it holds no token GKE cluster \
                 {cluster}'s Kubernetes API would accept: its Nodes are not read and readiness is \
                 not known. Name a kubeconfig for it in the Target (gke.kubeApi.kubeconfig) to \
                 read them"
            )
        })
    }

    async fn reachable(&self, k: &KubeRef) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        let attempt = Attempt::new("get", "/version");
        match tokio::time::timeout(REACHABLE_TIMEOUT, cx.client.apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(cx.err(attempt, e)),
            Err(_) => Err(KubeError::Unreachable {
                endpoint: k.endpoint.clone(),
                server: cx.server.clone(),
                attempt,
                detail: format!("no answer within {REACHABLE_TIMEOUT:?}"),
            }),
        }
    }

    async fn server_version(&self, k: &KubeRef) -> Result<(u32, u32), KubeError> {
        let cx = self.client(k).await?;
        let attempt = Attempt::new("get", "/version");
        let v = match tokio::time::timeout(REACHABLE_TIMEOUT, cx.client.apiserver_version()).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(cx.err(attempt, e)),
            Err(_) => {
                return Err(KubeError::Unreachable {
                    endpoint: k.endpoint.clone(),
                    server: cx.server.clone(),
                    attempt,
                    detail: format!("no answer within {REACHABLE_TIMEOUT:?}"),
                });
            }
        };
        // `minor` may carry a `+` (distribution builds: "36+").
        let num = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
        match (num(&v.major), num(&v.minor)) {
            (Some(major), Some(minor)) => Ok((major, minor)),
            _ => Err(KubeError::Invalid {
                endpoint: k.endpoint.clone(),
                attempt,
                message: format!("the API server reports version {}.{}", v.major, v.minor),
            }),
        }
    }

    async fn nodes(&self, k: &KubeRef) -> Result<Vec<Node>, KubeError> {
        let cx = self.client(k).await?;
        cx.list_all(&cx.all::<Node>(), None, Attempt::new("list", "nodes"))
            .await
    }

    async fn patch_node(
        &self,
        k: &KubeRef,
        name: &str,
        labels: &BTreeMap<String, Option<String>>,
        taints: Option<&[Taint]>,
    ) -> Result<(), KubeError> {
        if labels.is_empty() && taints.is_none() {
            return Ok(());
        }
        let cx = self.client(k).await?;
        let mut patch = serde_json::Map::new();
        if !labels.is_empty() {
            patch.insert("metadata".into(), json!({ "labels": labels }));
        }
        if let Some(taints) = taints {
            patch.insert("spec".into(), json!({ "taints": taints }));
        }
        let attempt = Attempt::on("patch", "nodes", name);
        cx.all::<Node>()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::Value::Object(patch)),
            )
            .await
            .map_err(|e| cx.err(attempt.clone(), e))?;
        tracing::info!(cluster = %k.endpoint, node = name, labels = labels.len(), taints = ?taints.map(<[Taint]>::len), "patched node");
        Ok(())
    }

    async fn cordon_node(&self, k: &KubeRef, name: &str) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        cx.patch_node_read(name, false, |node| {
            if is_cordoned(node) {
                return None;
            }
            let mut taints = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            if !taints
                .iter()
                .any(|t| t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule")
            {
                taints.push(unschedulable_taint());
            }
            let patch = json!({
                "metadata": {
                    "resourceVersion": node.metadata.resource_version,
                    "labels": { CORDONED_BY_SLICECTL: "true" },
                },
                "spec": { "unschedulable": true, "taints": taints },
            });
            Some((patch, "cordoned node"))
        })
        .await
    }

    async fn jobsets(&self, k: &KubeRef) -> Result<Vec<serde_json::Value>, KubeError> {
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
        let cx = self.client(k).await?;
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "jobset.x-k8s.io",
            "v1alpha2",
            "JobSet",
        ));
        let api: Api<DynamicObject> = Api::all_with(cx.client.clone(), &ar);
        let attempt = Attempt::new("list", "jobsets.jobset.x-k8s.io");
        let mut out = Vec::new();
        let mut continue_token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(PAGE);
            if let Some(c) = continue_token.take() {
                lp = lp.continue_token(&c);
            }
            let page = match api.list(&lp).await {
                Ok(p) => p,
                // No JobSet CRD: no JobSets.
                Err(::kube::Error::Api(s)) if s.code == 404 && out.is_empty() => return Ok(out),
                Err(e) => return Err(cx.err(attempt, e)),
            };
            for o in page.items {
                out.push(serde_json::to_value(o).map_err(|e| {
                    cx.invalid(attempt.clone(), format!("a JobSet does not serialize: {e}"))
                })?);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => continue_token = Some(c),
                None => return Ok(out),
            }
        }
    }

    async fn watch_workloads(
        &self,
        k: &KubeRef,
        wake: tokio::sync::mpsc::UnboundedSender<()>,
    ) -> Result<(), KubeError> {
        use futures::StreamExt;
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
        use kube::runtime::{WatchStreamExt, watcher};
        let cx = self.client(k).await?;
        let endpoint = k.endpoint.clone();
        let pods: Api<Pod> = Api::all(cx.client.clone());
        let pending = watcher::Config::default().fields("status.phase=Pending");
        let (w, e) = (wake.clone(), endpoint.clone());
        tokio::spawn(async move {
            let mut events = watcher::watcher(pods, pending).default_backoff().boxed();
            while let Some(ev) = events.next().await {
                let wakes = match &ev {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        crate::observe::demand::pending_pod(p)
                            .is_some_and(|p| crate::workload::is_trigger(&p))
                    }
                    Ok(_) => false,
                    Err(err) => {
                        tracing::debug!(cluster = %e, error = %err, "watching pending pods (retried with backoff)");
                        false
                    }
                };
                if wakes && w.send(()).is_err() {
                    return;
                }
            }
        });
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "jobset.x-k8s.io",
            "v1alpha2",
            "JobSet",
        ));
        let jobsets: Api<DynamicObject> = Api::all_with(cx.client.clone(), &ar);
        tokio::spawn(async move {
            let mut events = watcher::watcher(jobsets, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = events.next().await {
                let wakes = match &ev {
                    Ok(watcher::Event::Delete(_)) => true,
                    Ok(watcher::Event::Apply(j)) => serde_json::to_value(j).is_ok_and(|v| {
                        let js = crate::observe::demand::jobset(&v);
                        js.ended.is_some() || js.deleting
                    }),
                    Ok(_) => false,
                    Err(err) => {
                        tracing::debug!(cluster = %endpoint, error = %err, "watching JobSets (retried with backoff)");
                        false
                    }
                };
                // The cycle this runs asks for the next at the end of the
                // grace period, when the slices are due for release.
                if wakes && wake.send(()).is_err() {
                    return;
                }
            }
        });
        Ok(())
    }

    async fn create_event(
        &self,
        k: &KubeRef,
        event: &k8s_openapi::api::core::v1::Event,
    ) -> Result<bool, KubeError> {
        let cx = self.client(k).await?;
        let ns = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let attempt = Attempt::on("create", "events", format!("{ns}/{name}"));
        let api = cx.namespaced::<k8s_openapi::api::core::v1::Event>(&ns);
        match api.create(&PostParams::default(), event).await {
            Ok(_) => Ok(true),
            Err(::kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(cx.err(attempt, e)),
        }
    }

    async fn pods(&self, k: &KubeRef) -> Result<Vec<Pod>, KubeError> {
        let cx = self.client(k).await?;
        let api = cx.all_pods();
        let attempt = Attempt::new("list", "pods");
        let mut out = Vec::new();
        let mut continue_token: Option<String> = None;
        loop {
            let mut lp = ListParams::default()
                .limit(PAGE)
                .fields("status.phase!=Succeeded,status.phase!=Failed");
            if let Some(c) = continue_token.take() {
                lp = lp.continue_token(&c);
            }
            let page = api
                .list(&lp)
                .await
                .map_err(|e| cx.err(attempt.clone(), e))?;
            out.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(c) => continue_token = Some(c),
                None => return Ok(out),
            }
        }
    }

    async fn evict_pod(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<Eviction, KubeError> {
        let cx = self.client(k).await?;
        let attempt = Attempt::on("create", "pods/eviction", format!("{namespace}/{name}"));
        // Sent raw (not `Api::evict`) to read the `Retry-After` header of a
        // 429, which the typed call drops.
        let req = ::kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
            .evict(name, &EvictParams::default())
            .map_err(|e| cx.invalid(attempt.clone(), format!("cannot build the request: {e}")))?;
        // Through the client that does not retry a 429 itself (see
        // `Cx::evict`): the drain asks again on its own poll.
        let res = cx
            .evict
            .send(req.map(::kube::client::Body::from))
            .await
            .map_err(|e| cx.err(attempt.clone(), e))?;
        let code = res.status().as_u16();
        let header = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = res
            .into_body()
            .collect_bytes()
            .await
            .map_err(|e| cx.err(attempt.clone(), e))?;
        if (200..300).contains(&code) {
            tracing::info!(cluster = %k.endpoint, pod = %format!("{namespace}/{name}"), "evicted pod");
            return Ok(Eviction::Evicted);
        }
        let status = serde_json::from_slice::<::kube::core::Status>(&body).unwrap_or_else(|_| {
            ::kube::core::Status::failure(String::from_utf8_lossy(&body).trim(), "").with_code(code)
        });
        match code {
            404 => Ok(Eviction::Evicted),
            429 => Ok(Eviction::Refused {
                retry_after: retry_after(
                    header.as_deref(),
                    status.details.as_ref().map(|d| d.retry_after_seconds),
                ),
                message: status.message,
            }),
            _ => Err(cx.err(attempt, ::kube::Error::Api(status.with_code(code).boxed()))),
        }
    }

    async fn uncordon_node(&self, k: &KubeRef, name: &str, label: &str) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        cx.patch_node_read(name, true, |node| {
            // Only a cordon slicectl made is lifted.
            let ours = node
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(CORDONED_BY_SLICECTL));
            if !ours {
                let patch = json!({
                    "metadata": { "resourceVersion": node.metadata.resource_version, "labels": { label: null } },
                });
                return Some((
                    patch,
                    "removed the drain label; the Node's cordon is not slicectl's and stays",
                ));
            }
            let taints: Vec<Taint> = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|t| !(t.key == UNSCHEDULABLE_TAINT_KEY && t.effect == "NoSchedule"))
                .collect();
            let patch = json!({
                "metadata": {
                    "resourceVersion": node.metadata.resource_version,
                    "labels": { label: null, CORDONED_BY_SLICECTL: null },
                },
                "spec": { "unschedulable": null, "taints": taints },
            });
            Some((patch, "uncordoned node (its drain is no longer planned)"))
        })
        .await
    }

    async fn delete_node(&self, k: &KubeRef, name: &str) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        cx.delete_quiet(
            &cx.all::<Node>(),
            name,
            Attempt::on("delete", "nodes", name),
        )
        .await
    }

    async fn bootstrap_tokens(
        &self,
        k: &KubeRef,
        selector: &str,
    ) -> Result<Vec<StoredToken>, KubeError> {
        let cx = self.client(k).await?;
        let api = cx.namespaced::<Secret>(BOOTSTRAP_TOKEN_NAMESPACE);
        let secrets = cx
            .list_all(
                &api,
                Some(selector).filter(|s| !s.is_empty()),
                Attempt::on("list", "secrets", format!("in {BOOTSTRAP_TOKEN_NAMESPACE}")),
            )
            .await?;
        // The label selector narrows the list on the server; the Secret type
        // is checked here (a slicectl label on another type is ignored).
        Ok(secrets
            .iter()
            .filter(|s| s.type_.as_deref() == Some(BOOTSTRAP_TOKEN_SECRET_TYPE))
            .filter_map(StoredToken::from_secret)
            .collect())
    }

    async fn create_bootstrap_token(
        &self,
        k: &KubeRef,
        token: &BootstrapToken,
        ttl: Duration,
        labels: &BTreeMap<String, String>,
    ) -> Result<StoredToken, KubeError> {
        let cx = self.client(k).await?;
        let expiration = expiration_after(ttl).map_err(|message| {
            cx.invalid(
                Attempt::on("create", "secrets", token.secret_name()),
                message,
            )
        })?;
        let mut spec = TokenSpec::node_join(expiration);
        spec.description = Some("slicectl node join".to_owned());
        let mut secret = token.to_secret(&spec);
        secret.metadata.labels = Some(labels.clone()).filter(|l| !l.is_empty());
        let attempt = Attempt::on(
            "create",
            "secrets",
            format!("{BOOTSTRAP_TOKEN_NAMESPACE}/{}", token.secret_name()),
        );
        let full = token.expose();
        let secret_part = full.split_once('.').map(|(_, s)| s).unwrap_or_default();
        let created = cx
            .namespaced::<Secret>(BOOTSTRAP_TOKEN_NAMESPACE)
            .create(&PostParams::default(), &secret)
            .await
            .map_err(|e| cx.err(attempt.clone(), e).redact(secret_part))?;
        tracing::info!(cluster = %k.endpoint, secret = %token.secret_name(), %expiration, "created bootstrap token");
        StoredToken::from_secret(&created)
            .filter(|s| s.token.is_some())
            .ok_or_else(|| cx.invalid(attempt, "the created Secret does not read back as a token"))
    }

    async fn delete_secret(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        cx.delete_quiet(
            &cx.namespaced::<Secret>(namespace),
            name,
            Attempt::on("delete", "secrets", format!("{namespace}/{name}")),
        )
        .await
    }

    async fn ca_cert_hash(&self, k: &KubeRef) -> Result<String, KubeError> {
        let cx = self.client(k).await?;
        let attempt = Attempt::on("get", "configmaps", "kube-system/kube-root-ca.crt");
        let cm = cx
            .namespaced::<ConfigMap>("kube-system")
            .get("kube-root-ca.crt")
            .await
            .map_err(|e| cx.err(attempt.clone(), e))?;
        let pem = cm
            .data
            .as_ref()
            .and_then(|d| d.get("ca.crt"))
            .ok_or_else(|| cx.invalid(attempt.clone(), "no ca.crt key in kube-root-ca.crt"))?;
        ca_cert_hash(pem).map_err(|e| cx.invalid(attempt, format!("ca.crt: {e}")))
    }

    async fn daemonset(
        &self,
        k: &KubeRef,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DaemonSet>, KubeError> {
        let cx = self.client(k).await?;
        cx.namespaced::<DaemonSet>(namespace)
            .get_opt(name)
            .await
            .map_err(|e| {
                cx.err(
                    Attempt::on("get", "apps/daemonsets", format!("{namespace}/{name}")),
                    e,
                )
            })
    }

    async fn apply_device_plugin(
        &self,
        k: &KubeRef,
        objects: &DevicePluginObjects,
    ) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        let ns = |o: Option<&str>, what: &'static str| {
            o.map(str::to_owned).ok_or_else(|| {
                cx.invalid(
                    Attempt::new("patch", what),
                    format!("the device plugin's {what} has no namespace"),
                )
            })
        };
        let sa_ns = ns(namespace_of(&objects.service_account), "serviceaccounts")?;
        let ds_ns = ns(namespace_of(&objects.daemonset), "apps/daemonsets")?;
        cx.apply(
            &cx.namespaced::<ServiceAccount>(&sa_ns),
            &objects.service_account,
            "serviceaccounts",
        )
        .await?;
        cx.apply(
            &cx.all::<ClusterRole>(),
            &objects.cluster_role,
            "rbac.authorization.k8s.io/clusterroles",
        )
        .await?;
        cx.apply(
            &cx.all::<ClusterRoleBinding>(),
            &objects.cluster_role_binding,
            "rbac.authorization.k8s.io/clusterrolebindings",
        )
        .await?;
        let ds = cx
            .apply(
                &cx.namespaced::<DaemonSet>(&ds_ns),
                &objects.daemonset,
                "apps/daemonsets",
            )
            .await?;
        tracing::info!(
            cluster = %k.endpoint,
            daemonset = %format!("{ds_ns}/{}", ds.metadata.name.as_deref().unwrap_or("")),
            generation = ds.metadata.generation.unwrap_or_default(),
            "device plugin applied"
        );
        Ok(())
    }

    async fn delete_device_plugin(
        &self,
        k: &KubeRef,
        objects: &DevicePluginObjects,
    ) -> Result<(), KubeError> {
        let cx = self.client(k).await?;
        let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            m.name.clone().unwrap_or_default()
        };
        if let Some(ns) = namespace_of(&objects.daemonset) {
            let n = name(&objects.daemonset.metadata);
            cx.delete_quiet(
                &cx.namespaced::<DaemonSet>(ns),
                &n,
                Attempt::on("delete", "apps/daemonsets", format!("{ns}/{n}")),
            )
            .await?;
        }
        let n = name(&objects.cluster_role_binding.metadata);
        cx.delete_quiet(
            &cx.all::<ClusterRoleBinding>(),
            &n,
            Attempt::on(
                "delete",
                "rbac.authorization.k8s.io/clusterrolebindings",
                n.clone(),
            ),
        )
        .await?;
        let n = name(&objects.cluster_role.metadata);
        cx.delete_quiet(
            &cx.all::<ClusterRole>(),
            &n,
            Attempt::on(
                "delete",
                "rbac.authorization.k8s.io/clusterroles",
                n.clone(),
            ),
        )
        .await?;
        if let Some(ns) = namespace_of(&objects.service_account) {
            let n = name(&objects.service_account.metadata);
            cx.delete_quiet(
                &cx.namespaced::<ServiceAccount>(ns),
                &n,
                Attempt::on("delete", "serviceaccounts", format!("{ns}/{n}")),
            )
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "clients/tests.rs"]
mod tests;
