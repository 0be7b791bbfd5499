//! Group commit: callers on many threads hand in one job each; one of them (the
//! leader) takes every job waiting, runs them as one batch, and hands each
//! caller its own result. Whoever arrives while a batch runs waits for the
//! next one, which is why a batch grows with the load: one synchronous write
//! serves as many callers as arrived during the previous write.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};

/// Jobs of type `J` become results of type `R`.
pub struct GroupCommit<J, R> {
    state: Mutex<State<J, R>>,
    max_batch: usize,
}

struct State<J, R> {
    queue: Vec<(u64, J)>,
    results: HashMap<u64, R>,
    /// Each waiting caller's own wake-up: a finished batch wakes its own callers and the
    /// caller that leads the next one, not every waiter (with many callers, waking them
    /// all for each batch costs more than the batch's own work).
    waiting: HashMap<u64, Arc<Condvar>>,
    leading: bool,
    next: u64,
}

impl<J, R> GroupCommit<J, R> {
    /// Batches of at most `max_batch` jobs (at least one).
    pub fn new(max_batch: usize) -> Self {
        GroupCommit {
            state: Mutex::new(State {
                queue: Vec::new(),
                results: HashMap::new(),
                waiting: HashMap::new(),
                leading: false,
                next: 0,
            }),
            max_batch: max_batch.max(1),
        }
    }

    /// Runs `job` in a batch and returns its result. `run` gets the batch's jobs and
    /// returns one result per job, in order; `failed` stands in for a result `run`
    /// did not give (it returned too few, or panicked).
    pub fn submit(&self, job: J, run: impl Fn(Vec<J>) -> Vec<R>, failed: impl Fn() -> R) -> R {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let id = st.next;
        st.next += 1;
        st.queue.push((id, job));
        let mut wake: Option<Arc<Condvar>> = None;
        loop {
            if let Some(r) = st.results.remove(&id) {
                st.waiting.remove(&id);
                return r;
            }
            if st.leading {
                // Registered and asleep under one hold of the mutex: the leader, which needs
                // it to hand out results, cannot wake this caller before it waits.
                let cv = wake.get_or_insert_with(|| Arc::new(Condvar::new())).clone();
                st.waiting.insert(id, cv.clone());
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.leading = true;
            let take = st.queue.len().min(self.max_batch);
            let batch: Vec<(u64, J)> = st.queue.drain(..take).collect();
            drop(st);
            let (ids, jobs): (Vec<u64>, Vec<J>) = batch.into_iter().unzip();
            let started = std::time::Instant::now();
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(jobs)));
            crate::obs::metrics::METRICS.batch(take, started.elapsed());
            let mut results = ran.unwrap_or_default().into_iter();
            st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            for id in &ids {
                let r = results.next().unwrap_or_else(&failed);
                st.results.insert(*id, r);
            }
            st.leading = false;
            // The batch's callers, and the oldest caller still queued: it leads the next batch.
            let next = st.queue.first().map(|(id, _)| *id);
            for id in ids.iter().chain(next.iter()) {
                if let Some(cv) = st.waiting.get(id) {
                    cv.notify_one();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn every_caller_gets_its_own_result_and_waiting_callers_share_a_batch() {
        let g = Arc::new(GroupCommit::<u64, Result<u64, ()>>::new(16));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let (open_tx, open_rx) = std::sync::mpsc::channel::<()>();
        let open_rx = Arc::new(Mutex::new(open_rx));
        let spawn = |i: u64| {
            let (g, sizes, open_rx) = (g.clone(), sizes.clone(), open_rx.clone());
            std::thread::spawn(move || {
                g.submit(
                    i,
                    |jobs| {
                        if jobs == [0] {
                            // The first batch holds the leader's seat until every other caller waits.
                            let _ = open_rx.lock().unwrap().recv();
                        }
                        sizes.lock().unwrap().push(jobs.len());
                        jobs.into_iter().map(|j| Ok(j * 10)).collect()
                    },
                    || Err(()),
                )
            })
        };
        let first = spawn(0);
        while !g.state.lock().unwrap().leading {
            std::thread::yield_now();
        }
        let rest: Vec<_> = (1..64).map(spawn).collect();
        while g.state.lock().unwrap().queue.len() < 63 {
            std::thread::yield_now();
        }
        open_tx.send(()).unwrap();
        assert_eq!(first.join().unwrap(), Ok(0));
        for (i, t) in rest.into_iter().enumerate() {
            assert_eq!(t.join().unwrap(), Ok((i as u64 + 1) * 10));
        }
        assert_eq!(*sizes.lock().unwrap(), vec![1, 16, 16, 16, 15], "63 waiting callers in batches of at most 16");
    }

    #[test]
    fn a_panicking_or_short_batch_fails_its_callers_and_the_next_batch_runs() {
        let g = GroupCommit::<u32, Result<u32, &str>>::new(8);
        let r = g.submit(1, |_| panic!("injected"), || Err("failed"));
        assert_eq!(r, Err("failed"));
        assert_eq!(g.submit(2, |_| Vec::new(), || Err("short")), Err("short"));
        assert_eq!(g.submit(3, |j| j.into_iter().map(Ok).collect(), || Err("x")), Ok(3));
    }
}

/// Many callers, small batches, batches that panic or return short, a leader whose
/// own job is not in the batch it runs: every caller returns with its own result.
#[cfg(test)]
mod under_load {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn no_caller_is_left_waiting_under_load() {
        for round in 0..20u64 {
            let g = Arc::new(GroupCommit::<u64, Result<u64, u64>>::new(3));
            let threads: Vec<_> = (0..48u64)
                .map(|i| {
                    let g = g.clone();
                    std::thread::spawn(move || {
                        let r = g.submit(
                            i,
                            |jobs| {
                                std::thread::yield_now();
                                if jobs.iter().any(|j| (j + round) % 11 == 0) {
                                    panic!("injected");
                                }
                                if jobs.iter().any(|j| (j + round) % 7 == 0) {
                                    let n = jobs.len() - 1;
                                    return jobs.into_iter().take(n).map(|j| Ok(j * 2)).collect();
                                }
                                jobs.into_iter().map(|j| Ok(j * 2)).collect()
                            },
                            || Err(u64::MAX),
                        );
                        (i, r)
                    })
                })
                .collect();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let all: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
                let _ = tx.send(all);
            });
            let all = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("a caller was never woken");
            for (i, r) in all {
                assert!(r == Ok(i * 2) || r == Err(u64::MAX), "{i}: {r:?}");
            }
            let st = g.state.lock().unwrap();
            assert!(st.queue.is_empty() && st.results.is_empty() && st.waiting.is_empty() && !st.leading);
        }
    }
}
