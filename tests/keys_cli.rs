//! `frontdesk-server keys create|list|revoke`: the real binary on a SQLite file. The key is
//! printed once, alone on stdout; listings and the database never hold the secret; a key the
//! CLI made verifies through the server's `ApiKeys` until the CLI revokes it; bad input exits 2.

use std::{path::Path, process::Command, time::Duration};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use frontdesk_server::{
    auth::{keys::ApiKeys, KeyVerifier, Scopes},
    error::AccessError,
};
use frontdesk_store::{Database, StoreOptions};
use frontdesk_workflows::Tenant;

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(db: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_frontdesk-server"))
        .arg("--database-url")
        .arg(format!("sqlite://{}", db.display()))
        .args(args)
        .env_remove("FRONTDESK_CONFIG")
        .output()
        .unwrap();
    Output {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Creates a key; returns it and its id.
fn create(db: &Path, tenant: &str, scopes: &str, name: &str) -> (String, String) {
    let out = run(db, &["keys", "create", "--tenant", tenant, "--scopes", scopes, "--name", name]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout is the key alone: {:?}", out.stdout);
    let key = lines[0].to_owned();
    let rest = key.strip_prefix("fdk_").unwrap_or_else(|| panic!("{key}"));
    let (id, secret) = rest.split_at(16);
    let secret = secret.strip_prefix('_').unwrap();
    assert!(id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{id}");
    assert_eq!(URL_SAFE_NO_PAD.decode(secret).unwrap().len(), 32, "{secret}");
    assert!(
        out.stderr.contains(&format!("key {id} for tenant {tenant}, scopes "))
            && out.stderr.contains("cannot be shown again"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(secret), "{}", out.stderr);
    (key.clone(), id.to_owned())
}

/// The listing's rows (header checked and dropped), each split into its columns.
fn list(db: &Path, args: &[&str]) -> Vec<Vec<String>> {
    let out = run(db, &[&["keys", "list"], args].concat());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stdout.contains("fdk_"), "{}", out.stdout);
    let mut lines = out.stdout.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("KEY ID") && header.trim_end().ends_with("REVOKED"), "{header}");
    // Columns are separated by two spaces or more; a name has single spaces at most.
    lines
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect::<Vec<_>>())
        .collect()
}

fn secret_of(key: &str) -> &str {
    &key["fdk_".len() + 17..]
}

async fn verify(db: &Path, key: &str) -> Result<frontdesk_server::auth::Principal, AccessError> {
    let url = format!("sqlite://{}", db.display());
    let database = Database::connect(&url, StoreOptions::default()).await.unwrap();
    let verified = ApiKeys::new(database.clone(), Duration::ZERO).verify(key).await;
    database.close().await;
    verified
}

#[tokio::test]
async fn create_list_revoke() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");

    let (key, id) = create(&db, "acme", "conversation:write,triage:read", "ci bot");
    let (other_key, other_id) = create(&db, "beta", "*:admin", "");
    assert_ne!(id, other_id);

    let rows = list(&db, &[]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let acme = rows.iter().find(|r| r[0] == id).unwrap();
    assert_eq!(&acme[1..4], ["acme", "conversation:write,triage:read", "ci bot"], "{acme:?}");
    assert!(acme[4].ends_with('Z') && acme[4].len() == 20, "created, RFC 3339: {acme:?}");
    assert_eq!(acme[5], "-", "not revoked: {acme:?}");
    let beta = rows.iter().find(|r| r[0] == other_id).unwrap();
    assert_eq!(&beta[1..4], ["beta", "*:admin", "-"], "{beta:?}");
    let ids: Vec<String> = list(&db, &["--tenant", "acme"]).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(ids, [id.as_str()]);
    assert!(list(&db, &["--tenant", "nobody"]).is_empty());

    // The server's verifier takes the CLI's key as its tenant's, with its scopes.
    let principal = verify(&db, &key).await.unwrap();
    assert_eq!(principal.tenant, Tenant::new("acme").unwrap());
    assert_eq!(principal.key_id.as_deref(), Some(id.as_str()));
    assert_eq!(principal.scopes, "conversation:write,triage:read".parse::<Scopes>().unwrap());

    let out = run(&db, &["keys", "revoke", &id]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stderr.contains(&format!("key {id} revoked")), "{}", out.stderr);
    assert_eq!(run(&db, &["keys", "revoke", &id]).code, Some(0), "revoking twice is no error");
    let out = run(&db, &["keys", "revoke", "0123456789abcdef"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("no key 0123456789abcdef"), "{}", out.stderr);
    // A whole key given instead of its id is refused without being echoed.
    let out = run(&db, &["keys", "revoke", &key]);
    assert_eq!(out.code, Some(2));
    assert!(!out.stderr.contains(secret_of(&key)) && out.stderr.contains("key id"), "{}", out.stderr);

    let rows = list(&db, &["--tenant", "acme"]);
    assert_eq!(rows[0][0], id);
    assert!(rows[0][5].ends_with('Z') && rows[0][5] >= rows[0][4], "revoked, with its time: {:?}", rows[0]);
    assert!(matches!(verify(&db, &key).await, Err(AccessError::InvalidKey)));
    assert!(verify(&db, &other_key).await.is_ok(), "other keys stay valid");

    // The database holds neither secret, as text or as bytes.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for key in [&key, &other_key] {
            let text = secret_of(key);
            let raw = URL_SAFE_NO_PAD.decode(text).unwrap();
            assert!(!bytes.windows(text.len()).any(|w| w == text.as_bytes()));
            assert!(!bytes.windows(raw.len()).any(|w| w == raw.as_slice()));
        }
    }
}

#[test]
fn bad_tenants_and_scopes_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let cases: [(&str, &str, &str); 5] = [
        ("Acme", "conversation:read", "tenant name \"Acme\""),
        ("a/b", "conversation:read", "tenant name \"a/b\""),
        ("acme", "tickets:read", "scope \"tickets:read\""),
        ("acme", "conversation:delete", "scope \"conversation:delete\""),
        ("acme", ",", "scope \",\""),
    ];
    for (tenant, scopes, message) in cases {
        let out = run(&db, &["keys", "create", "--tenant", tenant, "--scopes", scopes]);
        assert_eq!(out.code, Some(2), "{tenant} {scopes}: {}", out.stderr);
        assert!(out.stderr.contains(message), "{}", out.stderr);
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    let out = run(&db, &["keys", "list", "--tenant", "Bad"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("tenant name \"Bad\""), "{}", out.stderr);
    assert!(list(&db, &[]).is_empty(), "nothing was created");
}
