//! The storage contract suite: one test body per guarantee, run against every adapter.
//!
//! An adapter's test crate provides a [`Harness`] that opens a fresh, isolated, migrated store
//! and expands [`contract_suite!`](crate::contract_suite) with it; every case then runs as its own
//! test against that adapter. Cases wait for conditions by polling with a bound, never by
//! sleeping for a guessed time.

mod accounts;
mod chat;
mod cluster;
mod collaboration;
mod history;
mod jobs;
mod lease;
mod media;
mod pause;
mod planner;
mod repository;
mod research;
mod schema;
mod search;
mod tenure;
mod workflow;
mod writer_gate;

use std::sync::Arc;

use async_trait::async_trait;

use crate::{PATIENCE, eventually};

use fermata_store::channel::{NewChannel, Repository};
use fermata_store::lease::Fence;
use fermata_store::{Channel, ChannelId, CollaborationStore, DeferredTurn};
use fermata_store::{Storage, StoreOptions};

/// A new top-level document titled `title` in the repository `acme/app`, created under `fence`:
/// the document most cases and the adapters' own tests start from.
pub async fn create_document(
    store: &dyn CollaborationStore,
    fence: &Fence,
    title: &str,
) -> Channel {
    store
        .create_channel(
            fence,
            &NewChannel {
                id: ChannelId::random(),
                repository: Repository::new("acme/app").unwrap(),
                title: title.to_owned(),
                parent: None,
            },
        )
        .await
        .unwrap()
}

pub use accounts::*;
pub use chat::*;
pub use cluster::*;
pub use collaboration::*;
pub use history::*;
pub use jobs::*;
pub use lease::*;
pub use media::*;
pub use pause::PausedWrites;
pub use planner::*;
pub use repository::*;
pub use research::*;
pub use schema::*;
pub use search::*;
pub use tenure::*;
pub use workflow::*;
pub use writer_gate::*;

/// What the suite needs from an adapter under test.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A new, empty, migrated store opened with `options`, isolated from every other store this
    /// harness opened.
    async fn open(&self, options: StoreOptions) -> Arc<dyn Storage>;

    /// Stores deferred turns in `store` (one this harness opened) as an earlier release left
    /// them, with plain writes: this release's port never creates one.
    async fn seed_deferred_turns(&self, store: &dyn Storage, turns: &[DeferredTurn]);

    /// Every deferred turn in `store`, by ID.
    async fn deferred_turns(&self, store: &dyn Storage) -> Vec<DeferredTurn>;

    /// Sets a document's reserved summary and transcript cursor, which this release never
    /// advances, creating its Planner state (no owner, unavailable, generation 0) if needed.
    async fn seed_reserved_context(
        &self,
        store: &dyn Storage,
        channel: &ChannelId,
        summary: &str,
        cursor: i64,
    );

    /// Indexes `text` as a document's text the way the upgrade to search left it: from its
    /// last checkpoint, marked possibly behind its journal, which this release never does.
    async fn seed_stale_search_text(&self, store: &dyn Storage, channel: &ChannelId, text: &str);
}

/// Expands to one `#[tokio::test]` per contract case, each running against the harness that
/// `$harness` evaluates to.
#[macro_export]
macro_rules! contract_suite {
    ($harness:expr) => {
        $crate::contract_suite!(@cases $harness;
            lease_is_granted_when_free,
            lease_is_refused_while_held,
            renewal_extends_the_expiry,
            release_frees_the_lease_once,
            peek_tells_free_held_expired_and_released,
            takeover_happens_only_after_expiry,
            tokens_strictly_increase_across_grants,
            renewal_after_a_takeover_cannot_extend_the_lost_lease,
            renewal_of_an_expired_lease_is_fenced,
            leases_renewed_at_once_extend_only_the_live_ones,
            renewal_waiting_behind_a_takeover_cannot_extend_an_expired_lease,
            renewal_channel_renews_and_recovers_after_abandon,
            fenced_write_with_a_stale_token_is_refused,
            fenced_write_with_an_expired_lease_is_refused,
            fenced_write_after_release_is_refused,
            takeover_waits_for_a_write_in_flight,
            peek_returns_while_a_fenced_write_holds_its_locks,
            documents_keep_the_shard_their_id_or_parent_gave_them,
            a_shard_lease_writes_the_documents_of_its_shard_alone,
            the_whole_database_lease_and_a_clusters_leases_exclude_each_other,
            members_announce_themselves_and_leave_the_view_with_their_lease,
            tenure_open_supersedes_earlier_open_tenures,
            tenure_open_is_idempotent,
            tenure_close_records_a_clean_stop,
            tenure_close_without_open_is_missing,
            user_names_are_unique_and_roles_are_kept,
            user_passwords_and_roles_change,
            a_password_change_ends_the_users_sessions,
            sessions_are_found_by_secret_hash_until_they_expire,
            session_secrets_and_ids_are_unique,
            session_credential_rotation_is_revision_checked,
            a_deleted_session_is_never_recreated,
            reauthentication_makes_a_session_fresh_under_a_new_secret,
            the_session_sweep_removes_expired_and_metadata_only_sessions_once,
            api_tokens_work_until_revoked,
            machines_are_found_by_token_hash,
            machine_credential_rotation_is_revision_checked,
            machine_reauthorization_replaces_its_token,
            only_the_owner_revokes_a_machine_and_its_credentials_go,
            channels_get_unique_slugs_per_repository_while_titles_repeat,
            a_rename_promotes_a_new_slug_and_keeps_former_ones_reserved,
            children_are_one_level_deep_and_in_the_same_repository,
            a_commit_assigns_the_next_revision_and_sequence_and_writes_all_it_carries,
            a_stale_revision_is_a_conflict_and_changes_nothing,
            operation_ids_are_idempotent,
            concurrent_commits_on_the_same_revision_let_exactly_one_win,
            collaboration_writes_under_a_lost_lease_are_fenced,
            archive_and_restore_are_idempotent_and_move_no_counter,
            lists_leave_out_archived_channels_unless_asked,
            checkpoints_replace_the_prior_one_and_prune_only_the_journal,
            a_long_journal_with_large_updates_reads_back_whole_and_in_order,
            an_epoch_replacement_installs_a_new_history_atomically,
            only_archived_channels_without_children_are_deleted_and_leave_no_trace,
            program_creation_is_idempotent_and_publishes_its_checkpoint,
            descriptions_publish_once_per_job_and_move_no_counter,
            schema_reservations_take_the_lease_and_repeat_by_request_key,
            concurrent_reservations_let_exactly_one_take_the_lease,
            schema_transitions_are_conditional_and_terminal_states_never_change,
            operations_are_counted_by_kind_and_state,
            the_first_bound_run_stays_bound,
            a_refresh_records_its_reviewed_base_once,
            a_publishing_refresh_records_its_pull_request_once,
            inventories_are_immutable_and_keep_their_order,
            database_results_become_immutable_when_terminal,
            a_database_history_lists_its_finished_results_latest_first,
            steps_count_attempts_and_never_change_once_terminal,
            the_schema_lease_heartbeats_expires_and_is_released_conditionally,
            clearing_removes_only_an_expired_lease_of_the_named_operation,
            a_review_takes_exactly_one_decision,
            artifacts_are_recorded_once_and_only_move_forward,
            cleanup_grants_are_consumed_once,
            workflow_runs_are_created_once_and_read_back,
            only_one_of_racing_workers_claims_a_run,
            racing_workers_claim_distinct_runs,
            claims_take_only_runs_of_the_named_workflows,
            a_heartbeat_extends_the_claim_and_marks_running_steps,
            an_expired_claim_is_reclaimed_and_the_old_claim_is_fenced,
            terminal_runs_never_change,
            terminal_steps_never_change,
            a_suspended_run_wakes_at_its_time,
            a_released_run_is_claimable_at_once,
            a_hook_delivery_is_idempotent_and_wakes_the_run,
            a_hook_delivered_while_running_is_not_slept_through,
            a_hook_wait_times_out_for_good,
            purge_removes_old_terminal_runs_with_their_steps_and_hooks,
            jobs_are_enqueued_per_document_and_repeat_by_id,
            only_one_of_racing_workers_claims_a_job,
            racing_workers_claim_distinct_jobs,
            an_expired_job_claim_is_taken_over_and_the_old_claim_is_fenced,
            job_writes_under_a_lost_lease_are_fenced,
            job_settlement_is_idempotent_and_a_different_one_conflicts,
            a_newer_target_supersedes_an_older_job,
            every_job_change_raises_the_documents_job_revision,
            jobs_go_with_their_document,
            research_staging_is_idempotent_by_request_key,
            research_links_refuse_jobs_of_another_document,
            completed_evidence_is_reconciled_into_one_answer_job,
            publication_creates_one_initialized_child_and_repeats_return_it,
            a_failed_publication_leaves_neither_the_child_nor_the_link,
            a_published_child_cannot_be_deleted,
            research_writes_under_a_lost_lease_are_fenced,
            the_repository_listing_leaves_out_archived_parents_unless_asked,
            research_requests_go_with_their_parent,
            history_extends_an_authors_session_for_changes_under_ten_minutes_apart,
            history_gives_authorless_changes_sessions_of_their_own,
            history_lists_newest_first_within_a_bound_and_reads_one,
            history_moves_only_forward_and_checks_its_values,
            history_writes_under_a_lost_lease_are_fenced,
            history_and_chat_rows_go_with_their_document,
            chat_threads_are_replaced_whole_read_and_listed,
            chat_session_state_is_one_row_per_document,
            chat_writes_under_a_lost_lease_are_fenced_and_record_their_token,
            chat_values_are_checked_at_the_boundary,
            run_stages_are_bounded_per_stage_not_per_run,
            removing_a_run_removes_only_its_stages,
            a_planner_claim_raises_the_generation_and_only_its_holder_changes_it,
            concurrent_planner_claims_let_exactly_one_win,
            an_owner_whose_session_ends_is_cleared_and_the_generation_stays,
            planner_writes_under_a_lost_lease_are_fenced,
            link_holds_are_replaced_whole_under_their_fencing_token,
            a_link_hold_goes_with_its_session_its_machine_or_its_document,
            the_next_process_is_given_the_handover_window_once,
            planner_credentials_keep_a_digest_until_they_expire,
            planner_credentials_go_with_withdrawal_the_machine_and_the_document,
            model_choices_are_replaced_whole_and_neither_removes_the_row,
            mcp_sessions_are_touched_and_swept_when_idle,
            a_newer_decision_answer_replaces_the_row_and_waits_again,
            a_delivered_decision_answer_never_runs_twice,
            people_choose_and_favor_their_own_or_shared_machines,
            unsharing_removes_teammates_favorites_and_revoking_removes_all,
            deleting_a_document_removes_its_planner_rows_and_machine_choices,
            retiring_deferred_turns_closes_the_open_ones_once,
            the_owner_reset_keeps_only_owners_whose_hold_names_a_kept_session,
            child_sidecars_are_read_and_replaced_without_moving_a_counter,
            racing_publications_create_one_child,
            images_are_stored_once_per_document_and_hash,
            every_listed_type_is_stored_and_read_back,
            images_and_attachments_need_their_document,
            attachments_keep_the_original_of_a_smaller_copy,
            unsent_attachments_are_read_only_by_their_uploader,
            attachments_are_sent_once_by_their_uploader,
            the_sweep_forgets_unsent_attachments_a_day_old,
            deleting_a_message_removes_its_attachments,
            images_and_attachments_go_with_their_document,
            image_and_attachment_writes_are_fenced,
            racing_sends_let_exactly_one_win,
            creating_a_repository_makes_its_creator_admin_once,
            members_get_roles_and_the_last_admin_stays,
            repositories_and_documents_are_listed_in_keyset_pages,
            overrides_are_recorded_newest_first_and_checked,
            a_creation_key_keeps_the_caller_that_used_it_first,
            every_change_of_access_raises_the_access_generation,
            repository_writes_under_a_lost_lease_are_fenced,
            a_gated_store_writes_nothing_before_it_holds_the_writer_lease,
            a_gated_store_writes_under_the_lease_and_is_refused_once_it_is_lost,
            a_commit_is_found_by_its_text_and_title_as_soon_as_it_answers,
            a_commit_carries_text_only_with_its_update,
            search_ranks_title_matches_first_then_by_how_much_matches,
            snippets_mark_the_words_that_matched,
            search_pages_by_keyset_without_duplicates_or_gaps,
            archived_documents_are_searched_only_on_request,
            a_deleted_document_leaves_the_index,
            a_reader_finds_only_what_they_may_read_and_an_outsider_nothing,
            odd_searches_are_refused_as_invalid_or_searched_never_failing,
            texts_left_behind_by_an_upgrade_are_listed_until_refreshed
        );
    };
    (@cases $harness:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let harness = $harness;
                $crate::contract::$case(&harness).await;
            }
        )*
    };
}
