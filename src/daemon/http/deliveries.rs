//! The deliveries a hook has answered (GitHub's `X-GitHub-Delivery`), remembered for a day
//! so that a redelivery is answered with the first answer and prompts nothing twice. A
//! delivery that arrives again while its first copy is still being handled waits for that
//! answer. Only accepted deliveries are remembered (the caller decides): one that failed
//! can be redelivered once the cause is fixed.
//!
//! The memory is the daemon's own, bounded to [`REMEMBERED`] deliveries, and does not
//! survive a restart: a redelivery after one is handled as new.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How long a delivery is remembered.
pub(super) const REMEMBER_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// At most this many deliveries are remembered; past it, the oldest are forgotten.
pub(super) const REMEMBERED: usize = 4096;

/// A hook's name and a delivery's id.
type Key = (String, String);

enum Entry<A> {
    /// Being handled; the answer comes through the channel.
    Pending(watch::Receiver<Option<A>>),
    Answered(A),
}

struct Memory<A> {
    entries: HashMap<Key, (Instant, Entry<A>)>,
    /// Keys by when they were put in, oldest first (a key may appear more than once: only
    /// the record matching its entry's time counts).
    order: VecDeque<(Instant, Key)>,
}

pub(super) struct Deliveries<A> {
    memory: Mutex<Memory<A>>,
    capacity: usize,
    keep_for: Duration,
}

/// What became of a delivery.
pub(super) enum Seen<A> {
    /// New: handle it, then [`Ticket::answered`] (or drop the ticket to forget it).
    New(Ticket<A>),
    /// Answered before: this is the answer.
    Answered(A),
    /// Its first copy is still being handled: wait for this, and if it closes without an
    /// answer, ask again.
    InFlight(watch::Receiver<Option<A>>),
}

impl<A> Deliveries<A> {
    fn memory(&self) -> MutexGuard<'_, Memory<A>> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<A: Clone> Deliveries<A> {
    pub fn new(capacity: usize, keep_for: Duration) -> Arc<Self> {
        Arc::new(Self {
            memory: Mutex::new(Memory {
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
            capacity,
            keep_for,
        })
    }

    pub fn seen(self: &Arc<Self>, hook: &str, delivery: &str, now: Instant) -> Seen<A> {
        let key = (hook.to_string(), delivery.to_string());
        let mut memory = self.memory();
        memory.forget(now.checked_sub(self.keep_for), self.capacity);
        match memory.entries.get(&key) {
            Some((_, Entry::Answered(answer))) => Seen::Answered(answer.clone()),
            Some((_, Entry::Pending(answer))) => Seen::InFlight(answer.clone()),
            None => {
                let (sender, receiver) = watch::channel(None);
                memory.put(key.clone(), now, Entry::Pending(receiver));
                Seen::New(Ticket {
                    deliveries: Arc::clone(self),
                    key: Some(key),
                    sender,
                })
            }
        }
    }
}

impl<A> Memory<A> {
    fn put(&mut self, key: Key, at: Instant, entry: Entry<A>) {
        self.order.push_back((at, key.clone()));
        self.entries.insert(key, (at, entry));
    }

    /// Forgets what was put in before `before`, and the oldest past `capacity`.
    fn forget(&mut self, before: Option<Instant>, capacity: usize) {
        while let Some((at, key)) = self.order.front() {
            let expired = before.is_some_and(|before| *at < before);
            if !expired && self.entries.len() <= capacity && self.order.len() <= 2 * capacity {
                break;
            }
            if self.entries.get(key).is_some_and(|(put, _)| put == at) {
                self.entries.remove(key);
            }
            self.order.pop_front();
        }
    }
}

/// A new delivery being handled. Dropped without an answer, it is forgotten, and those
/// waiting on it ask again.
pub(super) struct Ticket<A> {
    deliveries: Arc<Deliveries<A>>,
    key: Option<Key>,
    sender: watch::Sender<Option<A>>,
}

impl<A: Clone> Ticket<A> {
    /// Remembers `answer` as the delivery's, and gives it to those waiting.
    pub fn answered(mut self, answer: A, now: Instant) {
        if let Some(key) = self.key.take() {
            let mut memory = self.deliveries.memory();
            memory.put(key, now, Entry::Answered(answer.clone()));
            memory.forget(
                now.checked_sub(self.deliveries.keep_for),
                self.deliveries.capacity,
            );
        }
        self.sender.send_replace(Some(answer));
    }
}

impl<A> Drop for Ticket<A> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut memory = self.deliveries.memory();
            if matches!(memory.entries.get(&key), Some((_, Entry::Pending(_)))) {
                memory.entries.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(seen: Seen<&'static str>) -> Ticket<&'static str> {
        match seen {
            Seen::New(ticket) => ticket,
            Seen::Answered(a) => panic!("answered before: {a}"),
            Seen::InFlight(_) => panic!("in flight"),
        }
    }

    fn answered(seen: Seen<&'static str>) -> &'static str {
        match seen {
            Seen::Answered(a) => a,
            Seen::New(_) => panic!("taken as new"),
            Seen::InFlight(_) => panic!("in flight"),
        }
    }

    #[test]
    fn a_delivery_is_answered_once_for_a_day_per_hook() {
        let deliveries = Deliveries::new(100, REMEMBER_FOR);
        let t0 = Instant::now();
        new(deliveries.seen("issues", "d1", t0)).answered("first", t0);
        assert_eq!(answered(deliveries.seen("issues", "d1", t0)), "first");
        let later = t0 + REMEMBER_FOR - Duration::from_secs(1);
        assert_eq!(answered(deliveries.seen("issues", "d1", later)), "first");
        // Another hook's delivery of the same id is its own.
        new(deliveries.seen("builds", "d1", t0));
        // A day on, it is forgotten.
        let next_day = t0 + REMEMBER_FOR + Duration::from_secs(1);
        new(deliveries.seen("issues", "d1", next_day));
    }

    #[test]
    fn a_copy_in_flight_waits_for_the_first_answer_and_a_failure_is_forgotten() {
        let deliveries = Deliveries::new(100, REMEMBER_FOR);
        let t0 = Instant::now();
        let ticket = new(deliveries.seen("issues", "d2", t0));
        let Seen::InFlight(waiting) = deliveries.seen("issues", "d2", t0) else {
            panic!("the second copy must wait");
        };
        ticket.answered("first", t0);
        assert_eq!(*waiting.borrow(), Some("first"));
        // Dropped without an answer (it failed): the next copy is handled anew, and
        // whoever waited sees the channel close.
        let failed = new(deliveries.seen("issues", "d3", t0));
        let Seen::InFlight(waiting) = deliveries.seen("issues", "d3", t0) else {
            panic!("the second copy must wait");
        };
        drop(failed);
        assert!(waiting.has_changed().is_err());
        new(deliveries.seen("issues", "d3", t0));
    }

    #[test]
    fn past_its_capacity_the_oldest_are_forgotten() {
        let deliveries = Deliveries::new(3, REMEMBER_FOR);
        let t0 = Instant::now();
        for (i, id) in ["a", "b", "c", "d"].into_iter().enumerate() {
            let at = t0 + Duration::from_secs(i as u64);
            new(deliveries.seen("h", id, at)).answered(id, at);
        }
        let at = t0 + Duration::from_secs(10);
        assert_eq!(answered(deliveries.seen("h", "d", at)), "d");
        assert_eq!(answered(deliveries.seen("h", "b", at)), "b");
        new(deliveries.seen("h", "a", at));
        assert!(deliveries.memory().entries.len() <= 4);
    }
}
