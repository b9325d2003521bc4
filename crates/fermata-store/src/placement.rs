//! Which member of a cluster owns each shard: rendezvous hashing over the live members.
//!
//! Every member computes the same answer from the same list of members, with no coordination:
//! a shard goes to the member whose weight for it is highest, the weight being the first eight
//! bytes of SHA-256 over the member's instance and the shard. When a member joins, it takes
//! about a share of the shards from each of the others, and no shard moves between two members
//! that stay; when one leaves, only its shards move.

use sha2::{Digest, Sha256};

use crate::cluster::Shard;

/// The weight of `instance` for `shard`.
fn weight(instance: &str, shard: Shard) -> u64 {
    let mut hash = Sha256::new();
    hash.update(instance.as_bytes());
    hash.update(b"\0");
    hash.update(shard.0.to_be_bytes());
    let digest = hash.finalize();
    let mut first = [0_u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The member among `instances` that owns `shard`; `None` when there is no member. Ties (which
/// need equal hashes) go to the smaller instance.
pub fn owner<'a>(instances: &[&'a str], shard: Shard) -> Option<&'a str> {
    instances.iter().copied().max_by(|a, b| {
        weight(a, shard)
            .cmp(&weight(b, shard))
            .then_with(|| b.cmp(a))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ShardCount;

    /// The shards of `count` that `instance` owns among `instances` (which should include it).
    fn owned_by(instance: &str, instances: &[&str], count: ShardCount) -> Vec<Shard> {
        count
            .shards()
            .filter(|shard| owner(instances, *shard) == Some(instance))
            .collect()
    }

    #[test]
    fn every_shard_has_one_owner_and_the_shares_are_even() {
        let members = ["a1b2c3d4e5f6", "0f9e8d7c6b5a", "5a5a5a5a5a5a"];
        let count = ShardCount::DEFAULT;
        let shares: Vec<usize> = members
            .iter()
            .map(|m| owned_by(m, &members, count).len())
            .collect();
        assert_eq!(shares.iter().sum::<usize>(), 256);
        // 256 shards over three members: each within a few dozen of a third.
        assert!(
            shares.iter().all(|share| (50..=120).contains(share)),
            "{shares:?}"
        );
    }

    #[test]
    fn a_joining_member_takes_shards_only_from_others_and_a_leaving_one_gives_only_its_own() {
        let three = ["a1b2c3d4e5f6", "0f9e8d7c6b5a", "5a5a5a5a5a5a"];
        let four = [
            "a1b2c3d4e5f6",
            "0f9e8d7c6b5a",
            "5a5a5a5a5a5a",
            "777777777777",
        ];
        for shard in ShardCount::DEFAULT.shards() {
            let before = owner(&three, shard).unwrap();
            let after = owner(&four, shard).unwrap();
            assert!(
                after == before || after == "777777777777",
                "shard {shard} moved"
            );
        }
        let two = ["a1b2c3d4e5f6", "0f9e8d7c6b5a"];
        for shard in ShardCount::DEFAULT.shards() {
            let before = owner(&three, shard).unwrap();
            if before != "5a5a5a5a5a5a" {
                assert_eq!(owner(&two, shard), Some(before), "shard {shard} moved");
            }
        }
        assert_eq!(owner(&[], Shard(0)), None);
    }
}
