//! One-off commands on the configured database: importing HR data for the investigation
//! workflow, exporting its records as CSV, and creating, listing and revoking API keys.
//! `main.rs` parses the command line; this module opens the database and calls the store.

use std::{io::Write, path::Path, time::Duration};

use frontdesk_store::{
    investigation::{write_audit_csv, write_pending_actions_csv, ImportCounts},
    ApiKeyRow, Database, StoreError, StoreOptions,
};
use frontdesk_workflows::Tenant;

use crate::{
    auth::{
        keys::{ApiKeys, CreatedKey, KeyError},
        Scopes,
    },
    config::Config,
};

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// Every investigation's audit trail.
    Audit,
    /// Every pending action, awaiting or answered.
    PendingActions,
}

async fn open(config: &Config) -> Result<Database, StoreError> {
    let options = StoreOptions {
        max_connections: config.database.max_connections,
        checkpoint_retention: config.database.checkpoint_retention,
    };
    Database::connect(&config.database.url, options).await
}

/// Imports the HR CSV files of `dir` into the configured database (migrating it first).
pub async fn import_hr_data(config: &Config, dir: &Path) -> Result<ImportCounts, StoreError> {
    let db = open(config).await?;
    let counts = db.import_hr_data(dir).await;
    db.close().await;
    counts
}

/// Writes `what` as CSV to `out`.
pub async fn export(config: &Config, what: Export, out: impl Write) -> Result<(), StoreError> {
    let db = open(config).await?;
    let written = match what {
        Export::Audit => match db.audit_all().await {
            Ok(rows) => write_audit_csv(&rows, out),
            Err(e) => Err(e),
        },
        Export::PendingActions => match db.pending_actions(None, None).await {
            Ok(rows) => write_pending_actions_csv(&rows, out),
            Err(e) => Err(e),
        },
    };
    db.close().await;
    written
}

/// Creates an API key (see [`ApiKeys::create`]); the caller shows its plain key once.
pub async fn create_key(config: &Config, tenant: &Tenant, scopes: &Scopes, name: &str) -> Result<CreatedKey, KeyError> {
    let db = open(config).await?;
    let created = ApiKeys::new(db.clone(), Duration::ZERO).create(tenant, scopes, name).await;
    db.close().await;
    created
}

/// Every API key, or `tenant`'s, newest first, revoked ones included.
pub async fn list_keys(config: &Config, tenant: Option<&Tenant>) -> Result<Vec<ApiKeyRow>, StoreError> {
    let db = open(config).await?;
    let keys = ApiKeys::new(db.clone(), Duration::ZERO).list(tenant).await;
    db.close().await;
    keys
}

/// Revokes the API key `key_id`; returns whether it exists (revoking twice is no error).
pub async fn revoke_key(config: &Config, key_id: &str) -> Result<bool, StoreError> {
    let db = open(config).await?;
    let found = ApiKeys::new(db.clone(), Duration::ZERO).revoke(key_id).await;
    db.close().await;
    found
}

/// `keys` as an aligned table with a header: id, tenant, scopes, name, created and revoked
/// (RFC 3339 UTC, `-` when not revoked). Salts and hashes are not in a listing at all.
pub fn write_keys_table(keys: &[ApiKeyRow], mut out: impl Write) -> std::io::Result<()> {
    let time = |t: std::time::SystemTime| {
        let t = crate::convert::timestamp(t);
        prost_types::Timestamp { seconds: t.seconds, nanos: 0 }.to_string()
    };
    let header = ["KEY ID", "TENANT", "SCOPES", "NAME", "CREATED", "REVOKED"].map(String::from);
    let rows: Vec<[String; 6]> = keys
        .iter()
        .map(|k| {
            [
                k.key_id.clone(),
                k.tenant.clone(),
                k.scopes.clone(),
                if k.name.is_empty() { "-".into() } else { k.name.clone() },
                time(k.created_at),
                k.revoked_at.map_or_else(|| "-".into(), time),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}
