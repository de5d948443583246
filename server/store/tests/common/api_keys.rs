//! API keys: records round-trip, listings come newest first, per tenant or all, without
//! salts and hashes, a taken key id is refused, and revocation is idempotent and listed.

use std::time::{Duration, UNIX_EPOCH};

use frontdesk_store::{ApiKeyRecord, ApiKeyRow, Database};

fn record(key_id: &str, tenant: &str, created_ms: u64) -> ApiKeyRecord {
    ApiKeyRecord {
        row: ApiKeyRow {
            key_id: key_id.to_owned(),
            tenant: tenant.to_owned(),
            scopes: "conversation:write,triage:read".into(),
            name: format!("key {key_id}"),
            created_at: UNIX_EPOCH + Duration::from_millis(created_ms),
            revoked_at: None,
        },
        salt: vec![7; 16],
        hash: (0..32).collect(),
    }
}

pub async fn run_all(db: &Database) {
    // Each run has its own tenants and ids: PostgreSQL tests share nothing, but stay tidy.
    let run = &super::ns()[2..10];
    let (a, b) = (format!("a-{run}"), format!("b-{run}"));
    let id = |n: u32| format!("{run}{n:08x}");

    assert!(db.api_key(&id(1)).await.unwrap().is_none());
    assert!(db.api_keys(Some(&a)).await.unwrap().is_empty());

    let first = record(&id(1), &a, 1_700_000_000_000);
    let mut second = record(&id(2), &a, 1_700_000_001_000);
    second.row.name = String::new();
    second.salt = vec![1; 16];
    let other = record(&id(3), &b, 1_700_000_000_500);
    for key in [&first, &second, &other] {
        assert!(db.insert_api_key(key).await.unwrap());
    }
    let clash = record(&id(1), &b, 1_800_000_000_000);
    assert!(!db.insert_api_key(&clash).await.unwrap(), "a taken key id is refused");
    assert_eq!(db.api_key(&id(1)).await.unwrap().as_ref(), Some(&first), "and the first record stays");
    assert_eq!(db.api_key(&id(2)).await.unwrap().as_ref(), Some(&second));

    let listed = db.api_keys(Some(&a)).await.unwrap();
    assert_eq!(listed, vec![second.row.clone(), first.row.clone()], "newest first, that tenant's only");
    let all: Vec<ApiKeyRow> =
        db.api_keys(None).await.unwrap().into_iter().filter(|k| k.key_id.starts_with(run)).collect();
    assert_eq!(all, vec![second.row.clone(), other.row.clone(), first.row.clone()]);

    let revoked_at = UNIX_EPOCH + Duration::from_millis(1_700_000_002_000);
    assert!(db.revoke_api_key(&id(1), revoked_at).await.unwrap());
    let later = revoked_at + Duration::from_secs(60);
    assert!(db.revoke_api_key(&id(1), later).await.unwrap(), "revoking again succeeds");
    assert!(!db.revoke_api_key(&id(9), later).await.unwrap(), "an unknown key is not revoked");
    let found = db.api_key(&id(1)).await.unwrap().unwrap();
    assert_eq!(found.row.revoked_at, Some(revoked_at), "the first revocation time is kept");
    assert_eq!((&found.salt, &found.hash), (&first.salt, &first.hash));
    let listed = db.api_keys(Some(&a)).await.unwrap();
    assert_eq!(listed[1].key_id, id(1));
    assert_eq!(listed[1].revoked_at, Some(revoked_at), "a revoked key is listed with its time");
    assert_eq!(listed[0].revoked_at, None);

    let printed = format!("{found:?}");
    assert!(printed.contains("<32 bytes>") && !printed.contains("[0, 1, 2"), "{printed}");
}
