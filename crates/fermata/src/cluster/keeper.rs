//! The shard keeper of a cluster member: once a poll it reads the cluster's view, takes the
//! shards placement gives this member when they are free, hands over those placement gives to
//! another, renews the ones it holds, and keeps the coordinator's lease when nobody else does.
//!
//! A shard's lease is taken only when no one holds it live, so no shard is ever held by two: a
//! member that joins waits one poll for each of its shards' holders to hand it over (close the
//! shard's rooms, which checkpoint under the still-held fence and send their clients to
//! reconnect, then release), and a member that died loses its shards when their leases expire.
//! Shards are taken only while a member that announced itself holds the coordinator's lease.
//! Each held lease is renewed every `renew_every` with the writer lease's timings, those due at
//! one look all in one transaction (`LeaseStore::renew_each`); one not renewed by its safety
//! deadline, or found taken over, is given up at once: its fence is emptied first, so nothing
//! more is written under it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use fermata_collab::{DocumentFences, RoomManager};
use fermata_metrics::Metrics;
use fermata_store::{
    Acquisition, ClusterView, ErrorChain, ErrorKind, Fence, Lease, LeaseName, Shard, ShardCount,
    Storage, placement,
};
use futures::StreamExt;
use tokio::sync::watch;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use crate::serve::Server;
use crate::writer_lease::LeaseTimings;

/// How many looks pass between two sweeps of departed members by the coordinator.
const FORGET_EVERY_TICKS: u64 = 600;
/// How long after its lease expired a departed member is forgotten.
const FORGET_AFTER: std::time::Duration = std::time::Duration::from_secs(3600);

/// How many shard leases a member acquires at once: enough that a dead member's shards are
/// taken over in one look, few enough to leave the shared pool to commits and renewals.
const TAKE_AT_ONCE: usize = 4;

/// What a room's clients are told when its shard moves to another member.
const HANDED_OVER: &str = "the document moved to another server; reconnect";

/// A lease this member holds, and when its latest successful renewal (or grant) was sent.
#[derive(Debug)]
struct Held {
    lease: Lease,
    sent: Instant,
}

/// The shard keeper's state; see the module documentation.
pub(super) struct ShardKeeper {
    storage: Arc<dyn Storage>,
    fences: DocumentFences,
    rooms: RoomManager,
    /// This member's instance, as its member lease names it.
    instance: String,
    /// The holder name every lease of this member is taken under.
    holder: String,
    count: ShardCount,
    timings: LeaseTimings,
    metrics: Arc<Metrics>,
    /// The coordinator's fence while this member holds it, for the singleton work.
    coordinator: watch::Sender<Option<Fence>>,
    shards: BTreeMap<Shard, Held>,
    coordinating: Option<Held>,
    /// Looks taken so far.
    ticks: u64,
}

impl ShardKeeper {
    /// The keeper of `server`'s shards, of the `count` in its database, renewed with `timings`;
    /// it sends the coordinator's fence on `coordinator` while it holds it, from `coordinating`
    /// when the member took it as it joined.
    pub(super) fn new(
        server: &Server,
        count: ShardCount,
        timings: LeaseTimings,
        coordinator: watch::Sender<Option<Fence>>,
        coordinating: Option<(Lease, Instant)>,
    ) -> Self {
        if let Some((lease, _)) = &coordinating {
            coordinator.send_replace(Some(lease.fence()));
        }
        ShardKeeper {
            storage: Arc::clone(&server.shared),
            fences: server.rooms.fences().clone(),
            rooms: server.rooms.clone(),
            instance: server.instance.clone(),
            holder: server.holder.clone(),
            count,
            timings,
            metrics: Arc::clone(&server.metrics),
            coordinator,
            shards: BTreeMap::new(),
            coordinating: coordinating.map(|(lease, sent)| Held { lease, sent }),
            ticks: 0,
        }
    }

    /// Keeps shards until `stop`, then hands every one over and releases the coordinator's
    /// lease, each within `drain_timeout`.
    pub(super) async fn run(mut self, stop: CancellationToken) {
        loop {
            self.tick().await;
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.timings.retry_delay()) => {}
            }
        }
        let shards: Vec<Shard> = self.shards.keys().copied().collect();
        let handovers = shards.iter().map(|shard| self.hand_over(*shard));
        let drained = timeout(
            self.timings.drain_timeout,
            futures::future::join_all(handovers),
        )
        .await;
        if drained.is_err() {
            tracing::warn!(
                "shards still being handed over after the drain timeout expire by themselves"
            );
        }
        self.resign_coordinator().await;
    }

    /// One poll: give up what is past its deadline, renew what is due, then place; now and then
    /// the coordinator forgets members long gone.
    async fn tick(&mut self) {
        self.ticks = self.ticks.wrapping_add(1);
        if self.coordinating.is_some() && self.ticks.is_multiple_of(FORGET_EVERY_TICKS) {
            self.forget_departed().await;
        }
        self.give_up_overdue();
        self.renew_due().await;
        match self.storage.cluster().view().await {
            Ok(view) => self.place(&view).await,
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&error), "could not read the cluster's members; keeping what this server holds")
            }
        }
        self.metrics.cluster_shards_held(self.shards.len());
    }

    /// Takes the free shards placement gives this member, hands over the others it holds, and
    /// records where every shard is written.
    async fn place(&mut self, view: &ClusterView) {
        let instances: Vec<&str> = view.members.iter().map(|m| m.instance()).collect();
        self.metrics.cluster_members(instances.len());
        if !instances.contains(&self.instance.as_str()) {
            // This member's own lease is not live in the view: take nothing more.
            return;
        }
        let addresses: HashMap<&str, &str> = view
            .members
            .iter()
            .map(|m| (m.lease.holder.as_str(), m.announcement.address.as_str()))
            .collect();
        self.take_coordinator(view).await;
        // Shards are taken only once a member that has announced itself coordinates: one that
        // coordinates a cold start announces itself after the startup reset, so no room opens
        // before the reset is done.
        let coordinated = view
            .live_holder(&LeaseName::COORDINATOR)
            .is_some_and(|record| addresses.contains_key(record.holder.as_str()));
        let mut taking = Vec::new();
        let mut leaving = Vec::new();
        for shard in self.count.shards() {
            let name = LeaseName::shard_writer(shard);
            let live = view.live_holder(&name);
            let address = live
                .filter(|record| record.holder != self.holder)
                .and_then(|record| addresses.get(record.holder.as_str()))
                .map(|address| (*address).to_owned());
            self.fences.set_holder(shard, address);
            let ours = placement::owner(&instances, shard) == Some(self.instance.as_str());
            let held = self.shards.contains_key(&shard);
            if ours && !held && live.is_none() && coordinated {
                taking.push(shard);
            } else if !ours && held {
                leaving.push(shard);
            }
        }
        self.take(taking).await;
        let handovers = leaving.iter().map(|shard| self.hand_over(*shard));
        futures::future::join_all(handovers).await;
        for shard in &leaving {
            self.shards.remove(shard);
        }
    }

    /// Takes `shards`, [`TAKE_AT_ONCE`] at a time. Taking is bounded in time, so a slow
    /// database cannot hold up the next renewals: none is begun after half a renewal period,
    /// and what is left is taken at the next look.
    async fn take(&mut self, shards: Vec<Shard>) {
        let until = Instant::now() + self.timings.renew_every / 2;
        let (storage, holder, ttl) = (&self.storage, self.holder.as_str(), self.timings.ttl);
        let outcomes: Vec<_> = futures::stream::iter(shards)
            .take_while(|_| std::future::ready(Instant::now() < until))
            .map(|shard| async move {
                let sent = Instant::now();
                let name = LeaseName::shard_writer(shard);
                (
                    shard,
                    sent,
                    storage.leases().acquire(&name, holder, ttl).await,
                )
            })
            .buffer_unordered(TAKE_AT_ONCE)
            .collect()
            .await;
        for (shard, sent, outcome) in outcomes {
            match outcome {
                Ok(Acquisition::Granted(lease)) => {
                    self.fences.seat(shard, Some(lease.fence()));
                    self.fences.set_holder(shard, None);
                    tracing::info!(shard = shard.0, token = %lease.token, "took a shard");
                    self.metrics.cluster_shard_taken();
                    self.shards.insert(shard, Held { lease, sent });
                }
                Ok(Acquisition::Held(_)) => {}
                Err(error) => {
                    tracing::warn!(shard = shard.0, error = %ErrorChain(&error), "could not take a shard; trying again at the next poll")
                }
            }
        }
    }

    /// Hands `shard` over: closes its rooms under the still-held fence, empties the fence, and
    /// releases the lease. The caller forgets the shard.
    async fn hand_over(&self, shard: Shard) {
        let Some(held) = self.shards.get(&shard) else {
            return;
        };
        let started = Instant::now();
        self.fences.closing(shard);
        self.rooms.close_shard(shard, HANDED_OVER).await;
        self.fences.seat(shard, None);
        if let Err(error) = self.storage.leases().release(&held.lease).await {
            tracing::warn!(shard = shard.0, error = %ErrorChain(&error), "could not release a shard; it expires by itself");
        }
        self.metrics.cluster_handed_over(started.elapsed());
        let took_ms = started.elapsed().as_secs_f64() * 1000.0;
        tracing::info!(shard = shard.0, took_ms, "handed a shard over");
    }

    /// Gives up at once every lease whose safety deadline passed without a renewal.
    fn give_up_overdue(&mut self) {
        let deadline = self.timings.safety_deadline;
        let overdue: Vec<Shard> = self
            .shards
            .iter()
            .filter(|(_, held)| held.sent.elapsed() >= deadline)
            .map(|(shard, _)| *shard)
            .collect();
        for shard in overdue {
            self.lose(shard, "its safety deadline passed without a renewal");
        }
        if self
            .coordinating
            .as_ref()
            .is_some_and(|held| held.sent.elapsed() >= deadline)
        {
            self.coordinating = None;
            self.coordinator.send_replace(None);
            tracing::error!("gave up the coordinator's lease: its safety deadline passed");
        }
    }

    /// Empties a lost shard's fence and closes its rooms (their clients reconnect elsewhere).
    fn lose(&mut self, shard: Shard, why: &str) {
        self.fences.seat(shard, None);
        self.shards.remove(&shard);
        tracing::error!(shard = shard.0, reason = why, "lost a shard");
        let rooms = self.rooms.clone();
        tokio::spawn(async move { rooms.close_shard(shard, HANDED_OVER).await });
    }

    /// Renews every shard's lease whose renewal is due, all in one renewal, then the
    /// coordinator's when it is due.
    async fn renew_due(&mut self) {
        let every = self.timings.renew_every;
        let (due, leases): (Vec<Shard>, Vec<Lease>) = self
            .shards
            .iter()
            .filter(|(_, held)| held.sent.elapsed() >= every)
            .map(|(shard, held)| (*shard, held.lease.clone()))
            .unzip();
        if !due.is_empty() {
            let sent = Instant::now();
            let attempt = timeout(
                self.timings.attempt_timeout,
                self.storage.leases().renew_each(&leases, self.timings.ttl),
            );
            match attempt.await {
                Ok(Ok(renewed)) => {
                    for (shard, lease) in due.into_iter().zip(renewed) {
                        match lease {
                            Some(lease) => {
                                self.shards.insert(shard, Held { lease, sent });
                            }
                            None => self.lose(shard, "it expired or was taken over"),
                        }
                    }
                }
                Ok(Err(error)) => {
                    tracing::warn!(shards = due.len(), error = %ErrorChain(&error), "could not renew the shards' leases; retrying");
                }
                Err(_) => {
                    tracing::warn!(
                        shards = due.len(),
                        "renewing the shards' leases took too long; retrying"
                    );
                }
            }
        }
        if let Some(lease) = self
            .coordinating
            .as_ref()
            .filter(|held| held.sent.elapsed() >= every)
            .map(|held| held.lease.clone())
        {
            match self.renew(&lease).await {
                Renewal::Renewed(held) => self.coordinating = Some(held),
                Renewal::Lost => {
                    self.coordinating = None;
                    self.coordinator.send_replace(None);
                    tracing::error!("lost the coordinator's lease");
                }
                Renewal::Retry => {}
            }
        }
    }

    async fn renew(&self, lease: &Lease) -> Renewal {
        let sent = Instant::now();
        let attempt = timeout(
            self.timings.attempt_timeout,
            self.storage.leases().renew(lease, self.timings.ttl),
        );
        match attempt.await {
            Ok(Ok(lease)) => Renewal::Renewed(Held { lease, sent }),
            Ok(Err(error)) if error.kind() == ErrorKind::Fenced => Renewal::Lost,
            Ok(Err(error)) => {
                tracing::warn!(lease = %lease.name, error = %ErrorChain(&error), "could not renew a lease; retrying");
                Renewal::Retry
            }
            Err(_) => {
                tracing::warn!(lease = %lease.name, "a lease renewal took too long; retrying");
                Renewal::Retry
            }
        }
    }

    /// Takes the coordinator's lease when nobody holds it: the member that held it left or
    /// died, and another goes on with the singleton work. (A cold start's coordinator took it
    /// before it announced itself; see `super::join`.)
    async fn take_coordinator(&mut self, view: &ClusterView) {
        if self.coordinating.is_some() || view.live_holder(&LeaseName::COORDINATOR).is_some() {
            return;
        }
        let sent = Instant::now();
        match self
            .storage
            .leases()
            .acquire(&LeaseName::COORDINATOR, &self.holder, self.timings.ttl)
            .await
        {
            Ok(Acquisition::Granted(lease)) => {
                tracing::info!(token = %lease.token, "took the coordinator's lease");
                self.coordinator.send_replace(Some(lease.fence()));
                self.coordinating = Some(Held { lease, sent });
            }
            Ok(Acquisition::Held(_)) => {}
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&error), "could not take the coordinator's lease; trying again at the next poll");
            }
        }
    }

    /// Forgets the members whose lease expired more than [`FORGET_AFTER`] ago: their rows
    /// would otherwise be read at every look of every member.
    async fn forget_departed(&self) {
        let cluster = self.storage.cluster();
        let forgotten = match cluster.view().await {
            Ok(view) => {
                let before = fermata_store::UnixMillis(
                    view.now.0 - i64::try_from(FORGET_AFTER.as_millis()).unwrap_or(i64::MAX),
                );
                cluster.forget_departed(before).await
            }
            Err(error) => Err(error),
        };
        match forgotten {
            Ok(0) => {}
            Ok(count) => tracing::info!(count, "forgot members that departed over an hour ago"),
            Err(error) => {
                tracing::warn!(error = %ErrorChain(&error), "could not forget departed members")
            }
        }
    }

    async fn resign_coordinator(&mut self) {
        if let Some(held) = self.coordinating.take() {
            self.coordinator.send_replace(None);
            if let Err(error) = self.storage.leases().release(&held.lease).await {
                tracing::warn!(error = %ErrorChain(&error), "could not release the coordinator's lease; it expires by itself");
            }
        }
    }
}

enum Renewal {
    Renewed(Held),
    Lost,
    Retry,
}
