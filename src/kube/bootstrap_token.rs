//! Kubernetes bootstrap tokens (`<id>.<secret>`, the tokens `kubeadm join`
//! uses) and their `bootstrap.kubernetes.io/token` Secrets.
//!
//! The secret half never appears in `Debug` output or logs; only
//! [`BootstrapToken::expose`] and the rendered Secret carry it.

use std::collections::BTreeMap;
use std::fmt;

use ::kube::config::AuthInfo;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rand::Rng;
use secrecy::{ExposeSecret, SecretString};

/// Characters allowed in token ids and secrets.
const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const ID_LEN: usize = 6;
const SECRET_LEN: usize = 16;

/// Namespace bootstrap-token Secrets live in.
pub const BOOTSTRAP_TOKEN_NAMESPACE: &str = "kube-system";
/// Secret type of bootstrap tokens.
pub const BOOTSTRAP_TOKEN_SECRET_TYPE: &str = "bootstrap.kubernetes.io/token";
/// The extra group kubeadm gives node-join tokens.
pub const KUBEADM_NODE_TOKEN_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";

/// Errors about bootstrap tokens.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapTokenError {
    /// The text is not of the form `[a-z0-9]{6}.[a-z0-9]{16}` (the text itself
    /// is not repeated, since it may hold a secret).
    #[error("malformed bootstrap token: expected [a-z0-9]{{6}}.[a-z0-9]{{16}}")]
    Malformed,
}

/// A bootstrap token: a public id and a secret.
#[derive(Clone)]
pub struct BootstrapToken {
    id: String,
    secret: SecretString,
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapToken")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

/// What a bootstrap-token Secret grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// When the token stops being valid (the token cleaner then deletes it).
    pub expiration: jiff::Timestamp,
    /// `usage-bootstrap-authentication`: the token authenticates API requests.
    pub authentication: bool,
    /// `usage-bootstrap-signing`: the bootstrap signer signs `cluster-info` with it.
    pub signing: bool,
    /// `auth-extra-groups` (each must start with `system:bootstrappers:`).
    pub extra_groups: Vec<String>,
    /// Human-readable `description`.
    pub description: Option<String>,
}

impl TokenSpec {
    /// A token as `kubeadm token create` makes it for joining nodes:
    /// authentication and signing, group
    /// `system:bootstrappers:kubeadm:default-node-token`.
    pub fn node_join(expiration: jiff::Timestamp) -> Self {
        Self {
            expiration,
            authentication: true,
            signing: true,
            extra_groups: vec![KUBEADM_NODE_TOKEN_GROUP.to_owned()],
            description: None,
        }
    }
}

fn random_string(rng: &mut impl Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

fn is_token_part(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| ALPHABET.contains(&b))
}

impl BootstrapToken {
    /// A fresh random token from the operating system-seeded CSPRNG.
    pub fn generate() -> Self {
        let mut rng = rand::rng();
        Self {
            id: random_string(&mut rng, ID_LEN),
            secret: SecretString::from(random_string(&mut rng, SECRET_LEN)),
        }
    }

    /// Parses `<id>.<secret>`.
    pub fn parse(token: &str) -> Result<Self, BootstrapTokenError> {
        let (id, secret) = token
            .split_once('.')
            .ok_or(BootstrapTokenError::Malformed)?;
        if !is_token_part(id, ID_LEN) || !is_token_part(secret, SECRET_LEN) {
            return Err(BootstrapTokenError::Malformed);
        }
        Ok(Self {
            id: id.to_owned(),
            secret: SecretString::from(secret.to_owned()),
        })
    }

    /// The public token id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The whole `<id>.<secret>` token. Never log it.
    pub fn expose(&self) -> String {
        format!("{}.{}", self.id, self.secret.expose_secret())
    }

    /// The name of this token's Secret: `bootstrap-token-<id>`.
    pub fn secret_name(&self) -> String {
        format!("bootstrap-token-{}", self.id)
    }

    /// The user name the API server gives requests authenticated with this
    /// token: `system:bootstrap:<id>`.
    pub fn user_name(&self) -> String {
        format!("system:bootstrap:{}", self.id)
    }

    /// The `bootstrap.kubernetes.io/token` Secret (in `kube-system`) that
    /// makes this token valid. It holds the secret: never log it.
    pub fn to_secret(&self, spec: &TokenSpec) -> Secret {
        let mut data: BTreeMap<String, ByteString> = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            data.insert(k.to_owned(), ByteString(v.into_bytes()));
        };
        put("token-id", self.id.clone());
        put("token-secret", self.secret.expose_secret().to_owned());
        put(
            "expiration",
            spec.expiration.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        );
        if spec.authentication {
            put("usage-bootstrap-authentication", "true".to_owned());
        }
        if spec.signing {
            put("usage-bootstrap-signing", "true".to_owned());
        }
        if !spec.extra_groups.is_empty() {
            put("auth-extra-groups", spec.extra_groups.join(","));
        }
        if let Some(description) = &spec.description {
            put("description", description.clone());
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret_name()),
                namespace: Some(BOOTSTRAP_TOKEN_NAMESPACE.to_owned()),
                ..ObjectMeta::default()
            },
            type_: Some(BOOTSTRAP_TOKEN_SECRET_TYPE.to_owned()),
            data: Some(data),
            ..Secret::default()
        }
    }

    /// A copy of `base` (cluster URL, CA, timeouts) that authenticates with
    /// this token as a bearer token instead of `base`'s credentials.
    pub fn client_config(&self, base: &::kube::Config) -> ::kube::Config {
        let mut config = base.clone();
        config.auth_info = AuthInfo {
            token: Some(SecretString::from(self.expose())),
            ..AuthInfo::default()
        };
        config
    }
}

#[cfg(test)]
#[path = "bootstrap_token/tests.rs"]
mod tests;
