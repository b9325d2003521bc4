//! The rules every collaboration adapter applies before it writes, written once: what a repeated
//! operation ID answers, when a commit, checkpoint or epoch replacement is refused, and what a
//! description publication installs.

use crate::channel::{Channel, Description, DescriptionDraft, NewChannel, check_title};
use crate::cluster::{Shard, ShardCount};
use crate::collaboration::{Commit, Committed, NewCheckpoint};
use crate::error::{StoreError, StoreResult};
use crate::time::UnixMillis;

/// The checks of a new channel against its parent (`parent`, the channel `new.parent` names, or
/// `None` when it names none), and the shard it belongs to: its parent's, or the one its ID
/// derives when it has none. Every adapter then checks the writing fence covers that shard.
pub fn check_new_channel(
    new: &NewChannel,
    parent: Option<&Channel>,
    count: ShardCount,
) -> StoreResult<Shard> {
    let Some(parent) = parent else {
        return Ok(Shard::of(&new.id, count));
    };
    if parent.repository != new.repository {
        return Err(StoreError::invalid(
            "a parent document must be in the same repository",
        ));
    }
    if parent.parent.is_some() {
        return Err(StoreError::invalid("a child document cannot have children"));
    }
    Ok(parent.shard)
}

/// The answer to an operation ID seen before.
pub fn repeated(
    stored: [u8; 32],
    revision: i64,
    sequence: i64,
    fingerprint: [u8; 32],
) -> StoreResult<Committed> {
    if stored != fingerprint {
        return Err(StoreError::conflict(
            "this operation ID was already used for a different commit",
        ));
    }
    Ok(Committed {
        revision,
        sequence,
        repeated: true,
    })
}

/// The checks every adapter makes before a commit writes anything.
pub fn check_commit(channel: &Channel, commit: &Commit) -> StoreResult<()> {
    if commit.expected_revision != channel.revision {
        return Err(StoreError::conflict(format!(
            "document {} is at revision {}, not {}",
            channel.id, channel.revision, commit.expected_revision
        )));
    }
    if channel.archived_at.is_some() {
        return Err(StoreError::conflict(format!(
            "document {} is archived; restore it first",
            channel.id
        )));
    }
    check_commit_shape(commit)
}

/// The checks of [`check_commit`] that need no channel: what the commit itself carries. An
/// adapter may make them first, to write a valid commit without reading the channel.
pub fn check_commit_shape(commit: &Commit) -> StoreResult<()> {
    if commit.is_empty() {
        return Err(StoreError::invalid(
            "a commit carries an update, a sidecar, events or a title",
        ));
    }
    if let Some(title) = &commit.title {
        check_title(title)?;
    }
    if commit.text.is_some() && commit.update.is_none() {
        return Err(StoreError::invalid(
            "a commit's text comes with the update that changed it",
        ));
    }
    if commit
        .events
        .iter()
        .any(|e| e.kind.is_empty() || e.kind.len() > 100)
    {
        return Err(StoreError::invalid("an event kind has 1 to 100 characters"));
    }
    Ok(())
}

/// The checks every adapter makes before saving a checkpoint.
pub fn check_checkpoint(
    channel: &Channel,
    current_through: Option<i64>,
    checkpoint: &NewCheckpoint,
) -> StoreResult<()> {
    if checkpoint.epoch != channel.epoch {
        return Err(StoreError::conflict(format!(
            "document {} is in epoch {}, not {}",
            channel.id, channel.epoch, checkpoint.epoch
        )));
    }
    if checkpoint.through_sequence > channel.sequence || checkpoint.revision > channel.revision {
        return Err(StoreError::invalid(
            "a checkpoint cannot cover commits that do not exist",
        ));
    }
    if current_through.is_some_and(|through| through > checkpoint.through_sequence) {
        return Err(StoreError::conflict("a newer checkpoint is already saved"));
    }
    Ok(())
}

/// The checks of an epoch replacement; returns the revision and sequence it gets.
pub fn check_epoch_replacement(
    channel: &Channel,
    expected_revision: i64,
    checkpoint: &NewCheckpoint,
) -> StoreResult<(i64, i64)> {
    if expected_revision != channel.revision {
        return Err(StoreError::conflict(format!(
            "document {} is at revision {}, not {expected_revision}",
            channel.id, channel.revision
        )));
    }
    if checkpoint.epoch != channel.epoch + 1 {
        return Err(StoreError::invalid(
            "a replacement history must be the next epoch",
        ));
    }
    Ok((channel.revision + 1, channel.sequence + 1))
}

/// The checks of a program-created channel's first checkpoint.
pub fn check_initial_checkpoint(checkpoint: &NewCheckpoint) -> StoreResult<()> {
    if checkpoint.epoch != 1 || checkpoint.through_sequence != 0 || checkpoint.revision != 0 {
        return Err(StoreError::invalid(
            "a created document's first checkpoint is epoch 1, sequence 0, revision 0",
        ));
    }
    Ok(())
}

/// The description a publication installs.
pub fn describe(
    current: Option<&Description>,
    draft: &DescriptionDraft,
    now: UnixMillis,
) -> Description {
    Description {
        text: draft.text.clone(),
        revision: current.map_or(0, |d| d.revision) + 1,
        source_plan_revision: draft.source_plan_revision,
        source_hash: draft.source_hash.clone(),
        generator_version: draft.generator_version.clone(),
        job_id: draft.job_id.clone(),
        projected_at: now,
    }
}
