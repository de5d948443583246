//! Group commit of checkpoint writes.
//!
//! Every checkpoint put of a [`Database`](crate::Database) (all its clones) goes to one queue.
//! A task takes the first write waiting, then the writer (SQLite's write connection, which the
//! other writes of this process take as well; on PostgreSQL a pool connection), then every
//! write that queued meanwhile, up to [`MAX_BATCH`], and commits them in one transaction. It
//! never waits to gather writes: a put with nothing beside it is committed at once, as a
//! transaction of its own in one round trip, as before group commit. Under load, the writes
//! that arrive while a transaction runs make up the next one, so the database commits (and on
//! PostgreSQL flushes its WAL) once per batch instead of once per write. SQLite has one such
//! task; PostgreSQL a few (see [`batches_in_flight`]), which take turns at the queue, so that
//! one batch's statements run while another's commit waits for the disk. On PostgreSQL a batch
//! is one statement taking an array per column, so it costs three round trips (`BEGIN`, the
//! statement, `COMMIT`) whatever its size; a thread written twice in one batch takes a second
//! statement, which sees the first. Each statement locks thread rows in thread id order, so
//! batches do not wait for each other in a cycle (and were they to, PostgreSQL would abort one,
//! whose writes then run one by one).
//!
//! Each write keeps its own outcome. A lost compare-and-set fails its caller alone with
//! `Conflict`, the version it reports read inside the batch's transaction. A write whose
//! statements the database refuses makes the batch roll back and run again one write per
//! transaction, so that write fails alone as well. When the transaction itself fails (`BEGIN`,
//! `COMMIT`, the connection), every caller of the batch gets the error and none of its writes
//! is stored. A caller is answered only once the transaction holding its write has ended, so
//! an acknowledged write is committed. A caller that stopped waiting (its future dropped)
//! before its batch began has its write skipped.
//!
//! The tasks are spawned by the first put, on that put's runtime, and again by a put on another
//! runtime or after they are gone (their runtime shut down): a task on a runtime that nobody
//! drives any more would never answer. They end when the last clone of the database is dropped.

use std::{
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex, OnceLock, PoisonError,
    },
    time::{Duration, Instant},
};

use frontdesk_runtime::CheckpointError;
use tokio::{
    runtime,
    sync::{mpsc, oneshot, Mutex as AsyncMutex},
};

use crate::{
    checkpointer::{failed_batch, put_postgres_batch, put_sqlite_batch, Write},
    db::Connections,
    reuse::Waiting,
    DbPool,
};

/// The most writes committed in one transaction. Enough that a batch amortises its commit;
/// few enough that the first caller of a batch does not wait long for the last one's
/// statements.
const MAX_BATCH: usize = 64;

/// The most batches in flight at once on PostgreSQL. Measured with W1 (100 conversations in
/// flight, 8 pooled connections): one batch at a time was no faster than a transaction per write,
/// two and four were about 35% and 45% faster.
const MAX_POSTGRES_BATCHES: usize = 4;

/// How checkpoint writes of a [`Database`](crate::Database) have been committed since it was
/// opened (shared by its clones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteBatchStats {
    /// Writes handed to the queue.
    pub submitted: u64,
    /// Transactions the queue ran: one per batch, a write alone included.
    pub batches: u64,
    /// Writes in those batches.
    pub writes: u64,
    /// The most writes one batch held.
    pub largest: u64,
    /// Writes whose callers are waiting for their commit now.
    pub waiting: usize,
}

/// How one checkpoint write ended, as a [`WriteObserver`] is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Committed,
    /// It lost its compare-and-set ([`CheckpointError::Conflict`]): another writer of the
    /// thread committed first, as when two replicas raced for a run.
    Conflict,
    /// The database refused it or could not be reached; nothing of it was stored.
    Failed,
}

impl WriteOutcome {
    fn of(result: &Result<(), CheckpointError>) -> Self {
        match result {
            Ok(()) => WriteOutcome::Committed,
            Err(CheckpointError::Conflict { .. }) => WriteOutcome::Conflict,
            Err(CheckpointError::Unavailable(_) | CheckpointError::Corrupt { .. }) => WriteOutcome::Failed,
        }
    }
}

/// Told how each checkpoint write of a [`Database`](crate::Database) ended and how long its
/// caller waited, for metrics. Called on the caller's task as it is answered: it must be quick
/// and must not block. A caller that stopped waiting is not reported.
pub trait WriteObserver: Send + Sync + 'static {
    /// `waited`: from the write joining the queue to its answer, so the wait for the writer,
    /// the batch's statements and its commit.
    fn checkpoint_written(&self, outcome: WriteOutcome, waited: Duration);
}

/// A write waiting in the queue, and where its outcome goes.
struct Job {
    write: Write,
    reply: oneshot::Sender<Result<(), CheckpointError>>,
}

/// The checkpoint write queue of one database.
#[derive(Debug, Default)]
pub(crate) struct WriteQueue {
    /// The tasks' runtime and queue; `None` until the first put spawns them.
    sender: Mutex<Option<(runtime::Id, mpsc::UnboundedSender<Job>)>>,
    counters: Arc<Counters>,
    /// Puts whose callers are waiting for their answer.
    waiting: AtomicUsize,
    observer: OnceLock<Arc<dyn WriteObserver>>,
}

impl std::fmt::Debug for dyn WriteObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteObserver")
    }
}

#[derive(Debug, Default)]
struct Counters {
    submitted: AtomicU64,
    batches: AtomicU64,
    writes: AtomicU64,
    largest: AtomicU64,
}

/// The queue's tasks stopped before answering (a panic, or their runtime shut down).
#[derive(Debug, thiserror::Error)]
#[error("the checkpoint write queue stopped before answering")]
struct QueueStopped;

impl WriteQueue {
    /// Queues `write` and waits for the transaction that holds it.
    pub(crate) async fn put(&self, conns: &Connections, write: Write) -> Result<(), CheckpointError> {
        let (reply, answer) = oneshot::channel();
        let _waiting = Waiting::count(&self.waiting);
        let observed = self.observer.get().map(|observer| (observer, Instant::now()));
        self.submit(conns, Job { write, reply });
        let result = answer.await.unwrap_or_else(|_| Err(CheckpointError::Unavailable(Box::new(QueueStopped))));
        if let Some((observer, queued)) = observed {
            observer.checkpoint_written(WriteOutcome::of(&result), queued.elapsed());
        }
        result
    }

    /// Sets the observer of every later write; the first one set stays (`Err` gives back one
    /// that came after it).
    pub(crate) fn set_observer(&self, observer: Arc<dyn WriteObserver>) -> Result<(), Arc<dyn WriteObserver>> {
        self.observer.set(observer)
    }

    /// No caller is waiting for a put: the moment a read may borrow the write connection
    /// without holding up a batch (see [`crate::Database::idle_sqlite_writer`]).
    pub(crate) fn is_idle(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) == 0
    }

    fn submit(&self, conns: &Connections, job: Job) {
        let here = runtime::Handle::current();
        let mut sender = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        // Counted once queued: whoever sees the count can rely on the write being there.
        let queued = || self.counters.submitted.fetch_add(1, Ordering::Relaxed);
        let job = match sender.as_ref() {
            Some((on, queue)) if *on == here.id() => match queue.send(job) {
                Ok(()) => {
                    queued();
                    return;
                }
                // The tasks are gone: new ones take over, with the write that found them gone.
                Err(mpsc::error::SendError(job)) => job,
            },
            // Tasks on another runtime finish what they have queued, then end.
            _ => job,
        };
        let (queue, waiting) = mpsc::unbounded_channel();
        if queue.send(job).is_ok() {
            queued();
            let waiting = Arc::new(AsyncMutex::new(waiting));
            for _ in 0..batches_in_flight(conns) {
                here.spawn(serve(conns.clone(), waiting.clone(), self.counters.clone()));
            }
            *sender = Some((here.id(), queue));
        }
    }

    pub(crate) fn stats(&self) -> WriteBatchStats {
        let c = &self.counters;
        WriteBatchStats {
            submitted: c.submitted.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            largest: c.largest.load(Ordering::Relaxed),
            waiting: self.waiting.load(Ordering::Relaxed),
        }
    }
}

/// One of the queue's tasks: one batch at a time, until every sender is gone. The tasks take
/// turns at the queue: a task holds it from waiting for the first write to gathering the rest,
/// then lets it go while its batch runs.
async fn serve(conns: Connections, queue: Arc<AsyncMutex<mpsc::UnboundedReceiver<Job>>>, counters: Arc<Counters>) {
    let mut jobs = Vec::with_capacity(MAX_BATCH);
    loop {
        let mut waiting = queue.lock().await;
        let Some(first) = waiting.recv().await else { return };
        jobs.push(first);
        // The writer first, then what queued while waiting for it: under load the wait for the
        // writer is where a batch gathers.
        let results = match conns.pool() {
            DbPool::Sqlite(_) => {
                let writer = conns.sqlite_writer().await;
                gather(&mut waiting, &mut jobs);
                drop(waiting);
                match writer {
                    Ok(_) if jobs.is_empty() => Vec::new(),
                    Ok(mut conn) => {
                        // This task is dropped only with its runtime, but a batch cut off there
                        // must not leave the writer in its transaction either.
                        conn.transaction_started();
                        let results = put_sqlite_batch(&mut conn, &writes(&jobs)).await;
                        conn.transaction_ended();
                        results
                    }
                    Err(e) => failed_batch(jobs.len(), e),
                }
            }
            DbPool::Postgres(_) => {
                let lease = conns.postgres_lease().await;
                gather(&mut waiting, &mut jobs);
                drop(waiting);
                match lease {
                    Ok(lease) if jobs.is_empty() => {
                        lease.settle(true);
                        Vec::new()
                    }
                    Ok(mut lease) => {
                        let (results, fine) = put_postgres_batch(&mut lease, &writes(&jobs)).await;
                        lease.settle(fine);
                        results
                    }
                    Err(e) => failed_batch(jobs.len(), e),
                }
            }
        };
        if !jobs.is_empty() {
            counters.record(jobs.len());
        }
        for (job, result) in jobs.drain(..).zip(results) {
            // A caller that stopped waiting has nobody to tell.
            let _ = job.reply.send(result);
        }
    }
}

/// Adds every write waiting now to `jobs`, up to [`MAX_BATCH`], and drops those whose caller
/// stopped waiting.
fn gather(queue: &mut mpsc::UnboundedReceiver<Job>, jobs: &mut Vec<Job>) {
    while jobs.len() < MAX_BATCH {
        match queue.try_recv() {
            Ok(job) => jobs.push(job),
            Err(_) => break,
        }
    }
    jobs.retain(|job| !job.reply.is_closed());
}

/// How many batches may run at once: one on SQLite, whose writes take turns on one connection
/// anyway; on PostgreSQL up to [`MAX_POSTGRES_BATCHES`], each on a connection of its own, so
/// that one batch's statements run while another waits for its commit's WAL flush, and at
/// least half the pool stays for reads.
fn batches_in_flight(conns: &Connections) -> usize {
    match conns.pool() {
        DbPool::Sqlite(_) => 1,
        DbPool::Postgres(pool) => {
            let half = usize::try_from(pool.options().get_max_connections() / 2).unwrap_or(1);
            half.clamp(1, MAX_POSTGRES_BATCHES)
        }
    }
}

fn writes(jobs: &[Job]) -> Vec<&Write> {
    jobs.iter().map(|job| &job.write).collect()
}

impl Counters {
    fn record(&self, writes: usize) {
        let writes = u64::try_from(writes).unwrap_or(u64::MAX);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.writes.fetch_add(writes, Ordering::Relaxed);
        self.largest.fetch_max(writes, Ordering::Relaxed);
    }
}
