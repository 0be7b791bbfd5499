//! The gate that lets as many signers run at once as there are cores.

/// The signature work of concurrent requests (verifying a CSR, a conductor and its
/// attributes, signing the certificate) is pure CPU: more of it at once than there are cores
/// only makes the scheduler take turns, and the group commit's leader (which holds the
/// store's lock for the whole batch) waits its turn among dozens of signers. The gate lets
/// as many in as there are cores; the others wait, asleep, in arrival order of wake-ups.
pub(super) struct CpuGate {
    free: std::sync::Mutex<Option<usize>>,
    opened: std::sync::Condvar,
}

/// Leaves the gate when dropped.
pub(super) struct Permit<'a>(&'a CpuGate);

pub(super) static CPU_GATE: CpuGate = CpuGate { free: std::sync::Mutex::new(None), opened: std::sync::Condvar::new() };

impl CpuGate {
    pub(super) fn enter(&self) -> Permit<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let n = free.get_or_insert_with(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
            if *n > 0 {
                *n -= 1;
                return Permit(self);
            }
            free = self.opened.wait(free).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut free = self.0.free.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = free.as_mut() {
            *m = m.saturating_add(1);
        }
        drop(free);
        self.0.opened.notify_one();
    }
}

#[cfg(test)]
mod gate_tests {
    use super::CPU_GATE;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Never more signers inside than there are cores, and every one gets in.
    #[test]
    fn the_cpu_gate_lets_in_one_signer_per_core_and_everyone_in_turn() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..32)
            .map(|_| {
                let (inside, most) = (inside.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let _p = CPU_GATE.enter();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let most = most.load(Ordering::SeqCst);
        assert!(most >= 1 && most <= cores, "{most} inside at once on {cores} cores");
    }
}
