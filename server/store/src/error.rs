use crate::db::DbKind;

/// Why a store operation failed. Connection strings in messages have their password removed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL is neither `sqlite:` nor `postgres:`/`postgresql:`.
    #[error("unsupported database url {url:?}: expected sqlite://FILE, sqlite::memory: or postgres://...")]
    UnsupportedUrl { url: String },
    /// The URL has a supported scheme but could not be parsed.
    #[error("invalid {kind} database url {url:?}")]
    InvalidUrl {
        kind: DbKind,
        url: String,
        #[source]
        source: sqlx::Error,
    },
    /// The directory of a SQLite file does not exist. It is never created: a mistyped path
    /// would otherwise grow a directory tree and an empty database where nobody looks.
    #[error("the directory {} of the SQLite database does not exist: create it, or fix the path", .path.display())]
    MissingDir { path: std::path::PathBuf },
    /// The database could not be reached or refused the connection.
    #[error("cannot connect to {kind} database {url:?}")]
    Connect {
        kind: DbKind,
        url: String,
        #[source]
        source: sqlx::Error,
    },
    /// Applying the schema migrations failed.
    #[error("migrating the {kind} database failed")]
    Migrate {
        kind: DbKind,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A statement failed.
    #[error("database query failed: {operation}")]
    Query {
        operation: &'static str,
        #[source]
        source: sqlx::Error,
    },
    /// A value could not be encoded for storage.
    #[error("cannot encode {what} for storage")]
    Encode {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The Redis URL could not be parsed.
    #[error("invalid redis url {url:?}")]
    InvalidRedisUrl {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    /// The Redis server could not be reached in time, refused the connection or cannot run
    /// the store's scripts.
    #[error("cannot connect to redis {url:?}")]
    RedisConnect {
        url: String,
        #[source]
        source: redis::RedisError,
    },
    /// A file of HR data ([`Database::import_hr_data`](crate::Database::import_hr_data)) could
    /// not be read, or a row of it is invalid. `line` is 1-based (the header is line 1); `None`
    /// when the problem is the whole file (it is missing, say). `problem` says what is wrong.
    #[error("invalid HR data in {}{}", .file.display(), at_line(*.line))]
    HrData {
        file: std::path::PathBuf,
        line: Option<u64>,
        #[source]
        problem: crate::investigation::HrDataProblem,
    },
    /// Rows could not be written out as CSV (the writer failed).
    #[error("cannot write {what} as CSV")]
    CsvExport {
        what: &'static str,
        #[source]
        source: csv::Error,
    },
    /// Stored data could not be decoded.
    #[error("corrupt stored data: {what}")]
    Corrupt {
        what: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    pub(crate) fn query(operation: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
        move |source| StoreError::Query { operation, source }
    }
}

/// `", line N"`, or nothing for a problem of a whole file.
fn at_line(line: Option<u64>) -> String {
    line.map(|n| format!(", line {n}")).unwrap_or_default()
}

/// `url` with any password replaced by `***`.
pub(crate) fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_owned() };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else { return url.to_owned() };
    let userinfo = &authority[..at];
    let Some(colon) = userinfo.find(':') else { return url.to_owned() };
    format!("{}://{}:***{}", &url[..scheme_end], &userinfo[..colon], &rest[at..])
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:secret@h:5432/db?x=1"), "postgres://u:***@h:5432/db?x=1");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact("sqlite://a/b.db"), "sqlite://a/b.db");
        assert_eq!(redact("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(redact("redis://:secret@h:6379/0"), "redis://:***@h:6379/0");
    }
}
