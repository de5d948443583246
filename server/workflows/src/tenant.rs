//! Tenants: whose data a record is.
//!
//! Every record a caller creates (a conversation, a ticket, an investigation, a research run, a
//! pending action, an audit record, a model call) lives under a storage key that names its
//! tenant, and every lookup builds the key from the caller's tenant and the id the caller gave.
//! Another tenant's record therefore cannot be found at all: to the caller it is as missing as
//! an id nobody used (`NOT_FOUND`), ids chosen by callers never clash across tenants, and an id
//! derived from a caller's input (an idempotency key, a mutation id) is derived per tenant.
//!
//! The key of tenant `default` is the id itself, so data written before tenants existed, and by
//! a server running without API keys (which acts as `default`), stays where it was. Any other
//! tenant's key is `<tenant>/<id>`. No id a workflow accepts contains `/`, so the two forms
//! never meet. Reference data shared by all tenants (the customer directory, HR records, the
//! knowledge base, research corpora) is not keyed by tenant.

use std::{fmt, sync::Arc};

/// A tenant's name: 1 to 63 characters of `a-z 0-9 _ -`, starting with a letter or digit.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(Arc<str>);

/// The separator between a tenant and an id in a storage key.
pub const SEPARATOR: char = '/';

/// A tenant name that breaks the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tenant name {0:?} must be 1 to 63 characters of a-z 0-9 _ -, starting with a letter or digit")]
pub struct InvalidTenant(pub String);

impl Tenant {
    /// The tenant of callers without an API key and of data written before tenants existed.
    pub const DEFAULT: &'static str = "default";

    pub fn new(name: &str) -> Result<Tenant, InvalidTenant> {
        let bytes = name.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.len() <= 63
            && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
            && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-'));
        if ok {
            Ok(Tenant(name.into()))
        } else {
            Err(InvalidTenant(name.to_owned()))
        }
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        &*self.0 == Self::DEFAULT
    }

    /// The storage key of the caller's `id`. Workflows refuse ids with a `/` before they store
    /// anything; should one reach a lookup anyway, its key starts with `/`, which no tenant
    /// owns, so it finds nothing rather than another tenant's record.
    pub fn key(&self, id: &str) -> String {
        if id.contains(SEPARATOR) {
            format!("{SEPARATOR}{id}")
        } else if self.is_default() {
            id.to_owned()
        } else {
            format!("{}{SEPARATOR}{id}", self.0)
        }
    }

    /// The caller's id in one of this tenant's storage keys; `None` for another tenant's key.
    pub fn id<'k>(&self, key: &'k str) -> Option<&'k str> {
        if self.is_default() {
            (!key.contains(SEPARATOR)).then_some(key)
        } else {
            key.strip_prefix(&*self.0).and_then(|rest| rest.strip_prefix(SEPARATOR))
        }
    }

    /// Whether `key` is one of this tenant's storage keys.
    pub fn owns(&self, key: &str) -> bool {
        self.id(key).is_some()
    }

    /// What this tenant's keys start with, for prefix listings: `<tenant>/`, or nothing for
    /// `default` (whose listings must then skip keys that [`Tenant::owns`] refuses).
    pub fn key_prefix(&self) -> String {
        if self.is_default() {
            String::new()
        } else {
            format!("{}{SEPARATOR}", self.0)
        }
    }
}

/// The caller's id in a storage key of any tenant. For what is shown to the tenant that owns
/// the key (a run's events), where the tenant is not at hand.
pub fn caller_id(key: &str) -> &str {
    key.split_once(SEPARATOR).map_or(key, |(_, id)| id)
}

impl Default for Tenant {
    fn default() -> Self {
        Tenant(Self::DEFAULT.into())
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tenant({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        for good in ["default", "acme", "a", "0x", "team_b-2", &"a".repeat(63)] {
            assert!(Tenant::new(good).is_ok(), "{good}");
        }
        for bad in ["", "Acme", "-a", "_a", "a/b", "a b", "é", &"a".repeat(64)] {
            assert!(Tenant::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_round_trip_and_never_cross_tenants() {
        let default = Tenant::default();
        let acme = Tenant::new("acme").unwrap();
        let acme2 = Tenant::new("acme2").unwrap();
        assert_eq!(default.key("c-1"), "c-1");
        assert_eq!(acme.key("c-1"), "acme/c-1");
        assert_eq!(default.id("c-1"), Some("c-1"));
        assert_eq!(acme.id("acme/c-1"), Some("c-1"));
        // Another tenant's key, or the default tenant's, is nobody else's.
        assert_eq!(default.id("acme/c-1"), None);
        assert_eq!(acme.id("c-1"), None);
        assert_eq!(acme.id("acme2/c-1"), None);
        assert_eq!(acme2.id("acme/c-1"), None);
        assert_eq!(acme.key_prefix(), "acme/");
        // An id that smuggles a tenant in reaches nobody's records.
        assert_eq!(default.key("acme/c-1"), "/acme/c-1");
        assert_eq!(acme.key("globex/c-1"), "/globex/c-1");
        for tenant in [&default, &acme, &acme2] {
            assert_eq!(tenant.id(&default.key("acme/c-1")), None);
        }
        assert_eq!(default.key_prefix(), "");
        assert_eq!(caller_id("acme/c-1"), "c-1");
        assert_eq!(caller_id("c-1"), "c-1");
    }
}
