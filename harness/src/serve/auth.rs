//! API keys: one key from the config (`--api-key`), or a keyring file mapping the sha256 of each
//! key to a tenant with a concurrency cap. The tenant scopes the prefix cache; the cap is enforced
//! for the whole life of a request, streams included.

use super::errors::ApiError;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One keyring entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyEntry {
    /// Hex sha256 of the key.
    pub sha256: String,
    /// Tenant the key belongs to.
    pub tenant: String,
    /// Most requests of this tenant in flight at once (0 = no cap).
    #[serde(default)]
    pub max_concurrent: usize,
    /// A disabled key gets 403.
    #[serde(default)]
    pub disabled: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyringFile {
    key: Vec<KeyEntry>,
}

/// Who may call the API.
pub struct Auth {
    /// sha256 → entry.
    keys: HashMap<[u8; 32], KeyEntry>,
    open: bool,
    inflight: Arc<Mutex<HashMap<String, usize>>>,
}

/// An admitted caller: its tenant, and a slot that frees itself when dropped.
pub struct Grant {
    pub tenant: String,
    _slot: Option<Slot>,
}

struct Slot {
    tenant: String,
    inflight: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut m) = self.inflight.lock() {
            if let Some(n) = m.get_mut(&self.tenant) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl Auth {
    /// From the configured single key and/or keyring file; neither = open API. Errors: an
    /// unreadable or malformed keyring (named), a hash that is not 64 hex digits.
    pub fn new(api_key: Option<&str>, keyring: Option<&Path>) -> Result<Auth> {
        let mut keys = HashMap::new();
        if let Some(k) = api_key {
            keys.insert(
                digest(k),
                KeyEntry {
                    sha256: String::new(),
                    tenant: "default".into(),
                    max_concurrent: 0,
                    disabled: false,
                },
            );
        }
        if let Some(p) = keyring {
            let text = std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?;
            let f: KeyringFile = toml::from_str(&text)
                .with_context(|| format!("{}: invalid keyring", p.display()))?;
            for e in f.key {
                let raw = hex::decode(e.sha256.trim())
                    .ok()
                    .filter(|b| b.len() == 32)
                    .with_context(|| {
                        format!(
                            "{}: sha256 of tenant {:?} is not 64 hex digits",
                            p.display(),
                            e.tenant
                        )
                    })?;
                let arr: [u8; 32] = raw.try_into().expect("32 bytes");
                if keys.insert(arr, e.clone()).is_some() {
                    bail!("{}: a key appears twice", p.display());
                }
            }
        }
        Ok(Auth {
            open: keys.is_empty(),
            keys,
            inflight: Arc::default(),
        })
    }

    /// Checks an `Authorization` header value: 401 for a missing or unknown key, 403 for a
    /// disabled one, 429 when the tenant is at its cap.
    pub fn admit(&self, authorization: Option<&str>) -> Result<Grant, ApiError> {
        if self.open {
            return Ok(Grant {
                tenant: String::new(),
                _slot: None,
            });
        }
        // The scheme name is case-insensitive (RFC 9110 §11.1): "Bearer", "bearer", "BEARER".
        let key = authorization
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, k)| k.trim())
            .ok_or(ApiError::Unauthorized)?;
        let e = self.keys.get(&digest(key)).ok_or(ApiError::Unauthorized)?;
        if e.disabled {
            return Err(ApiError::Forbidden);
        }
        let mut m = self
            .inflight
            .lock()
            .map_err(|_| ApiError::Internal("auth lock".into()))?;
        let n = m.entry(e.tenant.clone()).or_default();
        if e.max_concurrent > 0 && *n >= e.max_concurrent {
            return Err(ApiError::TenantBusy {
                tenant: e.tenant.clone(),
                cap: e.max_concurrent,
            });
        }
        *n += 1;
        Ok(Grant {
            tenant: e.tenant.clone(),
            _slot: Some(Slot {
                tenant: e.tenant.clone(),
                inflight: self.inflight.clone(),
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyring_statuses_and_caps() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keys.toml");
        let h = |k: &str| hex::encode(digest(k));
        std::fs::write(
            &p,
            format!(
                "[[key]]\nsha256 = \"{}\"\ntenant = \"acme\"\nmax_concurrent = 1\n\n[[key]]\nsha256 = \"{}\"\ntenant = \"old\"\ndisabled = true\n",
                h("k1"),
                h("k2")
            ),
        )
        .unwrap();
        let a = Auth::new(None, Some(&p)).unwrap();
        assert!(matches!(a.admit(None), Err(ApiError::Unauthorized)));
        assert!(matches!(
            a.admit(Some("Bearer nope")),
            Err(ApiError::Unauthorized)
        ));
        assert!(matches!(
            a.admit(Some("Bearer k2")),
            Err(ApiError::Forbidden)
        ));
        let g = a.admit(Some("bearer k1")).unwrap();
        assert_eq!(g.tenant, "acme", "the scheme is case-insensitive");
        assert!(matches!(
            a.admit(Some("Basic k1")),
            Err(ApiError::Unauthorized)
        ));
        assert!(matches!(
            a.admit(Some("Bearer k1")),
            Err(ApiError::TenantBusy { cap: 1, .. })
        ));
        drop(g);
        assert!(
            a.admit(Some("Bearer k1")).is_ok(),
            "the slot frees when the grant drops"
        );
        std::fs::write(&p, "[[key]]\nsha256 = \"abc\"\ntenant = \"x\"\n").unwrap();
        let e = format!("{:#}", Auth::new(None, Some(&p)).err().unwrap());
        assert!(
            e.contains("64 hex digits") && e.contains("keys.toml"),
            "{e}"
        );
        assert!(
            Auth::new(None, None).unwrap().admit(None).is_ok(),
            "no keys: open"
        );
    }
}
