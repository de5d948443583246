//! One-off commands on the configured database: importing HR data for the investigation
//! workflow and exporting its records as CSV. `main.rs` parses the command line; this module
//! opens the database and calls the store.

use std::{io::Write, path::Path};

use frontdesk_store::{
    investigation::{write_audit_csv, write_pending_actions_csv, ImportCounts},
    Database, StoreError, StoreOptions,
};

use crate::config::Config;

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
