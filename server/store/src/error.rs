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

/// `url` with any password replaced by `<redacted>` (see [`redact_url_password`]).
pub(crate) fn redact(url: &str) -> String {
    redact_url_password(url).unwrap_or_else(|| url.to_owned())
}

/// `url` with its password replaced by `<redacted>`, wherever a database URL may carry one:
/// after the user (`postgres://user:PASSWORD@host/db`, `redis://:PASSWORD@host`) or as a
/// query parameter (`postgres://user@host/db?password=PASSWORD`, which PostgreSQL's drivers
/// accept too). `None` when it carries none.
pub fn redact_url_password(url: &str) -> Option<String> {
    const REDACTED: &str = "<redacted>";
    let (scheme, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let mut redacted = false;
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => {
                redacted = true;
                format!("{user}:{REDACTED}@{host}")
            }
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let (before_query, query_and_fragment) = tail.split_once('?').unwrap_or((tail, ""));
    let (query, fragment) = match query_and_fragment.split_once('#') {
        Some((query, fragment)) => (query, Some(fragment)),
        None => (query_and_fragment, None),
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, value)) if name.eq_ignore_ascii_case("password") && !value.is_empty() => {
                redacted = true;
                format!("{name}={REDACTED}")
            }
            _ => pair.to_owned(),
        })
        .collect();
    if !redacted {
        return None;
    }
    let mut out = format!("{scheme}://{authority}{before_query}");
    if tail.contains('?') {
        out.push('?');
        out.push_str(&query.join("&"));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(fragment);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::{redact, redact_url_password};

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:secret@h:5432/db?x=1"), "postgres://u:<redacted>@h:5432/db?x=1");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact("sqlite://a/b.db"), "sqlite://a/b.db");
        assert_eq!(redact("sqlite::memory:"), "sqlite::memory:");
        assert_eq!(redact("redis://:secret@h:6379/0"), "redis://:<redacted>@h:6379/0");
        assert_eq!(
            redact("postgres://u@h/db?sslmode=require&password=secret#x"),
            "postgres://u@h/db?sslmode=require&password=<redacted>#x"
        );
        assert_eq!(redact("postgres://u:a@h/db?PASSWORD=b"), "postgres://u:<redacted>@h/db?PASSWORD=<redacted>");
        assert_eq!(redact_url_password("postgres://u@h/db?password="), None);
        assert_eq!(redact_url_password("postgres://u@h/db?sslmode=require"), None);
        assert_eq!(redact_url_password("https://h/p?q=a:b@c"), None);
    }
}
