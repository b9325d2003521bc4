//! Shards, members and the leases of several serving processes on one database.
//!
//! Documents are split into a fixed number of shards, recorded when the database is created. A
//! document's shard is derived from its ID when it is created (a child takes its parent's) and
//! stored on its channel, so it never moves. Each shard has a writer lease of its own
//! ([`LeaseName::shard_writer`]); the whole-database lease [`LeaseName::WRITER`] covers every
//! shard, and is held by a process that serves alone. The two kinds exclude each other: the
//! whole-database lease is granted only while no shard or coordinator lease is live, and those
//! only while it is not. So every document is written by exactly one process at a time, the holder
//! of its shard's lease (or of the whole database's), and every commit is fenced by that lease's
//! token: [`Fence::covers`] is checked by every adapter before a document's write. The
//! coordinator's lease and members' leases write no document.
//!
//! The processes of a cluster are *members*: each holds a member lease of its own
//! ([`LeaseName::member`]), renewed as its heartbeat, and announces the address it serves at.

use std::fmt;

use async_trait::async_trait;

use crate::channel::ChannelId;
use crate::error::{StoreError, StoreResult};
use crate::lease::{Fence, LeaseName, LeaseRecord};
use crate::time::UnixMillis;

/// How many shards a database has: fixed when it is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardCount(u16);

impl ShardCount {
    /// The shard count of a database created by this release.
    pub const DEFAULT: ShardCount = ShardCount(256);
    /// The most shards a database may have: a shard is derived from four hex digits of an ID.
    pub const MAX: u32 = 4096;

    /// Checks `count` is between 1 and [`MAX`](Self::MAX).
    pub fn new(count: i64) -> StoreResult<Self> {
        u16::try_from(count)
            .ok()
            .filter(|count| (1..=Self::MAX).contains(&u32::from(*count)))
            .map(ShardCount)
            .ok_or_else(|| {
                StoreError::corrupt(format!(
                    "a database's shard count is between 1 and {}",
                    Self::MAX
                ))
            })
    }

    pub fn get(self) -> u16 {
        self.0
    }

    /// Every shard, in order.
    pub fn shards(self) -> impl Iterator<Item = Shard> {
        (0..self.0).map(Shard)
    }
}

/// One shard of a database's documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard(pub u16);

impl Shard {
    /// The shard a new top-level document with ID `id` belongs to: the ID's last four hex digits,
    /// as a number, modulo the shard count. Random and name-based UUIDs alike spread evenly.
    /// The migration that introduced shards computed the same for every existing document.
    pub fn of(id: &ChannelId, count: ShardCount) -> Shard {
        let hex = |byte: &u8| {
            char::from(*byte)
                .to_digit(16)
                .filter(|_| !byte.is_ascii_uppercase())
        };
        let digits = id.0.as_bytes().get(id.0.len().saturating_sub(4)..);
        let value = match digits {
            Some(digits) if digits.len() == 4 && digits.iter().all(|d| hex(d).is_some()) => digits
                .iter()
                .filter_map(hex)
                .fold(0, |value, digit| value * 16 + digit),
            // Not an ID this release makes (they are lowercase UUIDs); the migration agrees.
            _ => 0,
        };
        Shard(u16::try_from(value % u32::from(count.0)).unwrap_or(0))
    }
}

impl ChannelId {
    /// A new random ID (a version 4 UUID) whose shard among `count` is `shard`: its last four
    /// hex digits are a random multiple of `count` plus `shard`.
    pub fn in_shard(shard: Shard, count: ShardCount) -> ChannelId {
        let mut bytes = *uuid::Uuid::new_v4().as_bytes();
        let count = u32::from(count.get());
        let multiples = 0x1_0000 / count;
        let random = u32::from(u16::from_be_bytes([bytes[14], bytes[15]]));
        let value = (random % multiples) * count + u32::from(shard.0) % count;
        let value = u16::try_from(value).unwrap_or(shard.0);
        bytes[14..].copy_from_slice(&value.to_be_bytes());
        ChannelId(uuid::Uuid::from_bytes(bytes).to_string())
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The prefix of every shard's writer lease.
const SHARD_WRITER_PREFIX: &str = "fermata:writer:";
/// The prefix of every member's lease.
pub const MEMBER_PREFIX: &str = "fermata:member:";

impl LeaseName {
    /// The lease of a cluster's singleton work: the startup reset, sweeps, workflow runs and the
    /// schedule.
    pub const COORDINATOR: LeaseName = LeaseName(std::borrow::Cow::Borrowed("fermata:coordinator"));

    /// The writer lease of one shard: `fermata:writer:<k>`.
    pub fn shard_writer(shard: Shard) -> LeaseName {
        LeaseName(format!("{SHARD_WRITER_PREFIX}{}", shard.0).into())
    }

    /// The lease of one member, named by its instance (a-z, 0-9 and `-`).
    pub fn member(instance: &str) -> StoreResult<LeaseName> {
        LeaseName::new(format!("{MEMBER_PREFIX}{instance}"))
    }

    /// The shard whose writer lease this is, if it is one.
    pub fn shard(&self) -> Option<Shard> {
        let digits = self.as_str().strip_prefix(SHARD_WRITER_PREFIX)?;
        if digits.starts_with('0') && digits.len() > 1 {
            return None;
        }
        digits.parse().ok().map(Shard)
    }

    /// Whether this lease is one of a cluster's (a shard's writer lease or the coordinator's),
    /// which the whole-database lease excludes.
    pub fn is_cluster_writer(&self) -> bool {
        *self == LeaseName::COORDINATOR || self.shard().is_some()
    }
}

/// Which documents a write under a fence may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Every document: the whole-database lease (and any lease outside a cluster's, such as a
    /// tool's or a test's).
    Every,
    /// The documents of one shard: that shard's writer lease.
    One(Shard),
    /// No document: the coordinator's lease and members' leases.
    NoDocument,
}

impl Fence {
    /// Which documents a write under this fence may write.
    pub fn coverage(&self) -> Coverage {
        if let Some(shard) = self.lease.shard() {
            Coverage::One(shard)
        } else if self.lease == LeaseName::COORDINATOR
            || self.lease.as_str().starts_with(MEMBER_PREFIX)
        {
            Coverage::NoDocument
        } else {
            Coverage::Every
        }
    }

    /// Whether a write under this fence may write documents of `shard`.
    pub fn covers(&self, shard: Shard) -> bool {
        match self.coverage() {
            Coverage::Every => true,
            Coverage::One(own) => own == shard,
            Coverage::NoDocument => false,
        }
    }

    /// `Fenced` unless this fence [`covers`](Self::covers) `shard`, naming `action`.
    pub fn check_covers(&self, shard: Shard, action: &str) -> StoreResult<()> {
        if self.covers(shard) {
            return Ok(());
        }
        Err(StoreError::fenced(format!(
            "{action}: the document is in shard {shard}, which lease `{}` does not cover",
            self.lease
        )))
    }
}

/// What a member announces: where it serves, and which release it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// The base URL other members forward to, e.g. `http://10.0.0.5:8080`.
    pub address: String,
    pub version: String,
}

/// A live member: its lease row and what it announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMember {
    pub lease: LeaseRecord,
    pub announcement: Announcement,
}

impl ClusterMember {
    /// The member's instance, the lease name without its prefix.
    pub fn instance(&self) -> &str {
        self.lease
            .name
            .as_str()
            .strip_prefix(MEMBER_PREFIX)
            .unwrap_or_default()
    }
}

/// The cluster's view at one instant of the database's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    /// Live members, by lease name.
    pub members: Vec<ClusterMember>,
    /// Every shard writer lease and the coordinator's that was ever granted, live or not, by name.
    pub leases: Vec<LeaseRecord>,
    pub now: UnixMillis,
}

impl ClusterView {
    /// The live holder of `name`, if any.
    pub fn live_holder(&self, name: &LeaseName) -> Option<&LeaseRecord> {
        self.leases
            .iter()
            .find(|record| record.name == *name && record.is_live(self.now))
    }

    /// The member that placement ([`crate::placement`]) gives `shard` among the live members;
    /// `None` when there is none.
    pub fn placed_member(&self, shard: Shard) -> Option<&ClusterMember> {
        let instances: Vec<&str> = self.members.iter().map(ClusterMember::instance).collect();
        let owner = crate::placement::owner(&instances, shard)?;
        self.members
            .iter()
            .find(|member| member.instance() == owner)
    }

    /// How many of the `count` shards are held live by the member placement gives them: once
    /// that is all of them, every hand-over a join or a departure set off is done.
    pub fn shards_in_place(&self, count: ShardCount) -> usize {
        count
            .shards()
            .filter(|shard| {
                let holder = self.live_holder(&LeaseName::shard_writer(*shard));
                let placed = self.placed_member(*shard);
                holder
                    .zip(placed)
                    .is_some_and(|(record, member)| record.holder == member.lease.holder)
            })
            .count()
    }
}

/// The cluster store: the shard count, and the members' announcements.
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// The database's shard count, fixed when it was created.
    async fn shard_count(&self) -> StoreResult<ShardCount>;

    /// Records what the member holding `fence` (its member lease) announces, replacing its
    /// earlier announcement. `Fenced` when the member lease is not live.
    async fn announce(&self, fence: &Fence, announcement: &Announcement) -> StoreResult<()>;

    /// Withdraws the announcement of the member holding `fence` (its member lease), which is
    /// stopping: the others leave it out of placement from their next look, while it hands its
    /// shards over. `Fenced` when the member lease is not live.
    async fn withdraw(&self, fence: &Fence) -> StoreResult<()>;

    /// The live members and the cluster's leases, read in one snapshot on the database's clock.
    async fn view(&self) -> StoreResult<ClusterView>;

    /// Forgets the members whose lease expires (or would have, for a released one) before
    /// `before`: their announcements and their leases' rows (a member's lease is never taken
    /// again: each start names a new one). Returns how many members.
    async fn forget_departed(&self, before: UnixMillis) -> StoreResult<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_the_last_four_hex_digits_modulo_the_count() {
        let id = ChannelId("6f1c2a8e-0d4b-4c7e-9a31-5b2e7d10a1ff".to_owned());
        assert_eq!(Shard::of(&id, ShardCount::DEFAULT), Shard(0xff));
        assert_eq!(Shard::of(&id, ShardCount::new(1).unwrap()), Shard(0));
        assert_eq!(
            Shard::of(&id, ShardCount::new(4096).unwrap()),
            Shard(0xa1ff % 4096)
        );
        let odd = ChannelId("ABCD".to_owned());
        assert_eq!(Shard::of(&odd, ShardCount::DEFAULT), Shard(0));
        assert!(ShardCount::new(0).is_err());
        assert!(ShardCount::new(4097).is_err());
    }

    #[test]
    fn an_id_made_for_a_shard_is_in_it() {
        for count in [1, 3, 256, 4096] {
            let count = ShardCount::new(count).unwrap();
            for shard in [0, count.get() / 2, count.get() - 1] {
                let id = ChannelId::in_shard(Shard(shard), count);
                assert_eq!(Shard::of(&id, count), Shard(shard), "{id}");
                assert!(ChannelId::parse(&id.0).is_ok());
            }
        }
    }

    #[test]
    fn shard_leases_are_named_and_read_back() {
        let name = LeaseName::shard_writer(Shard(17));
        assert_eq!(name.as_str(), "fermata:writer:17");
        assert_eq!(name.shard(), Some(Shard(17)));
        assert!(name.is_cluster_writer());
        assert!(LeaseName::COORDINATOR.is_cluster_writer());
        assert!(!LeaseName::WRITER.is_cluster_writer());
        assert_eq!(LeaseName::WRITER.shard(), None);
        assert_eq!(LeaseName::new("fermata:writer:017").unwrap().shard(), None);
        assert!(!LeaseName::member("abc").unwrap().is_cluster_writer());
    }

    #[test]
    fn the_whole_database_lease_covers_every_shard_and_a_shard_lease_its_own() {
        let whole = Fence {
            lease: LeaseName::WRITER,
            token: crate::FencingToken(1),
        };
        let shard = Fence {
            lease: LeaseName::shard_writer(Shard(3)),
            token: crate::FencingToken(1),
        };
        assert!(whole.covers(Shard(0)) && whole.covers(Shard(255)));
        assert!(shard.covers(Shard(3)));
        assert!(!shard.covers(Shard(4)));
        assert!(
            shard
                .check_covers(Shard(4), "committing")
                .unwrap_err()
                .kind()
                == crate::ErrorKind::Fenced
        );
    }
}
