-- API keys: created, listed and revoked by `frontdesk-server keys`, read by the server's auth
-- layer. Keep in step with migrations/postgres (0009_api_keys.sql).
--
-- A key is `fdk_<key_id>_<secret>`. `key_id` is public (listings, logs); the secret is never
-- stored: only a random `salt` and `hash` = SHA-256(salt || secret). `scopes` is the key's scope
-- list as `frontdesk-server keys create --scopes` takes it (`conversation:write,triage:read`).
-- A revoked key keeps its row, with the time of revocation, so listings still show it.
CREATE TABLE api_keys (
    key_id        TEXT    NOT NULL PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    scopes        TEXT    NOT NULL,
    name          TEXT    NOT NULL DEFAULT '',
    salt          BLOB    NOT NULL,
    hash          BLOB    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    revoked_at_ms INTEGER
) WITHOUT ROWID;
-- One tenant's keys, newest first.
CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at_ms);
