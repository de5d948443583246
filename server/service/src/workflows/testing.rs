//! What the workflows' desk tests share: the databases each test runs on.

use frontdesk_store::{scratch::ScratchDatabase, Database, StoreOptions};

/// A fresh SQLite database, and a fresh PostgreSQL one (a scratch database labelled `label`)
/// when `FRONTDESK_TEST_POSTGRES_URL` names a server. A test runs the same steps on each:
/// `for db in databases(..).await`. The scratch database is dropped when that loop ends.
pub(crate) async fn databases(label: &str) -> Databases {
    let options = || StoreOptions { max_connections: 2, checkpoint_retention: 2 };
    let mut list = vec![Database::connect("sqlite::memory:", options()).await.unwrap()];
    let mut scratch = None;
    if let Ok(server) = std::env::var("FRONTDESK_TEST_POSTGRES_URL") {
        let created = ScratchDatabase::create(&server, label).await.expect("create a scratch database");
        list.push(Database::connect(created.url(), options()).await.unwrap());
        scratch = Some(created);
    }
    Databases { list, scratch }
}

pub(crate) struct Databases {
    list: Vec<Database>,
    scratch: Option<ScratchDatabase>,
}

impl<'a> IntoIterator for &'a Databases {
    type Item = &'a Database;
    type IntoIter = std::slice::Iter<'a, Database>;

    fn into_iter(self) -> Self::IntoIter {
        self.list.iter()
    }
}

impl IntoIterator for Databases {
    type Item = Database;
    type IntoIter = Iter;

    fn into_iter(self) -> Iter {
        Iter { list: self.list.into_iter(), _scratch: self.scratch }
    }
}

/// The databases one by one; the scratch one lives as long as the iteration.
pub(crate) struct Iter {
    list: std::vec::IntoIter<Database>,
    _scratch: Option<ScratchDatabase>,
}

impl Iterator for Iter {
    type Item = Database;

    fn next(&mut self) -> Option<Database> {
        self.list.next()
    }
}
