//! A client's outbound queue: what its room sends it, in order, bounded in messages
//! ([`OUTBOUND_QUEUE`]) and in bytes, so a client that reads slowly (or not at all) holds at most
//! `limit` bytes of queued messages plus the one it is being written, and is dropped as "too far
//! behind" rather than growing the server's memory. A message larger than the limit still goes
//! to a client whose queue is empty: a late joiner's whole document.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

use crate::room::Outbound;

/// How many messages wait for a slow client before it is dropped.
pub(crate) const OUTBOUND_QUEUE: usize = 256;

/// The room's end of a client's queue.
#[derive(Debug)]
pub(crate) struct OutboundSender {
    sender: mpsc::Sender<Outbound>,
    queued: Arc<AtomicUsize>,
    limit: usize,
}

/// The connection's end: what the room sends, in order.
#[derive(Debug)]
pub struct OutboundReceiver {
    receiver: mpsc::Receiver<Outbound>,
    queued: Arc<AtomicUsize>,
}

/// A queue that holds at most `limit` bytes of messages besides one of any size.
pub(crate) fn outbound_queue(limit: usize) -> (OutboundSender, OutboundReceiver) {
    let (sender, receiver) = mpsc::channel(OUTBOUND_QUEUE);
    let queued = Arc::new(AtomicUsize::new(0));
    (
        OutboundSender {
            sender,
            queued: Arc::clone(&queued),
            limit,
        },
        OutboundReceiver { receiver, queued },
    )
}

impl OutboundSender {
    /// Queues `message`; false when the client has fallen too far behind: its queue is full of
    /// messages, or holds some and this one would take it past the byte limit.
    pub(crate) fn send(&self, message: Vec<u8>) -> bool {
        let len = message.len();
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && queued.saturating_add(len) > self.limit {
            return false;
        }
        self.queued.fetch_add(len, Ordering::AcqRel);
        if self.sender.try_send(Outbound::Message(message)).is_ok() {
            return true;
        }
        self.queued.fetch_sub(len, Ordering::AcqRel);
        false
    }

    /// Queues a close, whatever the queue holds in bytes (it is dropped only if the queue is
    /// full of messages, and then the connection ends when the room lets go of it).
    pub(crate) fn close(&self, code: u16, reason: &str) {
        let _ = self.sender.try_send(Outbound::Close {
            code,
            reason: reason.to_owned(),
        });
    }
}

impl OutboundReceiver {
    /// The next thing the room sends; `None` once the room has let go of the connection.
    pub async fn recv(&mut self) -> Option<Outbound> {
        let next = self.receiver.recv().await;
        if let Some(Outbound::Message(bytes)) = &next {
            self.queued.fetch_sub(bytes.len(), Ordering::AcqRel);
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slow_reader_is_bounded_in_bytes_but_gets_one_large_message() {
        let (sender, mut receiver) = outbound_queue(100);
        assert!(sender.send(vec![0; 1000]), "one message of any size");
        assert!(!sender.send(vec![0; 1]), "nothing beside it while it waits");
        assert!(matches!(receiver.recv().await, Some(Outbound::Message(m)) if m.len() == 1000));
        for _ in 0..10 {
            assert!(sender.send(vec![0; 10]));
        }
        assert!(!sender.send(vec![0; 1]), "the limit is reached");
        sender.close(1013, "behind");
        for _ in 0..10 {
            assert!(matches!(receiver.recv().await, Some(Outbound::Message(_))));
        }
        assert!(matches!(
            receiver.recv().await,
            Some(Outbound::Close { code: 1013, .. })
        ));
        assert!(sender.send(vec![0; 100]), "read: room again");
    }
}
