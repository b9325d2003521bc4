//! The fences this process writes documents under, and where a document it does not write is
//! written.
//!
//! A process that serves alone writes every document under one fence, the whole-database
//! lease's. A member of a cluster writes the documents of a shard under that shard's writer lease
//! while it holds it, and knows which member holds each other shard, from the cluster's view that
//! its shard keeper reads: a request for such a document is forwarded there. A document's shard
//! is read from its channel each time it is needed (a room's opening, a request's route): a
//! deleted document's ID can be used again for one in another shard, so a remembered shard could
//! be wrong.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use fermata_store::{ChannelId, Fence, Shard, ShardCount, Storage, StoreError, WriterFence};

/// Where a document is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// By this process.
    Here,
    /// By the member serving at this base URL.
    Member(String),
    /// By no live process at the moment (a hand-over or a takeover is under way).
    Unplaced,
}

/// The fences of this process's document writes; cheap to clone.
#[derive(Debug, Clone)]
pub struct DocumentFences(Arc<Kind>);

#[derive(Debug)]
enum Kind {
    Whole(WriterFence),
    Sharded(Sharded),
}

#[derive(Debug)]
struct Sharded {
    storage: Arc<dyn Storage>,
    count: ShardCount,
    /// One seat per shard, by shard number.
    seats: Vec<Seat>,
}

#[derive(Debug, Default)]
struct Seat {
    /// Set while this process holds the shard's writer lease.
    fence: WriterFence,
    /// Set while this process hands the shard over: its open rooms still write under the fence,
    /// but no new room opens and requests are answered as unplaced.
    closing: AtomicBool,
    /// The base URL of the member that holds it, when another does.
    holder: RwLock<Option<String>>,
}

impl DocumentFences {
    /// Every document under one fence: a process that serves alone.
    pub fn whole(fence: WriterFence) -> Self {
        DocumentFences(Arc::new(Kind::Whole(fence)))
    }

    /// One fence per shard, all empty until the shard keeper seats them: a member of a cluster.
    pub fn sharded(storage: Arc<dyn Storage>, count: ShardCount) -> Self {
        DocumentFences(Arc::new(Kind::Sharded(Sharded {
            storage,
            count,
            seats: count.shards().map(|_| Seat::default()).collect(),
        })))
    }

    /// Whether this process is a member of a cluster.
    pub fn is_sharded(&self) -> bool {
        matches!(*self.0, Kind::Sharded(_))
    }

    /// The fence for the documents of `shard`.
    pub fn for_shard(&self, shard: Shard) -> WriterFence {
        match &*self.0 {
            Kind::Whole(fence) => fence.clone(),
            Kind::Sharded(sharded) => sharded.seat(shard).fence.clone(),
        }
    }

    /// The fence for document `id`, with its shard (`None` in a process that serves alone, which
    /// reads nothing): `Missing` for a document that does not exist. An empty fence while this
    /// process hands the document's shard over.
    pub async fn for_document(
        &self,
        id: &ChannelId,
    ) -> Result<(WriterFence, Option<Shard>), StoreError> {
        match &*self.0 {
            Kind::Whole(fence) => Ok((fence.clone(), None)),
            Kind::Sharded(sharded) => {
                let shard = sharded.shard_of(id).await?;
                let seat = sharded.seat(shard);
                if seat.closing.load(Ordering::Acquire) {
                    return Ok((WriterFence::default(), Some(shard)));
                }
                Ok((seat.fence.clone(), Some(shard)))
            }
        }
    }

    /// The fence for a new top-level document `id` (a child is written under its parent's
    /// fence), or `Unavailable` while this process does not write the shard `id` derives.
    pub fn for_new(&self, id: &ChannelId) -> Result<Fence, StoreError> {
        match &*self.0 {
            Kind::Whole(fence) => fence.current(),
            Kind::Sharded(sharded) => sharded.seat(Shard::of(id, sharded.count)).fence.current(),
        }
    }

    /// A new random document ID that this process writes: one in a shard it holds, chosen at
    /// random among them. `Unavailable` while it holds none.
    pub fn local_id(&self) -> Result<ChannelId, StoreError> {
        match &*self.0 {
            Kind::Whole(_) => Ok(ChannelId::random()),
            Kind::Sharded(sharded) => {
                let open: Vec<Shard> = self
                    .held()
                    .into_iter()
                    .filter(|shard| !sharded.seat(*shard).closing.load(Ordering::Acquire))
                    .collect();
                let random = ChannelId::random();
                let pick = random.0.bytes().fold(0_usize, |sum, byte| {
                    sum.wrapping_mul(31).wrapping_add(usize::from(byte))
                });
                let shard = open.get(pick % open.len().max(1)).ok_or_else(|| {
                    StoreError::unavailable("this server writes no documents yet; try again")
                })?;
                Ok(ChannelId::in_shard(*shard, sharded.count))
            }
        }
    }

    /// Where document `id` is written. `Missing` for a document that does not exist.
    pub async fn route(&self, id: &ChannelId) -> Result<Route, StoreError> {
        match &*self.0 {
            Kind::Whole(_) => Ok(Route::Here),
            Kind::Sharded(sharded) => {
                let shard = sharded.shard_of(id).await?;
                Ok(self.route_of_shard(shard))
            }
        }
    }

    /// Where a new top-level document `id` would be written: in the shard its ID derives.
    pub fn route_of_new(&self, id: &ChannelId) -> Route {
        match &*self.0 {
            Kind::Whole(_) => Route::Here,
            Kind::Sharded(sharded) => self.route_of_shard(Shard::of(id, sharded.count)),
        }
    }

    /// Where the documents of `shard` are written.
    pub fn route_of_shard(&self, shard: Shard) -> Route {
        match &*self.0 {
            Kind::Whole(_) => Route::Here,
            Kind::Sharded(sharded) => {
                let seat = sharded.seat(shard);
                if seat.closing.load(Ordering::Acquire) {
                    return Route::Unplaced;
                }
                if seat.fence.current().is_ok() {
                    return Route::Here;
                }
                let holder = seat
                    .holder
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                holder.map_or(Route::Unplaced, Route::Member)
            }
        }
    }

    /// Seats this process in `shard` under `fence` (`None` when it gives the shard up), for the
    /// shard keeper; either ends a hand-over begun with [`closing`](Self::closing).
    pub fn seat(&self, shard: Shard, fence: Option<Fence>) {
        if let Kind::Sharded(sharded) = &*self.0 {
            let seat = sharded.seat(shard);
            seat.fence.set(fence);
            seat.closing.store(false, Ordering::Release);
        }
    }

    /// Begins handing `shard` over: no new room of its documents opens here, and requests for
    /// them are answered as unplaced, while the open rooms close under the still-held fence.
    pub fn closing(&self, shard: Shard) {
        if let Kind::Sharded(sharded) = &*self.0 {
            sharded.seat(shard).closing.store(true, Ordering::Release);
        }
    }

    /// Empties every shard's fence: a member whose own lease is lost writes nothing more.
    pub fn clear(&self) {
        if let Kind::Sharded(sharded) = &*self.0 {
            for seat in &sharded.seats {
                seat.fence.set(None);
            }
        }
    }

    /// Records which member holds `shard` (its base URL), or that none does, for the shard
    /// keeper.
    pub fn set_holder(&self, shard: Shard, address: Option<String>) {
        if let Kind::Sharded(sharded) = &*self.0 {
            *sharded
                .seat(shard)
                .holder
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = address;
        }
    }

    /// The shards this process writes now.
    pub fn held(&self) -> Vec<Shard> {
        match &*self.0 {
            Kind::Whole(_) => Vec::new(),
            Kind::Sharded(sharded) => sharded
                .count
                .shards()
                .filter(|shard| sharded.seat(*shard).fence.current().is_ok())
                .collect(),
        }
    }
}

impl Sharded {
    fn seat(&self, shard: Shard) -> &Seat {
        // A shard from the database or from `Shard::of` is below the count; the modulo keeps a
        // corrupt one from panicking.
        &self.seats[usize::from(shard.0) % self.seats.len()]
    }

    async fn shard_of(&self, id: &ChannelId) -> Result<Shard, StoreError> {
        let channel = self
            .storage
            .collaboration()
            .channel(id)
            .await?
            .ok_or_else(|| StoreError::missing(format!("document {id} is unavailable")))?;
        Ok(channel.shard)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fermata_store::{Acquisition, FencingToken, LeaseName, NewChannel, Repository};
    use fermata_store_testkit::memory::MemoryStorage;

    use super::*;

    fn shard_fence(shard: Shard) -> Fence {
        Fence {
            lease: LeaseName::shard_writer(shard),
            token: FencingToken(1),
        }
    }

    #[tokio::test]
    async fn a_member_writes_its_seated_shards_and_routes_the_others() {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new(Default::default()));
        let lease = match storage
            .leases()
            .acquire(&LeaseName::WRITER, "test", Duration::from_secs(60))
            .await
            .unwrap()
        {
            Acquisition::Granted(lease) => lease,
            Acquisition::Held(_) => unreachable!("a new store's lease is free"),
        };
        let id = ChannelId::random();
        let channel = storage
            .collaboration()
            .create_channel(
                &lease.fence(),
                &NewChannel {
                    id: id.clone(),
                    repository: Repository::new("acme/app").unwrap(),
                    title: "Routed".to_owned(),
                    parent: None,
                },
            )
            .await
            .unwrap();
        let fences = DocumentFences::sharded(Arc::clone(&storage), ShardCount::DEFAULT);
        assert!(
            fences.local_id().is_err(),
            "a member seated nowhere writes nothing"
        );
        assert_eq!(fences.route(&id).await.unwrap(), Route::Unplaced);

        fences.set_holder(channel.shard, Some("http://10.0.0.7:7878".to_owned()));
        assert_eq!(
            fences.route(&id).await.unwrap(),
            Route::Member("http://10.0.0.7:7878".to_owned())
        );

        fences.seat(channel.shard, Some(shard_fence(channel.shard)));
        assert_eq!(fences.route(&id).await.unwrap(), Route::Here);
        assert!(fences.for_document(&id).await.unwrap().0.current().is_ok());
        assert_eq!(fences.held(), [channel.shard]);
        let local = fences.local_id().unwrap();
        assert_eq!(Shard::of(&local, ShardCount::DEFAULT), channel.shard);

        // Handing over: no new room, requests unplaced, until the seat is given up.
        fences.closing(channel.shard);
        assert_eq!(fences.route(&id).await.unwrap(), Route::Unplaced);
        assert!(fences.for_document(&id).await.unwrap().0.current().is_err());
        fences.seat(channel.shard, None);
        assert!(fences.held().is_empty());
        assert!(
            fences.route(&ChannelId::random()).await.is_err(),
            "no such document"
        );
    }

    #[tokio::test]
    async fn a_process_serving_alone_writes_everything_here_without_reading() {
        let fence = WriterFence::default();
        let fences = DocumentFences::whole(fence.clone());
        let id = ChannelId::random();
        assert_eq!(fences.route(&id).await.unwrap(), Route::Here);
        assert!(fences.for_new(&id).is_err(), "not serving yet");
        fence.set(Some(shard_fence(Shard(0))));
        assert!(fences.for_new(&id).is_ok());
    }
}
