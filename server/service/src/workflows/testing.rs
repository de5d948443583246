//! What the workflows' desk tests share: the databases each test runs on.

use frontdesk_store::{sqlx, Database, StoreOptions};

/// A fresh SQLite database, and a fresh PostgreSQL one (named `frontdesk_<label>_<uuid>`) when
/// `FRONTDESK_TEST_POSTGRES_URL` names a server.
pub(crate) async fn databases(label: &str) -> Vec<Database> {
    let options = || StoreOptions { max_connections: 2, checkpoint_retention: 2 };
    let mut databases = vec![Database::connect("sqlite::memory:", options()).await.unwrap()];
    if let Ok(server) = std::env::var("FRONTDESK_TEST_POSTGRES_URL") {
        let admin = sqlx::PgPool::connect(&server).await.expect("connect to FRONTDESK_TEST_POSTGRES_URL");
        let name = format!("frontdesk_{label}_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await.unwrap();
        admin.close().await;
        let (base, _) = server.rsplit_once('/').expect("a database URL with a path");
        databases.push(Database::connect(&format!("{base}/{name}"), options()).await.unwrap());
    }
    databases
}
