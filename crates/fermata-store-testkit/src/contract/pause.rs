//! Holding a fenced write in flight on purpose, through the adapter's fenced-write hook.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, Semaphore};

use fermata_store::lease::FencedWriteHook;

/// Pauses the next fenced write once armed, inside its locks, until released.
#[derive(Debug, Clone)]
pub struct PausedWrites {
    state: Arc<PauseState>,
}

#[derive(Debug)]
struct PauseState {
    armed: AtomicBool,
    entered: Notify,
    release: Semaphore,
}

impl Default for PausedWrites {
    fn default() -> Self {
        PausedWrites {
            state: Arc::new(PauseState {
                armed: AtomicBool::new(false),
                entered: Notify::new(),
                release: Semaphore::new(0),
            }),
        }
    }
}

impl PausedWrites {
    /// The hook to open the store with.
    pub fn hook(&self) -> FencedWriteHook {
        let state = Arc::clone(&self.state);
        FencedWriteHook::new(move |_fence| {
            let state = Arc::clone(&state);
            Box::pin(async move {
                if state.armed.swap(false, Ordering::SeqCst) {
                    state.entered.notify_one();
                    let permit = state.release.acquire().await;
                    drop(permit);
                }
            })
        })
    }

    /// The next fenced write will pause.
    pub fn arm(&self) {
        self.state.armed.store(true, Ordering::SeqCst);
    }

    /// Waits until the armed write is paused inside its locks.
    pub async fn entered(&self) {
        self.state.entered.notified().await;
    }

    /// Lets the paused write go on.
    pub fn release(&self) {
        self.state.release.add_permits(1);
    }
}
