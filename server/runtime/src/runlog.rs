//! The events of a run, kept so a caller whose stream broke can re-attach: it reads what it
//! missed and then follows the live run (`RunRegistry::subscribe`). A run's log is bounded
//! (oldest events dropped first) and outlives the run for a while, so a late re-attach still
//! gets the run's last event.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::watch;

use crate::Event;

/// How much of each run's events a process keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunRetention {
    /// Events kept per run; older ones are dropped first. 0 keeps none (re-attach off).
    pub max_events: usize,
    /// Ended runs whose events are kept, newest first.
    pub keep_finished: usize,
    /// How long an ended run's events are kept.
    pub keep_finished_for: Duration,
}

impl Default for RunRetention {
    fn default() -> Self {
        Self { max_events: 2_048, keep_finished: 512, keep_finished_for: Duration::from_secs(300) }
    }
}

/// One run's events, in id order.
pub struct RunLog {
    run_id: Arc<str>,
    thread_id: Arc<str>,
    max_events: usize,
    inner: Mutex<LogInner>,
    /// The id of the newest event and whether the run has ended; subscribers wait on it.
    progress: watch::Sender<(u64, bool)>,
}

struct LogInner {
    events: VecDeque<Event>,
    next_id: u64,
}

impl RunLog {
    pub(crate) fn new(run_id: Arc<str>, thread_id: Arc<str>, max_events: usize) -> Self {
        Self {
            run_id,
            thread_id,
            max_events,
            inner: Mutex::new(LogInner { events: VecDeque::new(), next_id: 1 }),
            progress: watch::Sender::new((0, false)),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    /// Numbers `event`, keeps it and hands it to `deliver` while the log is locked, so that
    /// ids, the log and the caller's stream all have one order even when fan-out tasks emit
    /// at once.
    pub(crate) fn append(&self, mut event: Event, deliver: impl FnOnce(Event)) {
        let mut inner = self.inner.lock().expect("run log poisoned");
        event.event_id = inner.next_id;
        inner.next_id += 1;
        let id = event.event_id;
        let ended = event.is_terminal();
        if self.max_events > 0 {
            if inner.events.len() == self.max_events {
                inner.events.pop_front();
            }
            inner.events.push_back(event.clone());
        }
        deliver(event);
        drop(inner);
        // Appends that raced past the lock may publish out of order: the newest id never goes
        // back, or a subscriber told the run ended could stop short of its last event.
        self.progress.send_modify(|p| *p = (p.0.max(id), p.1 || ended));
    }

    /// Marks the run ended even if its last event never came (a run lost to a panic), so no
    /// subscriber waits forever.
    pub(crate) fn close(&self) {
        self.progress.send_if_modified(|p| !std::mem::replace(&mut p.1, true));
    }

    pub fn is_ended(&self) -> bool {
        self.progress.borrow().1
    }

    /// Follows the run from the event after `after` (0: from its first).
    pub fn subscribe(self: &Arc<Self>, after: u64) -> RunSubscription {
        RunSubscription { log: self.clone(), cursor: after, progress: self.progress.subscribe() }
    }

    /// The first kept event after `cursor`, with how many events between them are no longer
    /// kept.
    fn after(&self, cursor: u64) -> Option<(Event, u64)> {
        let inner = self.inner.lock().expect("run log poisoned");
        let first = inner.events.front()?.event_id;
        let index = cursor.saturating_sub(first).saturating_add(u64::from(cursor >= first)) as usize;
        let event = inner.events.get(index)?.clone();
        let skipped = event.event_id - cursor - 1;
        Some((event, skipped))
    }
}

/// A reader of one run's events: first those already kept, then live ones, until the run's
/// last event.
pub struct RunSubscription {
    log: Arc<RunLog>,
    cursor: u64,
    progress: watch::Receiver<(u64, bool)>,
}

impl RunSubscription {
    pub fn run_id(&self) -> &str {
        self.log.run_id()
    }

    /// The thread the run runs on.
    pub fn thread_id(&self) -> &str {
        self.log.thread_id()
    }

    /// The next event and how many events before it are no longer kept; `None` once the run
    /// has ended and every kept event has been read.
    pub async fn next(&mut self) -> Option<(Event, u64)> {
        loop {
            let (newest, ended) = *self.progress.borrow_and_update();
            if newest > self.cursor {
                if let Some((event, skipped)) = self.log.after(self.cursor) {
                    self.cursor = event.event_id;
                    return Some((event, skipped));
                }
                // Nothing kept (max_events = 0): there is nothing to hand out.
                self.cursor = newest;
            }
            if ended {
                return None;
            }
            // Err: the log is gone, which happens only after the run ended.
            if self.progress.changed().await.is_err() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::*;
    use crate::event::{EventKind, Usage};

    fn event(kind: EventKind) -> Event {
        Event { run_id: "r".into(), event_id: 0, time: SystemTime::now(), node: None, task: None, kind }
    }

    fn delta(text: &str) -> Event {
        event(EventKind::TokenDelta { text: text.into() })
    }

    fn finished() -> Event {
        event(EventKind::RunFinished {
            steps: 1,
            duration: Duration::ZERO,
            usage: Usage::default(),
            output_json: "{}".into(),
        })
    }

    async fn drain(mut sub: RunSubscription) -> Vec<(u64, u64)> {
        let mut seen = Vec::new();
        while let Some((event, skipped)) = sub.next().await {
            seen.push((event.event_id, skipped));
        }
        seen
    }

    #[tokio::test]
    async fn a_subscriber_gets_kept_events_then_live_ones_until_the_last() {
        let log = Arc::new(RunLog::new("r".into(), "t".into(), 16));
        log.append(delta("a"), |_| {});
        log.append(delta("b"), |_| {});
        let sub = log.subscribe(1);
        let reader = tokio::spawn(drain(sub));
        tokio::task::yield_now().await;
        log.append(delta("c"), |_| {});
        log.append(finished(), |_| {});
        assert_eq!(reader.await.unwrap(), vec![(2, 0), (3, 0), (4, 0)]);
        // After the end, a late subscriber still reads what is kept.
        assert_eq!(drain(log.subscribe(0)).await, vec![(1, 0), (2, 0), (3, 0), (4, 0)]);
        assert!(drain(log.subscribe(4)).await.is_empty());
    }

    #[tokio::test]
    async fn dropped_events_are_reported_as_skipped() {
        let log = Arc::new(RunLog::new("r".into(), "t".into(), 2));
        for text in ["a", "b", "c"] {
            log.append(delta(text), |_| {});
        }
        log.append(finished(), |_| {});
        assert_eq!(drain(log.subscribe(0)).await, vec![(3, 2), (4, 0)]);
        assert_eq!(drain(log.subscribe(3)).await, vec![(4, 0)]);
    }

    #[tokio::test]
    async fn ids_follow_delivery_order() {
        let log = Arc::new(RunLog::new("r".into(), "t".into(), 0));
        let mut delivered = Vec::new();
        log.append(delta("a"), |e| delivered.push(e.event_id));
        log.append(delta("b"), |e| delivered.push(e.event_id));
        assert_eq!(delivered, vec![1, 2]);
        // Nothing kept: a subscriber ends as soon as the run has.
        log.close();
        assert!(drain(log.subscribe(0)).await.is_empty());
    }
}
