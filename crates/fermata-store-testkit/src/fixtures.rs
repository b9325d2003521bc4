//! Values tests build again and again: a document as the store would hand it back.

use fermata_store::{Channel, ChannelId, Repository, Shard, ShardCount, Slug, UnixMillis};

/// Document `id` of `repository`, titled "Plan" with the slug `plan`, at the first revision,
/// sequence and epoch, in the shard its ID derives, created and changed at time zero. A test changes what it is about with
/// struct update syntax: `Channel { revision: 4, ..channel(ID, "acme/app") }`.
pub fn channel(id: &str, repository: &str) -> Channel {
    let id = ChannelId::parse(id).expect("a fixture's document ID is a UUID");
    Channel {
        shard: Shard::of(&id, ShardCount::DEFAULT),
        id,
        repository: Repository::new(repository).expect("a fixture's repository is valid"),
        title: "Plan".to_owned(),
        slug: Slug::new("plan").expect("`plan` is a slug"),
        parent: None,
        archived_at: None,
        created_at: UnixMillis(0),
        updated_at: UnixMillis(0),
        revision: 1,
        sequence: 1,
        epoch: 1,
        description: None,
    }
}
