//! Throwaway PostgreSQL databases for tests and benchmarks that share one server.
//!
//! Every test run on a machine uses the same PostgreSQL server (`scripts/ensure-postgres.sh`),
//! and runs may overlap (a developer's suite beside a CI clone's). So a scratch database is
//! dropped by whoever created it, when it goes out of scope, and never swept by name: a sweep
//! would drop the databases of a run still going.

use sqlx::Connection;

/// A fresh, empty database on a server, dropped (`WITH (FORCE)`, ending the sessions still
/// open on it) when this value is dropped, on panic too.
pub struct ScratchDatabase {
    server: String,
    name: String,
    url: String,
    /// Cleared once the database was dropped or kept, so that `Drop` leaves it alone.
    armed: bool,
}

impl ScratchDatabase {
    /// Creates `frontdesk_<label>_<uuid>` on the server at `server` (a URL whose database is
    /// one to connect to for the `CREATE DATABASE`). `label` is lowercase letters, digits and `_`.
    pub async fn create(server: &str, label: &str) -> Result<Self, sqlx::Error> {
        assert!(label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "label {label:?}");
        let name = format!("frontdesk_{label}_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::PgConnection::connect(server).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut admin).await?;
        admin.close().await?;
        let url = with_database(server, &name);
        Ok(Self { server: server.to_owned(), name, url, armed: true })
    }

    /// The URL of the scratch database: the server's, with the database replaced.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name on its server.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Drops the database now and says whether that worked, where going out of scope can only
    /// log a failure.
    pub async fn drop_database(mut self) -> Result<(), sqlx::Error> {
        self.armed = false;
        drop_on(&self.server, &self.name).await
    }

    /// Keeps the database on the server (for inspection); returns its URL.
    pub fn keep(mut self) -> String {
        self.armed = false;
        std::mem::take(&mut self.url)
    }
}

async fn drop_on(server: &str, name: &str) -> Result<(), sqlx::Error> {
    let mut admin = sqlx::PgConnection::connect(server).await?;
    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
    sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut admin).await?;
    admin.close().await
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let (server, name) = (self.server.clone(), self.name.clone());
        // On a thread with its own runtime: the caller's runtime may be the one this drop
        // blocks (a current-thread test), or already shutting down.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(drop_on(&server, &name)).map_err(Box::<dyn std::error::Error + Send + Sync>::from)
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(database = %self.name, %error, "could not drop a scratch database"),
            Err(_) => tracing::warn!(database = %self.name, "could not drop a scratch database: its thread panicked"),
        }
    }
}

/// `server` with its database path replaced by `name`, keeping any query string.
pub fn with_database(server: &str, name: &str) -> String {
    let (base, query) = match server.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (server, None),
    };
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn rewrites_the_database_of_a_url() {
        assert_eq!(with_database("postgres://u@h:1/db", "x"), "postgres://u@h:1/x");
        assert_eq!(with_database("postgres://u@h:1/db?sslmode=disable", "x"), "postgres://u@h:1/x?sslmode=disable");
        assert_eq!(with_database("postgres://u@h:1", "x"), "postgres://u@h:1/x");
    }
}
