//! Checkpoints: the durable state of a thread after every node, written as a compare-and-set
//! on the thread's version so two writers can never both win.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::node::Resume;

/// Where a run stands in the checkpoint that it last wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Accepted and executing; a checkpoint left in this state by a crash is resumed.
    Running,
    /// Paused at a node awaiting outside input.
    Interrupted,
    /// Reached END.
    Completed,
    /// Failed or was cancelled; the checkpoint restores the state from before the run.
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "interrupted" => RunStatus::Interrupted,
            "completed" => RunStatus::Completed,
            "failed" => RunStatus::Failed,
            _ => return None,
        })
    }
}

/// The run that wrote a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMarker {
    pub run_id: String,
    pub idempotency_key: Option<String>,
    /// A digest of the request that carried `idempotency_key`, as the caller computed it: a
    /// retry with the key must be the same request, and the runner compares the two before it
    /// replays or re-attaches. `None` when the caller gave none.
    pub fingerprint: Option<String>,
    pub status: RunStatus,
    /// Nodes executed so far in this run.
    pub step: u32,
    /// The workflow's output (JSON), set when `status` is `Completed` or `Interrupted`.
    pub output: Option<String>,
    /// The replica whose run wrote the checkpoint. A `Running` checkpoint belongs to a live run
    /// while its owner's lease ([`Checkpointer::renew_lease`]) lasts; once that lease has
    /// expired or was released, another replica may take the run over at once. `None` for
    /// checkpoints written before owners were recorded or by a runner without a replica id.
    pub owner: Option<String>,
}

/// A node paused awaiting input; persisted so any replica can resume it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingInterrupt {
    /// Stable id, unique within the thread: a resume names the interrupt it answers.
    pub id: String,
    /// The node that raised it, and that a resume runs again.
    pub node: String,
    pub reason: String,
    /// JSON payload describing what the node waits for.
    pub payload: String,
}

/// The update of one finished task of a fan-out step, kept until every task of the step has
/// finished, so a crash re-runs only the tasks that had not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskWrite {
    /// The fan-out node the task belongs to.
    pub node: String,
    /// The task's index in the dispatch order.
    pub task: u32,
    /// The task's state update (JSON).
    pub update: String,
}

/// How many answered interrupt ids a thread remembers, so that a late second answer is refused
/// as already answered rather than as unknown. Older ids are forgotten (then unknown).
pub const ANSWERED_KEPT: usize = 256;

/// What a thread waits for or has half done: its pending interrupts, the ids of interrupts
/// already answered, the finished tasks of a fan-out step in progress, and of a run in progress
/// the answer it resumed with and how often it was taken over. Stores keep it as one JSON value
/// ([`Pending::encode`]); the newest checkpoint always carries all of it, so pruning older
/// checkpoints never loses a pending interrupt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interrupts: Vec<PendingInterrupt>,
    /// Oldest first, at most [`ANSWERED_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskWrite>,
    /// The answer a resumed run gives the node that raised the interrupt, from the run's
    /// accepting checkpoint until the first checkpoint after that node ran: a run recovered
    /// in between runs the node again with the same answer (the interrupt is already among
    /// `answered`, so nothing else could give it one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume: Option<Resume>,
    /// The interrupt `resume` answers, as it was pending, kept as long as `resume` is: a run
    /// recovered in between that then fails puts it back among the pending interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answering: Option<PendingInterrupt>,
    /// The step at which the running run took the graph's failure route: a run taken over
    /// after that fails at a second failure, as it would have before, with the step budget the
    /// route gave it, instead of taking the route (and its node's effects) again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_over_at: Option<u32>,
    /// How often the running run was taken over after its process stopped (see
    /// `RunnerConfig::max_takeovers`); 0 outside a run and in a run not taken over.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub takeovers: u32,
    /// On a `failed` checkpoint: the state still holds the input of the failed run's request
    /// (the one that carried its idempotency key), because the run could not roll back past it.
    /// A run taken over after its process stopped resumed from a checkpoint its input was
    /// already in, and the state from before the run is gone with the checkpoints retention
    /// pruned; a run under `by_effect` whose node with effects committed rolls back to that
    /// commit, never undoing the effect. A retry of that request (the same key and fingerprint)
    /// then runs without applying its input a second time. Always false outside a `failed`
    /// checkpoint.
    #[serde(default, skip_serializing_if = "is_false")]
    pub input_kept: bool,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.interrupts.is_empty()
            && self.answered.is_empty()
            && self.tasks.is_empty()
            && self.resume.is_none()
            && self.answering.is_none()
            && self.failed_over_at.is_none()
            && self.takeovers == 0
            && !self.input_kept
    }

    /// The JSON a store keeps; `None` when there is nothing pending (a NULL column).
    pub fn encode(&self) -> Result<Option<String>, serde_json::Error> {
        if self.is_empty() {
            return Ok(None);
        }
        serde_json::to_string(self).map(Some)
    }

    /// Reads what [`Pending::encode`] wrote. Also reads the single interrupt object that stores
    /// kept before interrupts had ids, giving it the id `"interrupt"`.
    pub fn decode(json: &str) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct Unaddressed {
            node: String,
            reason: String,
            payload: String,
        }
        let value: serde_json::Value = serde_json::from_str(json)?;
        if value.get("node").is_some() {
            let Unaddressed { node, reason, payload } = serde_json::from_value(value)?;
            let interrupt = PendingInterrupt { id: "interrupt".into(), node, reason, payload };
            return Ok(Pending { interrupts: vec![interrupt], ..Default::default() });
        }
        serde_json::from_value(value)
    }

    /// What a new run (or the rest a failed one leaves) starts from: the same, without what
    /// belongs to the run before it (its resume answer, its failure route, its takeovers, its kept
    /// input).
    pub(crate) fn for_a_new_run(&self) -> Pending {
        Pending { resume: None, answering: None, failed_over_at: None, takeovers: 0, input_kept: false, ..self.clone() }
    }

    pub fn interrupt(&self, id: &str) -> Option<&PendingInterrupt> {
        self.interrupts.iter().find(|i| i.id == id)
    }

    /// Moves an interrupt from pending to answered.
    pub(crate) fn answer(&mut self, id: &str) -> Option<PendingInterrupt> {
        let index = self.interrupts.iter().position(|i| i.id == id)?;
        let interrupt = self.interrupts.remove(index);
        self.answered.push(interrupt.id.clone());
        let excess = self.answered.len().saturating_sub(ANSWERED_KEPT);
        self.answered.drain(..excess);
        Some(interrupt)
    }
}

/// One committed checkpoint of a thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    pub thread_id: String,
    pub workflow: String,
    /// Starts at 1 and increases by exactly one per write.
    pub version: u64,
    /// The serialized workflow state (JSON).
    pub state: Vec<u8>,
    /// The node to run next; `None` when the thread rests at END.
    pub next: Option<String>,
    /// Pending interrupts, answered interrupt ids and finished fan-out tasks.
    pub pending: Pending,
    pub run: RunMarker,
    pub created_at: SystemTime,
}

/// A completed run found by its idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotentRun {
    pub run_id: String,
    pub version: u64,
    pub status: RunStatus,
    pub output: Option<String>,
    /// The run's [`RunMarker::fingerprint`]; `None` for a run recorded without one.
    pub fingerprint: Option<String>,
}

/// A thread as listings show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSummary {
    pub thread_id: String,
    pub workflow: String,
    pub version: u64,
    pub created_at: SystemTime,
    pub updated_at: SystemTime,
}

/// A thread's newest checkpoint with the thread's creation time: what a caller that routes a
/// request by the thread's workflow, runs on the thread and then shows it needs, in one read.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadHead {
    pub created_at: SystemTime,
    pub checkpoint: Checkpoint,
}

/// A thread whose newest checkpoint is a run still `Running`, with what a takeover scan decides
/// on before it reads the checkpoint itself: whose workflow, which run, and whose (the replica
/// that wrote it, `RunMarker::owner`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnfinishedRun {
    pub thread_id: String,
    pub workflow: String,
    pub run_id: String,
    pub owner: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ThreadQuery {
    pub workflow: Option<String>,
    /// Only threads whose id starts with this (for example a customer's `C001:` prefix).
    pub prefix: Option<String>,
    /// Return threads whose id sorts after this one.
    pub after: Option<String>,
    pub limit: usize,
}

#[derive(Debug, Clone, Default)]
pub struct ThreadPage {
    pub threads: Vec<ThreadSummary>,
    /// The id to pass as `after` for the next page; `None` on the last page.
    pub next_after: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Another writer committed first. The caller lost the compare-and-set.
    #[error("checkpoint conflict on thread {thread_id}: expected version {expected}, found {actual}")]
    Conflict { thread_id: String, expected: u64, actual: u64 },
    /// The store cannot be reached or failed; nothing was written.
    #[error("checkpoint store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Stored data could not be decoded.
    #[error("corrupt checkpoint data for thread {thread_id}")]
    Corrupt {
        thread_id: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Durable storage of checkpoints. Every implementation must pass [`crate::conformance`].
#[async_trait]
pub trait Checkpointer: Send + Sync + 'static {
    /// The newest checkpoint of a thread.
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, CheckpointError>;

    /// Commits `checkpoint` if the thread's current version is `checkpoint.version - 1` (0 for
    /// a new thread); otherwise fails with [`CheckpointError::Conflict`] and writes nothing.
    /// When the checkpoint completes a run that carries an idempotency key, the key is recorded
    /// in the same transaction, with the run's fingerprint. Older checkpoints may be pruned by the store's retention policy;
    /// the newest is never pruned.
    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError>;

    /// Checkpoints of a thread, newest first, as retained.
    async fn history(&self, thread_id: &str, limit: usize) -> Result<Vec<Checkpoint>, CheckpointError>;

    /// The completed or interrupted run of `thread_id` that carried `key`.
    async fn find_idempotent(&self, thread_id: &str, key: &str) -> Result<Option<IdempotentRun>, CheckpointError>;

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadSummary>, CheckpointError>;

    /// [`Checkpointer::latest`] with the thread's creation time (as [`Checkpointer::thread`]
    /// reports it). The default makes those two reads; a store that can answer in one read
    /// overrides it.
    async fn head(&self, thread_id: &str) -> Result<Option<ThreadHead>, CheckpointError> {
        let Some(thread) = self.thread(thread_id).await? else { return Ok(None) };
        let checkpoint = self.latest(thread_id).await?;
        Ok(checkpoint.map(|checkpoint| ThreadHead { created_at: thread.created_at, checkpoint }))
    }

    /// Threads ordered by id.
    async fn list_threads(&self, query: &ThreadQuery) -> Result<ThreadPage, CheckpointError>;

    /// Threads whose newest checkpoint is a run still `Running`: runs a crash interrupted.
    async fn unfinished_threads(&self) -> Result<Vec<String>, CheckpointError>;

    /// [`Checkpointer::unfinished_threads`] with each run's workflow, run id and owner, ordered
    /// by thread id. The default reads each thread's newest checkpoint; a store that can answer
    /// in one query overrides it.
    async fn unfinished_runs(&self) -> Result<Vec<UnfinishedRun>, CheckpointError> {
        let mut runs = Vec::new();
        for thread_id in self.unfinished_threads().await? {
            // Gone or finished since the list was read: no longer unfinished.
            let Some(cp) = self.latest(&thread_id).await? else { continue };
            if cp.run.status == RunStatus::Running {
                runs.push(UnfinishedRun {
                    thread_id,
                    workflow: cp.workflow,
                    run_id: cp.run.run_id,
                    owner: cp.run.owner,
                });
            }
        }
        Ok(runs)
    }

    /// Erases a thread: every checkpoint and idempotency record. Returns whether it existed.
    async fn delete_thread(&self, thread_id: &str) -> Result<bool, CheckpointError>;

    /// [`Checkpointer::delete_thread`] for a caller that detects and repeats a lost delete: the
    /// store may return before the erasure is durable (readers see it at once), so a crash can
    /// bring the thread back. Saves a synchronous flush where the store has one to skip; the
    /// default is the durable delete.
    async fn delete_thread_unsynced(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        self.delete_thread(thread_id).await
    }

    /// Extends `replica`'s lease to `ttl` from now, creating it if there is none. A replica's
    /// lease covers every run whose running checkpoint names it as owner (`RunMarker::owner`).
    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), CheckpointError>;

    /// How long `replica`'s lease has left; `None` when it has expired, was released or never existed.
    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, CheckpointError>;

    /// Ends `replica`'s lease now (a clean shutdown), so other replicas may take its runs over at once.
    async fn release_lease(&self, replica: &str) -> Result<(), CheckpointError>;
}

/// Keeps checkpoints in process memory. For tests, benchmarks and single-process use where
/// losing everything on exit is acceptable; it is never chosen implicitly.
pub struct MemoryCheckpointer {
    retain: usize,
    threads: Mutex<BTreeMap<String, MemoryThread>>,
    /// Replica leases: when each expires, in milliseconds since the Unix epoch.
    leases: Mutex<HashMap<String, u64>>,
}

struct MemoryThread {
    created_at: SystemTime,
    checkpoints: Vec<Checkpoint>,
    keys: HashMap<String, IdempotentRun>,
}

impl MemoryCheckpointer {
    /// Keeps the newest `retain` checkpoints per thread (at least one).
    pub fn new(retain: usize) -> Self {
        Self { retain: retain.max(1), threads: Mutex::new(BTreeMap::new()), leases: Mutex::new(HashMap::new()) }
    }
}

impl Default for MemoryCheckpointer {
    fn default() -> Self {
        Self::new(1)
    }
}

/// The process clock in milliseconds since the Unix epoch (0 before it).
fn epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn summary(thread_id: &str, thread: &MemoryThread) -> Option<ThreadSummary> {
    let last = thread.checkpoints.last()?;
    Some(ThreadSummary {
        thread_id: thread_id.to_owned(),
        workflow: last.workflow.clone(),
        version: last.version,
        created_at: thread.created_at,
        updated_at: last.created_at,
    })
}

#[async_trait]
impl Checkpointer for MemoryCheckpointer {
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads.get(thread_id).and_then(|t| t.checkpoints.last().cloned()))
    }

    async fn put(&self, checkpoint: &Checkpoint) -> Result<(), CheckpointError> {
        let mut threads = self.threads.lock().expect("checkpointer mutex poisoned");
        let thread = threads.entry(checkpoint.thread_id.clone()).or_insert_with(|| MemoryThread {
            created_at: checkpoint.created_at,
            checkpoints: Vec::new(),
            keys: HashMap::new(),
        });
        let actual = thread.checkpoints.last().map_or(0, |c| c.version);
        if checkpoint.version != actual + 1 {
            let fresh = thread.checkpoints.is_empty();
            if fresh {
                threads.remove(&checkpoint.thread_id);
            }
            return Err(CheckpointError::Conflict {
                thread_id: checkpoint.thread_id.clone(),
                expected: checkpoint.version.saturating_sub(1),
                actual,
            });
        }
        if let (Some(key), RunStatus::Completed | RunStatus::Interrupted) =
            (&checkpoint.run.idempotency_key, checkpoint.run.status)
        {
            thread.keys.insert(
                key.clone(),
                IdempotentRun {
                    run_id: checkpoint.run.run_id.clone(),
                    version: checkpoint.version,
                    status: checkpoint.run.status,
                    output: checkpoint.run.output.clone(),
                    fingerprint: checkpoint.run.fingerprint.clone(),
                },
            );
        }
        thread.checkpoints.push(checkpoint.clone());
        let excess = thread.checkpoints.len().saturating_sub(self.retain);
        thread.checkpoints.drain(..excess);
        Ok(())
    }

    async fn history(&self, thread_id: &str, limit: usize) -> Result<Vec<Checkpoint>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads
            .get(thread_id)
            .map(|t| t.checkpoints.iter().rev().take(limit).cloned().collect())
            .unwrap_or_default())
    }

    async fn find_idempotent(&self, thread_id: &str, key: &str) -> Result<Option<IdempotentRun>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads.get(thread_id).and_then(|t| t.keys.get(key).cloned()))
    }

    async fn thread(&self, thread_id: &str) -> Result<Option<ThreadSummary>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads.get(thread_id).and_then(|t| summary(thread_id, t)))
    }

    async fn head(&self, thread_id: &str) -> Result<Option<ThreadHead>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads.get(thread_id).and_then(|t| {
            t.checkpoints
                .last()
                .map(|checkpoint| ThreadHead { created_at: t.created_at, checkpoint: checkpoint.clone() })
        }))
    }

    async fn list_threads(&self, query: &ThreadQuery) -> Result<ThreadPage, CheckpointError> {
        use std::ops::Bound;
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        let lower = match &query.after {
            Some(after) => Bound::Excluded(after.clone()),
            None => Bound::Unbounded,
        };
        let limit = query.limit.max(1);
        let mut page = Vec::with_capacity(limit.min(64));
        let mut more = false;
        for (id, thread) in threads.range((lower, Bound::Unbounded)) {
            if let Some(prefix) = &query.prefix {
                if !id.starts_with(prefix.as_str()) {
                    continue;
                }
            }
            let Some(s) = summary(id, thread) else { continue };
            if query.workflow.as_ref().is_some_and(|w| *w != s.workflow) {
                continue;
            }
            if page.len() == limit {
                more = true;
                break;
            }
            page.push(s);
        }
        let next_after = if more { page.last().map(|s| s.thread_id.clone()) } else { None };
        Ok(ThreadPage { threads: page, next_after })
    }

    async fn unfinished_threads(&self) -> Result<Vec<String>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads
            .iter()
            .filter(|(_, t)| t.checkpoints.last().is_some_and(|c| c.run.status == RunStatus::Running))
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn unfinished_runs(&self) -> Result<Vec<UnfinishedRun>, CheckpointError> {
        let threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads
            .iter()
            .filter_map(|(id, t)| t.checkpoints.last().map(|c| (id, c)))
            .filter(|(_, c)| c.run.status == RunStatus::Running)
            .map(|(id, c)| UnfinishedRun {
                thread_id: id.clone(),
                workflow: c.workflow.clone(),
                run_id: c.run.run_id.clone(),
                owner: c.run.owner.clone(),
            })
            .collect())
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<bool, CheckpointError> {
        let mut threads = self.threads.lock().expect("checkpointer mutex poisoned");
        Ok(threads.remove(thread_id).is_some())
    }

    async fn renew_lease(&self, replica: &str, ttl: Duration) -> Result<(), CheckpointError> {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let mut leases = self.leases.lock().expect("lease mutex poisoned");
        leases.insert(replica.to_owned(), epoch_ms().saturating_add(ttl_ms));
        Ok(())
    }

    async fn lease_remaining(&self, replica: &str) -> Result<Option<Duration>, CheckpointError> {
        let leases = self.leases.lock().expect("lease mutex poisoned");
        let now = epoch_ms();
        Ok(leases.get(replica).filter(|&&expires| expires > now).map(|&expires| Duration::from_millis(expires - now)))
    }

    async fn release_lease(&self, replica: &str) -> Result<(), CheckpointError> {
        self.leases.lock().expect("lease mutex poisoned").remove(replica);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_reads_what_it_writes_and_the_unaddressed_form() {
        assert_eq!(Pending::default().encode().unwrap(), None, "nothing pending is a NULL column");
        let pending = crate::conformance::sample_pending();
        let json = pending.encode().unwrap().unwrap();
        assert_eq!(Pending::decode(&json).unwrap(), pending);
        let old = r#"{"node":"ask","reason":"awaiting_user","payload":"{}"}"#;
        let read = Pending::decode(old).unwrap();
        assert_eq!(read.interrupts.len(), 1);
        assert_eq!((read.interrupts[0].id.as_str(), read.interrupts[0].node.as_str()), ("interrupt", "ask"));
    }

    #[test]
    fn answering_moves_an_interrupt_and_bounds_the_answered_ids() {
        let mut pending = crate::conformance::sample_pending();
        let answered = pending.answer("approve-1").expect("pending");
        assert_eq!(answered.node, "manager_validation");
        assert!(pending.interrupt("approve-1").is_none());
        assert!(pending.answered.contains(&"approve-1".to_owned()));
        assert!(pending.answer("approve-1").is_none(), "an interrupt is answered once");
        for n in 0..ANSWERED_KEPT + 10 {
            pending.interrupts.push(PendingInterrupt {
                id: format!("i{n}"),
                node: "n".into(),
                reason: "r".into(),
                payload: "{}".into(),
            });
            pending.answer(&format!("i{n}"));
        }
        assert_eq!(pending.answered.len(), ANSWERED_KEPT);
        assert_eq!(pending.answered.last().map(String::as_str), Some(format!("i{}", ANSWERED_KEPT + 9).as_str()));
    }
}
