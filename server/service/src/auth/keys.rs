//! API keys: created, listed and revoked by `frontdesk-server keys`, verified by the auth layer.
//!
//! A key is `fdk_<key_id>_<secret>`: `key_id` is 16 lowercase hex characters (8 random bytes),
//! public, shown in listings and logs; `secret` is 43 characters of URL-safe base64 without
//! padding, 32 bytes from the operating system's RNG. The key table keeps a random 16-byte salt
//! and SHA-256(salt || secret bytes), never the secret: the plain key exists only in what
//! [`ApiKeys::create`] returns.
//!
//! A plain hash is enough: the secret has 256 random bits, so guessing it from its hash is as
//! hopeless as guessing it outright, and a slow password hash (argon2, bcrypt) would only cost
//! every uncached verification milliseconds. The salt keeps two stored hashes of one secret
//! apart, should a secret ever repeat.
//!
//! [`ApiKeys`] remembers successful verifications for `auth.cache_secs`, keyed by the key id
//! and a hash of the presented secret, so most calls read no table; a revocation made by
//! another process (the CLI) therefore takes effect within that time. Failures are not
//! remembered.

use std::{
    collections::HashMap,
    fmt,
    str::FromStr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use frontdesk_store::{ApiKeyRecord, ApiKeyRow, Database, StoreError};
use frontdesk_workflows::Tenant;
use rand::{rngs::OsRng, TryRngCore};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{KeyVerifier, Principal, Scopes};
use crate::error::AccessError;

/// What every key starts with, so a leaked key is recognisable (secret scanners, logs).
pub const KEY_PREFIX: &str = "fdk_";
/// Characters of a key id: 8 bytes in lowercase hex.
pub const KEY_ID_CHARS: usize = 16;
/// Characters of a secret: 32 bytes in URL-safe base64 without padding.
pub const SECRET_CHARS: usize = 43;
const SECRET_BYTES: usize = 32;
const SALT_BYTES: usize = 16;
/// Fresh key ids tried before [`KeyError::NoFreeId`]; with 64 random bits a second is already
/// unheard of.
const ID_ATTEMPTS: u32 = 3;
/// Cache entries beyond which expired ones are swept out when another is added.
const CACHE_SWEEP_AT: usize = 1024;

/// A new key in plain text, `fdk_<key_id>_<secret>`. Neither `Debug` nor anything else prints
/// the secret; only [`PlainKey::expose`] gives it out.
pub struct PlainKey(String);

impl PlainKey {
    /// The whole key, to be handed to its user once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn key_id(&self) -> &str {
        &self.0[KEY_PREFIX.len()..KEY_PREFIX.len() + KEY_ID_CHARS]
    }
}

impl fmt::Debug for PlainKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PlainKey({KEY_PREFIX}{}_<redacted>)", self.key_id())
    }
}

/// What [`ApiKeys::create`] made: the plain key (shown once) and its row as listed.
#[derive(Debug)]
pub struct CreatedKey {
    pub key: PlainKey,
    pub row: ApiKeyRow,
}

/// Why a key could not be created.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the operating system's random number generator failed")]
    Random(#[source] rand::rand_core::OsError),
    #[error("no free key id in {0} attempts")]
    NoFreeId(u32),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A presented key's parts, the secret decoded. Not `Debug`: it holds the secret.
struct Presented<'a> {
    key_id: &'a str,
    secret: [u8; SECRET_BYTES],
}

/// Whether `text` has the form of a key id (16 lowercase hex characters).
pub fn is_key_id(text: &str) -> bool {
    text.len() == KEY_ID_CHARS && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Splits `fdk_<key_id>_<secret>`; `None` unless every part has the exact form [`ApiKeys::create`]
/// gives it. The secret's own alphabet includes `_`, so the parts are found by position.
fn parse(presented: &str) -> Option<Presented<'_>> {
    let rest = presented.strip_prefix(KEY_PREFIX)?;
    if rest.len() != KEY_ID_CHARS + 1 + SECRET_CHARS || !rest.is_char_boundary(KEY_ID_CHARS) {
        return None;
    }
    let (key_id, rest) = rest.split_at(KEY_ID_CHARS);
    let encoded = rest.strip_prefix('_')?;
    if !is_key_id(key_id) {
        return None;
    }
    // The strict decoder refuses stray low bits in the last character, so each secret has one
    // spelling only.
    let mut secret = [0u8; SECRET_BYTES];
    match URL_SAFE_NO_PAD.decode_slice(encoded, &mut secret) {
        Ok(SECRET_BYTES) => Some(Presented { key_id, secret }),
        _ => None,
    }
}

fn salted_hash(salt: &[u8], secret: &[u8]) -> [u8; 32] {
    Sha256::new().chain_update(salt).chain_update(secret).finalize().into()
}

fn random<const N: usize>() -> Result<[u8; N], KeyError> {
    let mut bytes = [0u8; N];
    OsRng.try_fill_bytes(&mut bytes).map_err(KeyError::Random)?;
    Ok(bytes)
}

fn lower_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `t` at the millisecond precision the key table keeps.
fn to_millis(t: SystemTime) -> SystemTime {
    let ms = t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// A verification remembered: by key id and SHA-256 of the presented secret (never the secret).
type CacheKey = (String, [u8; 32]);

struct Cached {
    principal: Principal,
    until: Instant,
}

/// The key table: creates, lists and revokes keys, and verifies presented ones for the auth
/// layer (see the module documentation).
pub struct ApiKeys {
    database: Database,
    cache_ttl: Duration,
    cache: Mutex<HashMap<CacheKey, Cached>>,
    /// Key table reads by [`KeyVerifier::verify`]; tests check the cache with it.
    reads: AtomicU64,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cached = self.cache.lock().map_or(0, |c| c.len());
        f.debug_struct("ApiKeys").field("cache_ttl", &self.cache_ttl).field("cached", &cached).finish_non_exhaustive()
    }
}

impl ApiKeys {
    /// Keys in `database`; a verified key is trusted for `cache_ttl` without reading the table
    /// again (zero: every call reads it).
    pub fn new(database: Database, cache_ttl: Duration) -> Self {
        Self { database, cache_ttl, cache: Mutex::new(HashMap::new()), reads: AtomicU64::new(0) }
    }

    /// Creates a key for `tenant` with `scopes`, labelled `name` (may be empty). The returned
    /// [`PlainKey`] is the only copy of the secret.
    pub async fn create(&self, tenant: &Tenant, scopes: &Scopes, name: &str) -> Result<CreatedKey, KeyError> {
        let secret = random::<SECRET_BYTES>()?;
        let salt = random::<SALT_BYTES>()?;
        let hash = salted_hash(&salt, &secret);
        for _ in 0..ID_ATTEMPTS {
            let key_id = lower_hex(&random::<{ KEY_ID_CHARS / 2 }>()?);
            let row = ApiKeyRow {
                key_id: key_id.clone(),
                tenant: tenant.name().to_owned(),
                scopes: scopes.to_string(),
                name: name.to_owned(),
                created_at: to_millis(SystemTime::now()),
                revoked_at: None,
            };
            let record = ApiKeyRecord { row, salt: salt.to_vec(), hash: hash.to_vec() };
            if self.database.insert_api_key(&record).await? {
                tracing::info!(key_id, tenant = %tenant, scopes = %scopes, "key created");
                let key = PlainKey(format!("{KEY_PREFIX}{key_id}_{}", URL_SAFE_NO_PAD.encode(secret)));
                return Ok(CreatedKey { key, row: record.row });
            }
        }
        Err(KeyError::NoFreeId(ID_ATTEMPTS))
    }

    /// Every key, or `tenant`'s, newest first; revoked keys included with their time.
    pub async fn list(&self, tenant: Option<&Tenant>) -> Result<Vec<ApiKeyRow>, StoreError> {
        self.database.api_keys(tenant.map(Tenant::name)).await
    }

    /// Revokes `key_id`; returns whether it exists. Revoking a revoked key succeeds and keeps
    /// the first time. This process forgets the key at once; other servers within their
    /// `cache_ttl`.
    pub async fn revoke(&self, key_id: &str) -> Result<bool, StoreError> {
        let found = self.database.revoke_api_key(key_id, SystemTime::now()).await?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.retain(|(id, _), _| id != key_id);
        }
        if found {
            tracing::info!(key_id, "key revoked");
        }
        Ok(found)
    }

    /// How often [`KeyVerifier::verify`] has read the key table.
    pub fn table_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn cached(&self, key: &CacheKey) -> Option<Principal> {
        let cache = self.cache.lock().ok()?;
        cache.get(key).filter(|c| c.until > Instant::now()).map(|c| c.principal.clone())
    }

    fn remember(&self, key: CacheKey, principal: &Principal) {
        if self.cache_ttl.is_zero() {
            return;
        }
        let Ok(mut cache) = self.cache.lock() else { return };
        let now = Instant::now();
        if cache.len() >= CACHE_SWEEP_AT {
            cache.retain(|_, c| c.until > now);
        }
        cache.insert(key, Cached { principal: principal.clone(), until: now + self.cache_ttl });
    }

    /// Reads and checks the key behind `presented`.
    async fn look_up(&self, presented: &Presented<'_>) -> Result<Principal, AccessError> {
        let key_id = presented.key_id;
        self.reads.fetch_add(1, Ordering::Relaxed);
        let record = match self.database.api_key(key_id).await {
            Ok(Some(record)) => record,
            Ok(None) => {
                tracing::debug!(key_id, "key refused: unknown");
                return Err(AccessError::InvalidKey);
            }
            Err(e) => {
                tracing::warn!(key_id, error = %e, "cannot read the key table");
                // Not the caller's fault, and a retry may pass: not UNAUTHENTICATED.
                return Err(AccessError::KeyTableUnavailable);
            }
        };
        let hash = salted_hash(&record.salt, &presented.secret);
        if !bool::from(hash.as_slice().ct_eq(&record.hash)) {
            tracing::debug!(key_id, "key refused: wrong secret");
            return Err(AccessError::InvalidKey);
        }
        if record.row.revoked_at.is_some() {
            tracing::debug!(key_id, "key refused: revoked");
            return Err(AccessError::InvalidKey);
        }
        let (tenant, scopes) = match (Tenant::new(&record.row.tenant), Scopes::from_str(&record.row.scopes)) {
            (Ok(tenant), Ok(scopes)) => (tenant, scopes),
            (Err(e), _) => {
                tracing::warn!(key_id, error = %e, "key refused: its stored tenant is invalid");
                return Err(AccessError::InvalidKey);
            }
            (_, Err(e)) => {
                tracing::warn!(key_id, error = %e, "key refused: its stored scopes are invalid");
                return Err(AccessError::InvalidKey);
            }
        };
        Ok(Principal { tenant, key_id: Some(key_id.to_owned()), scopes })
    }
}

#[async_trait]
impl KeyVerifier for ApiKeys {
    async fn verify(&self, presented: &str) -> Result<Principal, AccessError> {
        let Some(presented) = parse(presented) else { return Err(AccessError::InvalidKey) };
        let cache_key: CacheKey = (presented.key_id.to_owned(), Sha256::digest(presented.secret).into());
        if let Some(principal) = self.cached(&cache_key) {
            return Ok(principal);
        }
        let principal = self.look_up(&presented).await?;
        self.remember(cache_key, &principal);
        Ok(principal)
    }
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashSet,
        sync::{Arc, Mutex as StdMutex},
    };

    use frontdesk_store::StoreOptions;

    use super::*;
    use crate::auth::{Access, AuthPolicy, MethodTable, ServiceAccess};

    async fn keys(ttl: Duration) -> (Database, ApiKeys) {
        let db = Database::connect("sqlite::memory:", StoreOptions::default()).await.unwrap();
        (db.clone(), ApiKeys::new(db, ttl))
    }

    fn acme() -> Tenant {
        Tenant::new("acme").unwrap()
    }

    fn scopes() -> Scopes {
        "conversation:write,triage:read".parse().unwrap()
    }

    /// The key's secret part.
    fn secret_of(key: &PlainKey) -> &str {
        &key.expose()[KEY_PREFIX.len() + KEY_ID_CHARS + 1..]
    }

    #[tokio::test]
    async fn a_created_key_has_the_format_and_verifies_as_its_principal() {
        let (db, keys) = keys(Duration::from_secs(5)).await;
        let created = keys.create(&acme(), &scopes(), "ci").await.unwrap();
        let plain = created.key.expose();
        assert_eq!(plain.len(), KEY_PREFIX.len() + KEY_ID_CHARS + 1 + SECRET_CHARS, "{}", plain.len());
        assert!(plain.starts_with(KEY_PREFIX));
        let id = created.key.key_id();
        assert_eq!(id, created.row.key_id);
        assert!(id.len() == KEY_ID_CHARS && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert!(secret_of(&created.key).bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        let parsed = parse(plain).expect("a created key parses");
        assert_eq!(parsed.key_id, id);
        assert_eq!(URL_SAFE_NO_PAD.encode(parsed.secret), secret_of(&created.key));

        let principal = keys.verify(plain).await.unwrap();
        assert_eq!(principal.tenant, acme());
        assert_eq!(principal.key_id.as_deref(), Some(id));
        assert_eq!(principal.scopes, scopes());

        // The table holds a salted hash, not the secret.
        let stored = db.api_key(id).await.unwrap().unwrap();
        assert_eq!((stored.salt.len(), stored.hash.len()), (SALT_BYTES, 32));
        assert_eq!(stored.row, created.row, "the returned row is the stored one");
        assert_eq!(stored.hash, salted_hash(&stored.salt, &parsed.secret));
        assert!(!stored.hash.windows(SECRET_BYTES).any(|w| w == parsed.secret));
        let other = keys.create(&acme(), &scopes(), "").await.unwrap();
        assert_ne!(other.key.key_id(), id);
        assert_ne!(secret_of(&other.key), secret_of(&created.key));
        assert_ne!(db.api_key(other.key.key_id()).await.unwrap().unwrap().salt, stored.salt);
    }

    #[test]
    fn only_the_exact_format_parses() {
        let secret = URL_SAFE_NO_PAD.encode([0xfbu8; SECRET_BYTES]);
        assert!(secret.contains('_') && secret.contains('-'), "the alphabet's own _ is in the secret: {secret}");
        let good = format!("fdk_0123456789abcdef_{secret}");
        assert!(parse(&good).is_some());
        // The last character carries 4 bits of the secret and 2 that must be zero: `s` is
        // 0b101100, `t` the same bits with a stray 1.
        assert!(secret.ends_with('s'), "{secret}");
        let stray_bits = format!("fdk_0123456789abcdef_{}t", &secret[..SECRET_CHARS - 1]);
        for bad in [
            String::new(),
            "fdk_".into(),
            good.replace("fdk_", "fdx_"),
            good.replace("0123456789abcdef", "0123456789ABCDEF"),
            good.replace("0123456789abcdef", "0123456789abcdeg"),
            good.replace("0123456789abcdef_", "0123456789abcdef-"),
            good.replace("0123456789abcdef", "0123456789abcde"),
            format!("{good}A"),
            good[..good.len() - 1].to_owned(),
            format!("fdk_0123456789abcdef_{}", secret.replace('-', "+")),
            format!("fdk_0123456789abcdef_{}=", &secret[..SECRET_CHARS - 1]),
            format!("fdk_0123456789abcdéf_{}", &secret[..SECRET_CHARS - 1]),
            stray_bits,
        ] {
            assert!(parse(&bad).is_none(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn a_wrong_secret_an_unknown_id_and_garbage_are_refused() {
        let (_db, keys) = keys(Duration::from_secs(5)).await;
        let created = keys.create(&acme(), &scopes(), "").await.unwrap();
        let id = created.key.key_id();
        let wrong = format!("{KEY_PREFIX}{id}_{}", URL_SAFE_NO_PAD.encode([7u8; SECRET_BYTES]));
        let unknown = format!("{KEY_PREFIX}ffffffffffffffff_{}", secret_of(&created.key));
        for presented in [wrong.as_str(), unknown.as_str(), "fdk_nope", "Bearer x"] {
            assert!(matches!(keys.verify(presented).await, Err(AccessError::InvalidKey)), "{presented}");
        }
        assert_eq!(keys.table_reads(), 2, "malformed keys read no table");
        // Failures are not remembered: each wrong attempt reads the table again.
        assert!(keys.verify(&wrong).await.is_err());
        assert_eq!(keys.table_reads(), 3);
        assert!(keys.verify(created.key.expose()).await.is_ok(), "the right key still works");
    }

    #[tokio::test]
    async fn a_revoked_key_is_refused_at_once_here() {
        let (db, keys) = keys(Duration::from_secs(60)).await;
        let created = keys.create(&acme(), &scopes(), "").await.unwrap();
        assert!(keys.verify(created.key.expose()).await.is_ok());
        assert!(keys.revoke(created.key.key_id()).await.unwrap());
        assert!(matches!(keys.verify(created.key.expose()).await, Err(AccessError::InvalidKey)));
        assert!(keys.revoke(created.key.key_id()).await.unwrap(), "revoking again succeeds");
        assert!(!keys.revoke("0000000000000000").await.unwrap(), "an unknown key does not exist");
        let listed = keys.list(Some(&acme())).await.unwrap();
        assert!(listed[0].revoked_at.is_some());
        // And a key revoked elsewhere, before this process ever saw it.
        let other = keys.create(&acme(), &scopes(), "").await.unwrap();
        assert!(db.revoke_api_key(other.key.key_id(), SystemTime::now()).await.unwrap());
        assert!(matches!(keys.verify(other.key.expose()).await, Err(AccessError::InvalidKey)));
    }

    #[tokio::test]
    async fn the_cache_answers_until_its_ttl_then_the_table_is_read_again() {
        let ttl = Duration::from_millis(300);
        let (db, keys) = keys(ttl).await;
        let created = keys.create(&acme(), &scopes(), "").await.unwrap();
        let plain = created.key.expose();
        keys.verify(plain).await.unwrap();
        for _ in 0..10 {
            keys.verify(plain).await.unwrap();
        }
        assert_eq!(keys.table_reads(), 1, "repeated calls within the ttl read no table");
        // Revoked by another process (the CLI): this one trusts its cache until the ttl ends.
        assert!(db.revoke_api_key(created.key.key_id(), SystemTime::now()).await.unwrap());
        assert!(keys.verify(plain).await.is_ok());
        tokio::time::sleep(ttl + Duration::from_millis(50)).await;
        assert!(matches!(keys.verify(plain).await, Err(AccessError::InvalidKey)));
        assert_eq!(keys.table_reads(), 2);

        let (_db, uncached) = self::keys(Duration::ZERO).await;
        let created = uncached.create(&acme(), &scopes(), "").await.unwrap();
        for _ in 0..3 {
            uncached.verify(created.key.expose()).await.unwrap();
        }
        assert_eq!(uncached.table_reads(), 3, "a zero ttl caches nothing");
    }

    #[tokio::test]
    async fn a_cached_key_with_another_secret_is_still_checked() {
        let (_db, keys) = keys(Duration::from_secs(60)).await;
        let created = keys.create(&acme(), &scopes(), "").await.unwrap();
        keys.verify(created.key.expose()).await.unwrap();
        let wrong = format!("{KEY_PREFIX}{}_{}", created.key.key_id(), URL_SAFE_NO_PAD.encode([9u8; SECRET_BYTES]));
        assert!(matches!(keys.verify(&wrong).await, Err(AccessError::InvalidKey)));
    }

    #[tokio::test]
    async fn nothing_that_holds_a_secret_prints_it() {
        let (_db, keys) = keys(Duration::from_secs(60)).await;
        let created = keys.create(&acme(), &scopes(), "ci").await.unwrap();
        keys.verify(created.key.expose()).await.unwrap();
        let secret = secret_of(&created.key).to_owned();
        let printed = [
            format!("{:?}", created.key),
            format!("{created:?}"),
            format!("{created:#?}"),
            format!("{keys:?}"),
            format!("{:?}", KeyError::NoFreeId(3)),
        ];
        for text in printed {
            assert!(!text.contains(&secret) && !text.contains(&secret[..12]), "{text}");
        }
        assert!(format!("{:?}", created.key).contains(created.key.key_id()), "the public id is shown");
    }

    #[tokio::test]
    async fn log_lines_name_the_key_id_never_the_secret() {
        #[derive(Clone, Default)]
        struct Captured(Arc<StdMutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        // With a single dispatcher registered, tracing decides a callsite's interest by the
        // default of whichever thread reaches it first; another test's thread (with no
        // subscriber) would switch "key created" off for good. A second one makes it consult
        // every registered dispatcher, this test's included.
        let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
        let (_db, keys) = keys(Duration::from_secs(60)).await;
        let created = keys.create(&acme(), &scopes(), "").await.unwrap();
        keys.verify(created.key.expose()).await.unwrap();
        let wrong = format!("{KEY_PREFIX}{}_{}", created.key.key_id(), URL_SAFE_NO_PAD.encode([9u8; SECRET_BYTES]));
        assert!(keys.verify(&wrong).await.is_err());
        keys.revoke(created.key.key_id()).await.unwrap();
        assert!(keys.verify(created.key.expose()).await.is_err());
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("key created") && log.contains(created.key.key_id()), "{log}");
        assert!(log.contains("key refused"), "{log}");
        for secret in [secret_of(&created.key), &wrong[KEY_PREFIX.len() + KEY_ID_CHARS + 1..]] {
            assert!(!log.contains(secret), "{log}");
        }
    }

    #[tokio::test]
    async fn the_auth_policy_admits_a_key_by_its_scopes() {
        static TRIAGE: ServiceAccess = ServiceAccess {
            service: "frontdesk.v1.TriageService",
            scope: "triage",
            methods: &[("GetTicket", Access::Read), ("TriageTicket", Access::Write)],
        };
        let (_db, keys) = keys(Duration::from_secs(5)).await;
        let keys = Arc::new(keys);
        let policy = AuthPolicy {
            verifier: Some(keys.clone() as Arc<dyn KeyVerifier>),
            open_services: HashSet::new(),
            methods: MethodTable::new([&TRIAGE]),
        };
        let created = keys.create(&acme(), &scopes(), "").await.unwrap();
        let header = format!("Bearer {}", created.key.expose());
        let principal = policy.admit("/frontdesk.v1.TriageService/GetTicket", Some(header.as_bytes())).await.unwrap();
        assert_eq!((principal.tenant, principal.key_id.as_deref()), (acme(), Some(created.key.key_id())));
        let refused = policy.admit("/frontdesk.v1.TriageService/TriageTicket", Some(header.as_bytes())).await;
        assert!(matches!(&refused, Err(AccessError::ScopeMissing { scope }) if scope == "triage:write"), "{refused:?}");
        keys.revoke(created.key.key_id()).await.unwrap();
        let refused = policy.admit("/frontdesk.v1.TriageService/GetTicket", Some(header.as_bytes())).await;
        assert!(matches!(refused, Err(AccessError::InvalidKey)), "{refused:?}");
        let missing = policy.admit("/frontdesk.v1.TriageService/GetTicket", None).await;
        assert!(matches!(missing, Err(AccessError::MissingKey)), "{missing:?}");
    }
}
