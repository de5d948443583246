//! API keys as stored: one row per key, with its tenant, scopes and a salted hash of its
//! secret. Plain data access: the server's `auth::keys` mints keys, hashes secrets and
//! verifies presented keys; nothing here ever sees a secret.

use std::{fmt, time::SystemTime};

use crate::{from_ms, on_pool, on_writer, to_ms, Database, StoreError};

/// What a listing shows of a key: everything but its salt and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRow {
    /// The key's public id (16 lowercase hex characters, as minted by the server).
    pub key_id: String,
    pub tenant: String,
    /// The scope list, such as `conversation:write,triage:read`.
    pub scopes: String,
    /// A label for people; may be empty.
    pub name: String,
    /// Kept at millisecond precision.
    pub created_at: SystemTime,
    /// When the key was first revoked; `None` while it is valid.
    pub revoked_at: Option<SystemTime>,
}

/// A key with what verifying it needs: a random salt and SHA-256(salt || secret).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub row: ApiKeyRow,
    pub salt: Vec<u8>,
    pub hash: Vec<u8>,
}

/// Shows the salt and hash by length only: they are of no use in a log line, and a debug print
/// of a record should look like a listing.
impl fmt::Debug for ApiKeyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyRecord")
            .field("row", &self.row)
            .field("salt", &format_args!("<{} bytes>", self.salt.len()))
            .field("hash", &format_args!("<{} bytes>", self.hash.len()))
            .finish()
    }
}

const INSERT: &str = "INSERT INTO api_keys (key_id, tenant, scopes, name, salt, hash, created_at_ms, revoked_at_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key_id) DO NOTHING";
const FIND: &str = "SELECT key_id, tenant, scopes, name, created_at_ms, revoked_at_ms, salt, hash \
     FROM api_keys WHERE key_id = $1";
/// Newest first (ties by key id, descending).
const LIST_ALL: &str = "SELECT key_id, tenant, scopes, name, created_at_ms, revoked_at_ms \
     FROM api_keys ORDER BY created_at_ms DESC, key_id DESC";
const LIST_TENANT: &str = "SELECT key_id, tenant, scopes, name, created_at_ms, revoked_at_ms \
     FROM api_keys WHERE tenant = $1 ORDER BY created_at_ms DESC, key_id DESC";
/// A second revocation keeps the time of the first.
const REVOKE: &str = "UPDATE api_keys SET revoked_at_ms = COALESCE(revoked_at_ms, $2) WHERE key_id = $1";

#[derive(sqlx::FromRow)]
struct Row {
    key_id: String,
    tenant: String,
    scopes: String,
    name: String,
    created_at_ms: i64,
    revoked_at_ms: Option<i64>,
}

impl From<Row> for ApiKeyRow {
    fn from(r: Row) -> Self {
        ApiKeyRow {
            key_id: r.key_id,
            tenant: r.tenant,
            scopes: r.scopes,
            name: r.name,
            created_at: from_ms(r.created_at_ms),
            revoked_at: r.revoked_at_ms.map(from_ms),
        }
    }
}

#[derive(sqlx::FromRow)]
struct RecordRow {
    #[sqlx(flatten)]
    row: Row,
    salt: Vec<u8>,
    hash: Vec<u8>,
}

impl Database {
    /// Stores a new key. Returns `false`, storing nothing, when its key id is taken already.
    pub async fn insert_api_key(&self, key: &ApiKeyRecord) -> Result<bool, StoreError> {
        let row = &key.row;
        on_writer!(self, exec => {
            sqlx::query(INSERT)
                .bind(&row.key_id)
                .bind(&row.tenant)
                .bind(&row.scopes)
                .bind(&row.name)
                .bind(&key.salt)
                .bind(&key.hash)
                .bind(to_ms(row.created_at))
                .bind(row.revoked_at.map(to_ms))
                .execute(exec)
                .await
                .map(|done| done.rows_affected() == 1)
        })
        .map_err(StoreError::query("insert api key"))
    }

    /// The key with id `key_id`, revoked or not.
    pub async fn api_key(&self, key_id: &str) -> Result<Option<ApiKeyRecord>, StoreError> {
        let found: Option<RecordRow> = on_pool!(self, conn => {
            sqlx::query_as(FIND).bind(key_id).fetch_optional(conn).await
        })
        .map_err(StoreError::query("find api key"))?;
        Ok(found.map(|r| ApiKeyRecord { row: r.row.into(), salt: r.salt, hash: r.hash }))
    }

    /// Every key, or `tenant`'s only, newest first; revoked keys included.
    pub async fn api_keys(&self, tenant: Option<&str>) -> Result<Vec<ApiKeyRow>, StoreError> {
        let rows: Vec<Row> = on_pool!(self, conn => {
            match tenant {
                Some(tenant) => sqlx::query_as(LIST_TENANT).bind(tenant).fetch_all(conn).await,
                None => sqlx::query_as(LIST_ALL).fetch_all(conn).await,
            }
        })
        .map_err(StoreError::query("list api keys"))?;
        Ok(rows.into_iter().map(ApiKeyRow::from).collect())
    }

    /// Revokes the key `key_id` as of `at`. Returns whether the key exists; revoking a revoked
    /// key again succeeds and keeps its first revocation time.
    pub async fn revoke_api_key(&self, key_id: &str, at: SystemTime) -> Result<bool, StoreError> {
        on_writer!(self, exec => {
            sqlx::query(REVOKE).bind(key_id).bind(to_ms(at)).execute(exec).await.map(|done| done.rows_affected() > 0)
        })
        .map_err(StoreError::query("revoke api key"))
    }
}
