//! [`RedisCheckpointer`]: the runtime's [`Checkpointer`] on Redis, where the triage design
//! keeps its active (in-progress) tickets.
//!
//! # Keys
//!
//! With the key prefix `p` (default `frontdesk`) and a thread id such as `C001:TKT-1A2B3C4D`:
//!
//! | key | type | holds |
//! | --- | --- | --- |
//! | `p:checkpoint:{thread_id}:{version}` | hash | one retained checkpoint (fields below) |
//! | `p:thread:{thread_id}` | hash | `version`, `workflow`, `created_at`, `updated_at`, `status` of the newest checkpoint |
//! | `p:idem:{thread_id}` | hash | idempotency key → JSON `{"run_id","version","status","output","fingerprint"}` (`fingerprint` absent when the run had none) |
//! | `p:threads` | sorted set | every thread id, score 0 (ordered by id with `ZRANGEBYLEX`) |
//! | `p:running` | sorted set | the ids of threads whose newest checkpoint is `running` |
//! | `p:lease:{replica}` | string | `1` while the replica's lease lasts (`SET .. PX ttl`; expired by Redis) |
//!
//! So `SCAN MATCH p:checkpoint:C001:*` finds exactly the checkpoints of customer `C001`'s
//! tickets. A checkpoint hash has the fields `version`, `workflow`, `state` (the state bytes
//! as they are, JSON), `run_id`, `status`, `step` and `created_at`, plus `next`, `pending`
//! (JSON: interrupts, answered ids, fan-out task writes), `key`, `fingerprint`, `output` and
//! `owner` (the replica whose run wrote it; absent in checkpoints written before owners were
//! kept) when set. Times are milliseconds since the Unix epoch. Lease expiry is Redis's own
//! clock, so replicas with skewed clocks agree.
//!
//! # Atomicity
//!
//! Every write is one Lua script (`EVALSHA`, loaded at connect and again whenever the server
//! lost it), so it is atomic: `put` checks the thread's version, writes the checkpoint, updates
//! the thread hash and the two sorted sets, records the idempotency key and prunes checkpoints
//! beyond the retention, or does nothing and returns the version that beat it. `latest`,
//! `head` (the newest checkpoint with the thread's creation time, the one read of a turn),
//! `history`, `list_threads` and `delete_thread` are scripts too, so they never see half of a
//! write and each is one round trip. The scripts derive checkpoint keys from the thread id, which needs a single Redis
//! server (or primary); Redis Cluster is not supported.

use std::{fmt, sync::LazyLock, time::Duration};

use async_trait::async_trait;
use frontdesk_runtime::{
    Checkpoint, CheckpointError, Checkpointer, IdempotentRun, Pending, RunMarker, RunStatus, ThreadHead, ThreadPage,
    ThreadQuery, ThreadSummary, UnfinishedRun,
};
use redis::{
    aio::{ConnectionManager, ConnectionManagerConfig},
    Client, ErrorKind, RedisError, Script,
};
use serde::{Deserialize, Serialize};

use crate::{error::redact, from_ms, to_ms, StoreError, DEFAULT_ACQUIRE_TIMEOUT};

/// How long a command may wait for its reply before it fails as unavailable.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Thread ids a `list_threads` script reads from the sorted set per step.
const LIST_BATCH: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisOptions {
    /// Every key starts with `{key_prefix}:`. Default `frontdesk`.
    pub key_prefix: String,
    /// Checkpoints kept per thread, newest first (at least 1; the newest is never pruned).
    /// Default 1.
    pub retention: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self { key_prefix: "frontdesk".to_owned(), retention: 1 }
    }
}

/// Checkpoints in Redis (see the [module docs](self) for the keys). Cheap to clone; clones
/// share one multiplexed connection that reconnects by itself.
#[derive(Clone)]
pub struct RedisCheckpointer {
    conn: ConnectionManager,
    prefix: String,
    retention: usize,
}

impl fmt::Debug for RedisCheckpointer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCheckpointer").field("prefix", &self.prefix).field("retention", &self.retention).finish()
    }
}

// KEYS: 1 thread hash, 2 the new checkpoint's hash, 3 idempotency hash, 4 threads set, 5 running set.
// ARGV: 1 thread id, 2 checkpoint key prefix, 3 version, 4 retention, 5 workflow, 6 created_at,
//       7 run status, 8 '1' to record the idempotency key, 9 the key, 10 its record,
//       11.. the checkpoint's field/value pairs.
// Returns -1 when written, otherwise the thread's current version (0: no thread).
static PUT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local version = tonumber(ARGV[3])
if current ~= version - 1 then
  return current
end
if current == 0 then
  redis.call('HSET', KEYS[1], 'created_at', ARGV[6])
  redis.call('ZADD', KEYS[4], 0, ARGV[1])
end
redis.call('HSET', KEYS[1], 'version', ARGV[3], 'workflow', ARGV[5], 'updated_at', ARGV[6], 'status', ARGV[7])
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], unpack(ARGV, 11))
if ARGV[8] == '1' then
  redis.call('HSET', KEYS[3], ARGV[9], ARGV[10])
end
if ARGV[7] == 'running' then
  redis.call('ZADD', KEYS[5], 0, ARGV[1])
else
  redis.call('ZREM', KEYS[5], ARGV[1])
end
-- Retained checkpoints are always a contiguous run of versions ending at the newest, so
-- pruning deletes downwards from the first version beyond the retention until a gap.
local old = version - tonumber(ARGV[4])
while old >= 1 and redis.call('DEL', ARGV[2] .. string.format('%d', old)) == 1 do
  old = old - 1
end
return -1
",
    )
});

// KEYS: 1 thread hash. ARGV: 1 checkpoint key prefix. The newest checkpoint's field/value
// pairs, or nil.
static LATEST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local version = redis.call('HGET', KEYS[1], 'version')
if not version then
  return false
end
return redis.call('HGETALL', ARGV[1] .. version)
",
    )
});

// KEYS: 1 thread hash. ARGV: 1 checkpoint key prefix. The thread's creation time and its
// newest checkpoint's field/value pairs, or nil: `latest` and `thread` in one round trip.
static HEAD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local thread = redis.call('HMGET', KEYS[1], 'version', 'created_at')
if not thread[1] then
  return false
end
return {thread[2], redis.call('HGETALL', ARGV[1] .. thread[1])}
",
    )
});

// KEYS: 1 thread hash. ARGV: 1 checkpoint key prefix, 2 limit. Retained checkpoints (each as
// field/value pairs), newest first.
static HISTORY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local out = {}
local v = redis.call('HGET', KEYS[1], 'version')
if not v then
  return out
end
local version = tonumber(v)
local limit = tonumber(ARGV[2])
while version >= 1 and #out < limit do
  local cp = redis.call('HGETALL', ARGV[1] .. string.format('%d', version))
  if #cp == 0 then
    break
  end
  out[#out + 1] = cp
  version = version - 1
end
return out
",
    )
});

// KEYS: 1 threads set. ARGV: 1 min, 2 max (ZRANGEBYLEX bounds), 3 '1' to filter by workflow,
// 4 the workflow, 5 how many to return at most, 6 thread hash key prefix, 7 batch size.
// Returns {id, workflow, version, created_at, updated_at} per thread, ordered by id.
static LIST: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local min = ARGV[1]
local want = tonumber(ARGV[5])
local batch = tonumber(ARGV[7])
local out = {}
while #out < want do
  local ids = redis.call('ZRANGEBYLEX', KEYS[1], min, ARGV[2], 'LIMIT', 0, batch)
  if #ids == 0 then
    break
  end
  for _, id in ipairs(ids) do
    local t = redis.call('HMGET', ARGV[6] .. id, 'workflow', 'version', 'created_at', 'updated_at')
    if t[1] and t[2] and t[3] and t[4] and (ARGV[3] ~= '1' or t[1] == ARGV[4]) then
      out[#out + 1] = {id, t[1], t[2], t[3], t[4]}
      if #out >= want then
        break
      end
    end
  end
  min = '(' .. ids[#ids]
end
return out
",
    )
});

// KEYS: 1 running set. ARGV: 1 key prefix (with its trailing ':'), 2 the `ZRANGEBYLEX` min to
// start at ('-', or '(' and the last id of the previous page), 3 how many running ids to read.
// Returns the last id read ('' when none), how many were read and, for each running thread among
// them, by id: its
// id, then its newest checkpoint's workflow, run id, owner ('' for none) and status. One page at
// a time, so that a scan over thousands of runs in flight never holds Redis for long.
static UNFINISHED_RUNS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local ids = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[2], '+', 'LIMIT', 0, tonumber(ARGV[3]))
local runs = {}
for _, id in ipairs(ids) do
  local version = redis.call('HGET', ARGV[1] .. 'thread:' .. id, 'version')
  if version then
    local cp = redis.call('HMGET', ARGV[1] .. 'checkpoint:' .. id .. ':' .. version, 'workflow', 'run_id', 'owner', 'status')
    table.insert(runs, {id, cp[1] or '', cp[2] or '', cp[3] or '', cp[4] or ''})
  end
end
return {ids[#ids] or '', #ids, runs}
",
    )
});

/// Running thread ids read per `UNFINISHED_RUNS` call.
const UNFINISHED_PAGE: usize = 1000;

// KEYS: 1 thread hash, 2 idempotency hash, 3 threads set, 4 running set.
// ARGV: 1 thread id, 2 checkpoint key prefix. Returns 1 when the thread existed.
static DELETE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local v = redis.call('HGET', KEYS[1], 'version')
if not v then
  return 0
end
local version = tonumber(v)
while version >= 1 and redis.call('DEL', ARGV[2] .. string.format('%d', version)) == 1 do
  version = version - 1
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
",
    )
});

/// An idempotency record as stored in `p:idem:{thread_id}`.
#[derive(Serialize, Deserialize)]
struct IdemRecord {
    run_id: String,
    version: u64,
    status: RunStatus,
    output: Option<String>,
    /// Absent in records written before fingerprints were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
}

/// A stored value outside its domain.
#[derive(Debug, thiserror::Error)]
#[error("{what} holds an invalid value {value:?}")]
struct InvalidValue {
    what: &'static str,
    value: String,
}

fn corrupt(thread_id: &str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> CheckpointError {
    CheckpointError::Corrupt { thread_id: thread_id.to_owned(), source: source.into() }
}

fn invalid(thread_id: &str, what: &'static str, value: impl AsRef<[u8]>) -> CheckpointError {
    corrupt(thread_id, InvalidValue { what, value: String::from_utf8_lossy(value.as_ref()).into_owned() })
}

/// Replies that do not decode are corrupt data; everything else means Redis is unavailable.
fn redis_error(thread_id: &str) -> impl FnOnce(RedisError) -> CheckpointError + '_ {
    move |e| match e.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => corrupt(thread_id, e),
        _ => CheckpointError::Unavailable(Box::new(e)),
    }
}

fn parse_num<T: std::str::FromStr>(thread_id: &str, what: &'static str, value: &[u8]) -> Result<T, CheckpointError> {
    std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()).ok_or_else(|| invalid(thread_id, what, value))
}

fn utf8(thread_id: &str, what: &'static str, value: Vec<u8>) -> Result<String, CheckpointError> {
    String::from_utf8(value).map_err(|e| invalid(thread_id, what, e.into_bytes()))
}

/// The smallest byte string greater than every string that starts with `prefix`, if any.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A `ZRANGEBYLEX` bound: `[value` (inclusive) or `(value` (exclusive).
fn lex_bound(inclusive: bool, value: &[u8]) -> Vec<u8> {
    let mut bound = Vec::with_capacity(value.len() + 1);
    bound.push(if inclusive { b'[' } else { b'(' });
    bound.extend_from_slice(value);
    bound
}

/// A checkpoint as the field/value pairs of its hash.
fn encode(cp: &Checkpoint) -> Result<Vec<(&'static str, Vec<u8>)>, CheckpointError> {
    let mut fields = vec![
        ("version", cp.version.to_string().into_bytes()),
        ("workflow", cp.workflow.as_bytes().to_vec()),
        ("state", cp.state.clone()),
        ("run_id", cp.run.run_id.as_bytes().to_vec()),
        ("status", cp.run.status.as_str().as_bytes().to_vec()),
        ("step", cp.run.step.to_string().into_bytes()),
        ("created_at", to_ms(cp.created_at).to_string().into_bytes()),
    ];
    if let Some(next) = &cp.next {
        fields.push(("next", next.as_bytes().to_vec()));
    }
    if let Some(pending) = cp.pending.encode().map_err(|e| corrupt(&cp.thread_id, e))? {
        fields.push(("pending", pending.into_bytes()));
    }
    if let Some(key) = &cp.run.idempotency_key {
        fields.push(("key", key.as_bytes().to_vec()));
    }
    if let Some(fingerprint) = &cp.run.fingerprint {
        fields.push(("fingerprint", fingerprint.as_bytes().to_vec()));
    }
    if let Some(output) = &cp.run.output {
        fields.push(("output", output.as_bytes().to_vec()));
    }
    if let Some(owner) = &cp.run.owner {
        fields.push(("owner", owner.as_bytes().to_vec()));
    }
    Ok(fields)
}

/// The inverse of [`encode`], from the flat field/value list `HGETALL` returns.
fn decode(thread_id: &str, flat: Vec<Vec<u8>>) -> Result<Checkpoint, CheckpointError> {
    if !flat.len().is_multiple_of(2) {
        return Err(invalid(thread_id, "checkpoint hash", format!("{} elements", flat.len())));
    }
    let (mut version, mut workflow, mut state, mut run_id, mut status, mut step, mut created_at) =
        (None, None, None, None, None, None, None);
    let (mut next, mut pending, mut key, mut fingerprint, mut output, mut owner) =
        (None, Pending::default(), None, None, None, None);
    let mut items = flat.into_iter();
    while let (Some(field), Some(value)) = (items.next(), items.next()) {
        match field.as_slice() {
            b"version" => version = Some(parse_num::<u64>(thread_id, "checkpoint.version", &value)?),
            b"workflow" => workflow = Some(utf8(thread_id, "checkpoint.workflow", value)?),
            b"state" => state = Some(value),
            b"run_id" => run_id = Some(utf8(thread_id, "checkpoint.run_id", value)?),
            b"status" => {
                let s = std::str::from_utf8(&value).ok().and_then(RunStatus::parse);
                status = Some(s.ok_or_else(|| invalid(thread_id, "checkpoint.status", &value))?);
            }
            b"step" => step = Some(parse_num::<u32>(thread_id, "checkpoint.step", &value)?),
            b"created_at" => created_at = Some(parse_num::<i64>(thread_id, "checkpoint.created_at", &value)?),
            b"next" => next = Some(utf8(thread_id, "checkpoint.next", value)?),
            // `interrupt` is the field's name before interrupts had ids; `Pending::decode` reads both.
            b"pending" | b"interrupt" => {
                let json = utf8(thread_id, "checkpoint.pending", value)?;
                pending = Pending::decode(&json).map_err(|e| corrupt(thread_id, e))?;
            }
            b"key" => key = Some(utf8(thread_id, "checkpoint.key", value)?),
            b"fingerprint" => fingerprint = Some(utf8(thread_id, "checkpoint.fingerprint", value)?),
            b"output" => output = Some(utf8(thread_id, "checkpoint.output", value)?),
            b"owner" => owner = Some(utf8(thread_id, "checkpoint.owner", value)?),
            _ => {} // Fields a later version may add.
        }
    }
    let missing = |field: &'static str| invalid(thread_id, field, "(missing)");
    Ok(Checkpoint {
        thread_id: thread_id.to_owned(),
        workflow: workflow.ok_or_else(|| missing("checkpoint.workflow"))?,
        version: version.ok_or_else(|| missing("checkpoint.version"))?,
        state: state.ok_or_else(|| missing("checkpoint.state"))?,
        next,
        pending,
        run: RunMarker {
            run_id: run_id.ok_or_else(|| missing("checkpoint.run_id"))?,
            idempotency_key: key,
            fingerprint,
            status: status.ok_or_else(|| missing("checkpoint.status"))?,
            step: step.ok_or_else(|| missing("checkpoint.step"))?,
            output,
            owner,
        },
        created_at: from_ms(created_at.ok_or_else(|| missing("checkpoint.created_at"))?),
    })
}

impl RedisCheckpointer {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`),
    /// retrying a refused connection for up to [`DEFAULT_ACQUIRE_TIMEOUT`]. A server that
    /// cannot be reached is an error: there is no fallback.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        Self::connect_with_timeout(url, options, DEFAULT_ACQUIRE_TIMEOUT).await
    }

    /// [`RedisCheckpointer::connect`] giving up after `timeout`.
    pub async fn connect_with_timeout(url: &str, options: RedisOptions, timeout: Duration) -> Result<Self, StoreError> {
        let connect_error = |source| StoreError::RedisConnect { url: redact(url), source };
        let client = Client::open(url).map_err(|source| StoreError::InvalidRedisUrl { url: redact(url), source })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_max_delay(Duration::from_secs(2));
        let mut conn = match tokio::time::timeout(timeout, ConnectionManager::new_with_config(client, config)).await {
            Ok(conn) => conn.map_err(connect_error)?,
            Err(_) => {
                let timed_out = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no connection to redis within {timeout:?}"),
                );
                return Err(connect_error(RedisError::from(timed_out)));
            }
        };
        // Loading the scripts proves the server answers and runs Lua, and saves the first
        // call of each a round trip.
        for script in [&*PUT, &*LATEST, &*HEAD, &*HISTORY, &*LIST, &*UNFINISHED_RUNS, &*DELETE] {
            let loaded = tokio::time::timeout(timeout, script.prepare_invoke().load_async(&mut conn)).await;
            match loaded {
                Ok(Ok(_)) => {}
                Ok(Err(source)) => return Err(connect_error(source)),
                Err(_) => {
                    let timed_out = std::io::Error::new(std::io::ErrorKind::TimedOut, "redis did not answer");
                    return Err(connect_error(RedisError::from(timed_out)));
                }
            }
        }
        Ok(Self { conn, prefix: options.key_prefix, retention: options.retention.max(1) })
    }

    /// The prefix of every key (without the trailing `:`).
    pub fn key_prefix(&self) -> &str {
        &self.prefix
    }

    /// Checkpoints kept per thread (at least 1).
    pub fn retention(&self) -> usize {
        self.retention
    }

    /// The key of checkpoint `version` of `thread_id`: `{prefix}:checkpoint:{thread_id}:{version}`.
    pub fn checkpoint_key(&self, thread_id: &str, version: u64) -> String {
        format!("{}{version}", self.checkpoint_prefix(thread_id))
    }

    fn checkpoint_prefix(&self, thread_id: &str) -> String {
        format!("{}:checkpoint:{thread_id}:", self.prefix)
    }

    fn thread_key(&self, thread_id: &str) -> String {
        format!("{}:thread:{thread_id}", self.prefix)
    }

    fn idem_key(&self, thread_id: &str) -> String {
        format!("{}:idem:{thread_id}", self.prefix)
    }

    fn threads_key(&self) -> String {
        format!("{}:threads", self.prefix)
    }

    fn running_key(&self) -> String {
        format!("{}:running", self.prefix)
    }

    fn lease_key(&self, replica: &str) -> String {
        format!("{}:lease:{replica}", self.prefix)
    }
}

#[async_trait]
impl Checkpointer for RedisCheckpointer {
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let flat: Option<Vec<Vec<u8>>> = LATEST
            .key(self.thread_key(thread_id))
            .arg(self.checkpoint_prefix(thread_id))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(thread_id))?;
        flat.map(|flat| decode(thread_id, flat)).transpose()
    }

    async fn head(&self, thread_id: &str) -> Result<Option<ThreadHead>, CheckpointError> {
        let head: Option<(Option<Vec<u8>>, Vec<Vec<u8>>)> = HEAD
            .key(self.thread_key(thread_id))
            .arg(self.checkpoint_prefix(thread_id))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(thread_id))?;
        let Some((created_at, flat)) = head else { return Ok(None) };
        let created_at = created_at.ok_or_else(|| invalid(thread_id, "thread hash", "(created_at missing)"))?;
        let created_at = from_ms(parse_num(thread_id, "thread.created_at", &created_at)?);
        Ok(Some(ThreadHead { created_at, checkpoint: decode(thread_id, flat)? }))
    }

    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let thread_id = checkpoint.thread_id.as_str();
        let conflict = |actual: u64| CheckpointError::Conflict {
            thread_id: thread_id.to_owned(),
            expected: checkpoint.version.saturating_sub(1),
            actual,
        };
        let thread_key = self.thread_key(thread_id);
        if checkpoint.version == 0 {
            let actual: Option<Vec<u8>> = redis::cmd("HGET")
                .arg(&thread_key)
                .arg("version")
                .query_async(&mut self.conn.clone())
                .await
                .map_err(redis_error(thread_id))?;
            let actual = actual.map(|v| parse_num(thread_id, "thread.version", &v)).transpose()?;
            return Err(conflict(actual.unwrap_or(0)));
        }
        let record_key = matches!(checkpoint.run.status, RunStatus::Completed | RunStatus::Interrupted);
        let (record_key, key, record) = match (&checkpoint.run.idempotency_key, record_key) {
            (Some(key), true) => {
                let record = IdemRecord {
                    run_id: checkpoint.run.run_id.clone(),
                    version: checkpoint.version,
                    status: checkpoint.run.status,
                    output: checkpoint.run.output.clone(),
                    fingerprint: checkpoint.run.fingerprint.clone(),
                };
                let record = serde_json::to_string(&record).map_err(|e| corrupt(thread_id, e))?;
                ("1", key.as_str(), record)
            }
            _ => ("0", "", String::new()),
        };
        let mut invocation = PUT.prepare_invoke();
        invocation
            .key(thread_key)
            .key(self.checkpoint_key(thread_id, checkpoint.version))
            .key(self.idem_key(thread_id))
            .key(self.threads_key())
            .key(self.running_key())
            .arg(thread_id)
            .arg(self.checkpoint_prefix(thread_id))
            .arg(checkpoint.version)
            .arg(self.retention)
            .arg(&checkpoint.workflow)
            .arg(to_ms(checkpoint.created_at))
            .arg(checkpoint.run.status.as_str())
            .arg(record_key)
            .arg(key)
            .arg(record);
        for (field, value) in encode(checkpoint)? {
            invocation.arg(field).arg(value);
        }
        let result: i64 = invocation.invoke_async(&mut self.conn.clone()).await.map_err(redis_error(thread_id))?;
        match result {
            -1 => Ok(()),
            actual => {
                Err(conflict(u64::try_from(actual).map_err(|_| invalid(thread_id, "put result", actual.to_string()))?))
            }
        }
    }

    async fn history(&self, thread_id: &str, limit: usize) -> Result<Vec<Checkpoint>, CheckpointError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let checkpoints: Vec<Vec<Vec<u8>>> = HISTORY
            .key(self.thread_key(thread_id))
            .arg(self.checkpoint_prefix(thread_id))
            .arg(limit.min(u32::MAX as usize))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(thread_id))?;
        checkpoints.into_iter().map(|flat| decode(thread_id, flat)).collect()
    }

    async fn find_idempotent(&self, thread_id: &str, key: &str) -> Result<Option<IdempotentRun>, CheckpointError> {
        let record: Option<Vec<u8>> = redis::cmd("HGET")
            .arg(self.idem_key(thread_id))
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(thread_id))?;
        let Some(record) = record else { return Ok(None) };
        let r: IdemRecord = serde_json::from_slice(&record).map_err(|e| corrupt(thread_id, e))?;
        Ok(Some(IdempotentRun {
            run_id: r.run_id,
            version: r.version,
            status: r.status,
            output: r.output,
            fingerprint: r.fingerprint,
        }))
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadSummary>, CheckpointError> {
        let fields: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
            .arg(self.thread_key(thread_id))
            .arg(&["workflow", "version", "created_at", "updated_at"])
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(thread_id))?;
        match <[Option<Vec<u8>>; 4]>::try_from(fields) {
            Ok([None, None, None, None]) => Ok(None),
            Ok([Some(workflow), Some(version), Some(created_at), Some(updated_at)]) => {
                Ok(Some(summary(thread_id.as_bytes().to_vec(), workflow, version, created_at, updated_at)?))
            }
            _ => Err(invalid(thread_id, "thread hash", "(fields missing)")),
        }
    }

    async fn list_threads(&self, query: &ThreadQuery) -> Result<ThreadPage, CheckpointError> {
        let limit = query.limit.clamp(1, u32::MAX as usize);
        let prefix = query.prefix.as_deref().unwrap_or_default().as_bytes();
        let after = query.after.as_deref().map(str::as_bytes);
        let min = match after {
            Some(after) if after >= prefix => lex_bound(false, after),
            _ if !prefix.is_empty() => lex_bound(true, prefix),
            _ => b"-".to_vec(),
        };
        let max = match prefix_end(prefix) {
            Some(end) if !prefix.is_empty() => lex_bound(false, &end),
            _ => b"+".to_vec(),
        };
        let (filter, workflow) = match &query.workflow {
            Some(w) => ("1", w.as_str()),
            None => ("0", ""),
        };
        let batch = if query.workflow.is_some() { LIST_BATCH } else { (limit + 1).min(LIST_BATCH * 8) };
        let rows: Vec<(Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>)> = LIST
            .key(self.threads_key())
            .arg(min)
            .arg(max)
            .arg(filter)
            .arg(workflow)
            .arg(limit + 1)
            .arg(format!("{}:thread:", self.prefix))
            .arg(batch)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(""))?;
        let more = rows.len() > limit;
        let threads = rows
            .into_iter()
            .take(limit)
            .map(|(id, workflow, version, created_at, updated_at)| {
                summary(id, workflow, version, created_at, updated_at)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let next_after = if more { threads.last().map(|t| t.thread_id.clone()) } else { None };
        Ok(ThreadPage { threads, next_after })
    }

    async fn unfinished_threads(&self) -> Result<Vec<String>, CheckpointError> {
        redis::cmd("ZRANGEBYLEX")
            .arg(self.running_key())
            .arg("-")
            .arg("+")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(""))
    }

    async fn unfinished_runs(&self) -> Result<Vec<UnfinishedRun>, CheckpointError> {
        let mut runs = Vec::new();
        let mut min = "-".to_owned();
        loop {
            let (last, read, rows): (Vec<u8>, usize, Vec<Vec<Vec<u8>>>) = UNFINISHED_RUNS
                .key(self.running_key())
                .arg(format!("{}:", self.prefix))
                .arg(&min)
                .arg(UNFINISHED_PAGE)
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(redis_error(""))?;
            for row in rows {
                let [id, workflow, run_id, owner, status] =
                    <[Vec<u8>; 5]>::try_from(row).map_err(|row| invalid("", "unfinished run", format!("{row:?}")))?;
                let thread_id = utf8("", "running thread id", id)?;
                // The running set and the thread's newest checkpoint change together (one
                // script), so a listed thread's checkpoint is running; anything else is corrupt.
                if status != b"running" || workflow.is_empty() || run_id.is_empty() {
                    return Err(invalid(&thread_id, "running checkpoint", status));
                }
                runs.push(UnfinishedRun {
                    workflow: utf8(&thread_id, "checkpoint.workflow", workflow)?,
                    run_id: utf8(&thread_id, "checkpoint.run_id", run_id)?,
                    owner: if owner.is_empty() { None } else { Some(utf8(&thread_id, "checkpoint.owner", owner)?) },
                    thread_id,
                });
            }
            if read < UNFINISHED_PAGE {
                return Ok(runs);
            }
            min = format!("({}", utf8("", "running thread id", last)?);
        }
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        let existed: i64 = DELETE
            .key(self.thread_key(thread_id))
            .key(self.idem_key(thread_id))
            .key(self.threads_key())
            .key(self.running_key())
            .arg(thread_id)
            .arg(self.checkpoint_prefix(thread_id))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(thread_id))?;
        Ok(existed == 1)
    }

    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), CheckpointError> {
        // PX 0 is an error in Redis: a lease of no time is one that has already expired.
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        redis::cmd("SET")
            .arg(self.lease_key(replica))
            .arg(1)
            .arg("PX")
            .arg(ttl_ms)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(redis_error(""))
    }

    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, CheckpointError> {
        // -2: no key (expired, released or never set); -1: no expiry, which renewals never leave.
        let left: i64 = redis::cmd("PTTL")
            .arg(self.lease_key(replica))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(redis_error(""))?;
        Ok((left > 0).then(|| Duration::from_millis(left.unsigned_abs())))
    }

    async fn release_lease(&self, replica: &str) -> Result<(), CheckpointError> {
        redis::cmd("DEL")
            .arg(self.lease_key(replica))
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(redis_error(""))
    }
}

fn summary(
    id: Vec<u8>,
    workflow: Vec<u8>,
    version: Vec<u8>,
    created_at: Vec<u8>,
    updated_at: Vec<u8>,
) -> Result<ThreadSummary, CheckpointError> {
    let thread_id = String::from_utf8(id).map_err(|e| invalid("", "thread id", e.into_bytes()))?;
    Ok(ThreadSummary {
        workflow: utf8(&thread_id, "thread.workflow", workflow)?,
        version: parse_num(&thread_id, "thread.version", &version)?,
        created_at: from_ms(parse_num(&thread_id, "thread.created_at", &created_at)?),
        updated_at: from_ms(parse_num(&thread_id, "thread.updated_at", &updated_at)?),
        thread_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_prefix_ranges() {
        assert_eq!(prefix_end(b"C001:").as_deref(), Some(&b"C001;"[..]));
        assert_eq!(prefix_end(b"a\xff").as_deref(), Some(&b"b"[..]));
        assert_eq!(prefix_end(b"\xff\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn checkpoints_encode_and_decode() {
        let mut cp = frontdesk_runtime::conformance::sample("C001:TKT-1", 7, RunStatus::Interrupted);
        cp.pending = frontdesk_runtime::conformance::sample_pending();
        cp.run.idempotency_key = Some("k".into());
        cp.run.output = Some("{}".into());
        cp.run.owner = Some("replica-1".into());
        cp.state = vec![0, 159, 146, 150]; // not UTF-8: stored as it is
        let flat: Vec<Vec<u8>> =
            encode(&cp).unwrap().into_iter().flat_map(|(f, v)| [f.as_bytes().to_vec(), v]).collect();
        assert_eq!(decode("C001:TKT-1", flat).unwrap(), cp);
        let bare = frontdesk_runtime::conformance::sample("t", 1, RunStatus::Failed);
        let flat: Vec<Vec<u8>> =
            encode(&bare).unwrap().into_iter().flat_map(|(f, v)| [f.as_bytes().to_vec(), v]).collect();
        assert_eq!(flat.len(), 14, "absent options are not stored");
        assert_eq!(decode("t", flat).unwrap(), bare);
        assert!(matches!(decode("t", vec![b"state".to_vec()]), Err(CheckpointError::Corrupt { .. })));
        assert!(matches!(decode("t", vec![b"state".to_vec(), vec![]]), Err(CheckpointError::Corrupt { .. })));
    }
}
