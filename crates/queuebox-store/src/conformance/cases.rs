//! The one list of the suite's cases, and the macro that turns it into one `#[tokio::test]` per
//! case in a store's test crate: `queuebox_store::conformance_tests!(MyFactory);`. The list is
//! also expanded here into [`Case`] and [`run`], which are the only callers of the case
//! functions: a case written but not listed is dead code, which `-D warnings` refuses, so no
//! store can run the suite without it.

use super::*;

/// Every case of the suite, then the cases whose stores need a multi-thread runtime (their
/// concurrent tasks wait on each other's database I/O). Expands `$then` with both lists.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case_list {
    ($($then:tt)*) => {
        $crate::conformance_tests! { $($then)* ;
            [
                sch_49_second_migrate_applies_nothing,
                sch_43_version_3_refuses_an_empty_topic,
                sch_61_guard_reports_missing_tables_without_history,
                sch_61_guard_reports_dropped_column,
                sch_55_renamed_names_refused_and_nothing_created,
                sch_56_baseline_without_tables_refused,
                sch_56_baseline_with_history_refused,
                sch_56_baseline_out_of_range_refused,
                out_11_claim_takes_only_due_pending_rows,
                out_11_future_scheduled_at_is_not_claimed,
                out_12_keyless_rows_several_per_claim,
                out_13_one_row_per_key_per_claim,
                out_13_future_head_blocks_its_key,
                out_13_processing_row_blocks_its_key,
                out_13_a_backlog_of_one_key_hides_no_row_behind_it,
                out_13_one_key_backlog_drains_in_order,
                out_13a_a_run_takes_the_next_due_rows_of_its_key_in_order,
                out_13a_a_failure_mid_run_lets_nothing_overtake,
                out_13a_a_lost_lease_mid_run_keeps_order_through_the_reclaim,
                out_35_dead_head_releases_its_key,
                out_15_limit_and_order,
                out_16_claim_writes_token_times_and_lease,
                out_41_renew_extends_the_lease_and_stale_renews_nothing,
                out_31_finish_sent_writes_exactly_its_columns,
                out_28_finish_retry_writes_exactly_its_columns,
                out_41_hold_keeps_attempt_and_last_error,
                out_28_finish_dead_writes_exactly_its_columns,
                out_41_finish_mixed_batch_and_lost_claims,
                out_58_release_keeps_attempt_schedule_and_error,
                out_46_reclaim_returns_only_expired_rows,
                out_62_pending_stats_count_and_age,
                out_31_finish_of_100_rows_in_one_call,
                sch_38_outbox_statements_use_mapped_names,
                inb_49_insert_stores_every_column,
                inb_56_a_dead_row_is_stored_dead_with_its_error_and_never_claimed,
                inb_2_consumption_is_written,
                inb_50_duplicate_changes_nothing_whatever_the_state,
                inb_50_same_key_under_two_sources_is_two_rows,
                inb_50_duplicate_pair_within_one_batch,
                inb_41_scheduled_at_after_receipt,
                inb_42_scheduled_at_after_publish_takes_the_earlier_time,
                rly_2_claim_takes_due_push_rows_of_listed_sources,
                rly_3_one_row_per_aggregate_and_busy_aggregates_skipped,
                rly_3_null_aggregates_are_each_their_own_group,
                rly_4_limit_and_order,
                rly_5_claim_writes_token_times_and_lease,
                inb_3_relay_never_touches_pull_rows,
                rly_10_forward_inserts_the_outbox_row_and_marks_processed,
                rly_13_forward_with_a_lost_claim_rolls_back,
                rly_9_dead_writes_the_error_under_the_fence,
                rly_12_release_with_and_without_error,
                rly_7_renew_extends_the_lease_and_stale_renews_nothing,
                rly_8_reclaim_returns_only_expired_rows,
                rly_3_a_held_head_row_holds_back_its_aggregate,
                rly_8_reclaim_never_waits_for_a_row_another_session_holds,
                rly_16_oldest_pending_age,
                gauges_outbox_backoff_age_and_dead_rows,
                gauges_inbox_backlog_per_source_and_dead_rows,
                ret_4_outbox_age_deletes_only_old_sent_and_dead,
                ret_5_outbox_count_keeps_the_newest_per_state,
                ret_4_inbox_age_deletes_only_old_processed_and_dead,
                inb_52_repeat_after_retention_is_stored_as_new,
                sch_38_inbox_statements_use_mapped_names,
                adm_17_outbox_list_by_state_filters_and_pages,
                adm_18_outbox_show_has_every_column_but_the_claim_token,
                out_50_replay_moves_only_sent_and_dead_rows_and_resets_their_columns,
                adm_9_replay_in_chunks_honours_the_limit_oldest_first,
                adm_19_outbox_delete_one_is_guarded_by_state,
                adm_20_outbox_bulk_delete_takes_only_its_state_and_filter,
                outbox_counts_per_topic_and_state,
                adm_21_inbox_list_by_state_filters_and_pages,
                adm_22_inbox_show_has_every_column_but_the_claim_token,
                rly_17_requeue_moves_only_dead_rows_and_resets_their_columns,
                adm_9_requeue_in_chunks_honours_the_limit,
                adm_23_inbox_delete_one_is_guarded_by_state,
                adm_24_inbox_bulk_delete_takes_only_its_state_and_filter,
                out_5_sequence_increases_in_insert_order_and_is_kept_for_life,
                out_9_the_store_makes_only_the_listed_transitions,
                out_10_every_state_change_sets_updated_at_and_the_claim_columns,
                out_47_a_reclaimed_row_keeps_its_sequence_and_is_claimed_as_head,
                out_38_a_lower_sequence_committed_late_goes_after_the_row_already_claimed,
                inb_1_the_store_makes_only_the_transitions_of_the_diagram,
                inb_46_the_relay_claims_by_scheduled_at_then_created_at,
                ret_3_retention_never_deletes_pending_or_processing_and_no_other_table,
                a_lock_wait_past_the_limit_is_transient,
                an_unreachable_database_is_an_outage,
            ]
            [
                out_14_concurrent_claimers_never_share_a_row_or_a_key,
                out_13a_two_replicas_with_runs_never_share_a_key,
                rly_3_concurrent_relay_claims_never_share_a_row_or_an_aggregate,
                ret_8_two_concurrent_retention_runs_are_safe,
            ]
        }
    };
}

/// One `#[tokio::test]` per case of the suite, each named after its case (and so after its
/// requirement id), calling it with `$factory`, a value of a type that implements
/// [`ConformanceFactory`]. The calling crate depends on `tokio` with the `macros` and
/// `rt-multi-thread` features.
#[macro_export]
macro_rules! conformance_tests {
    (@define ; [$($case:ident),* $(,)?] [$($threaded:ident),* $(,)?]) => {
        /// Every case of the suite, by name.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Case {
            $($case,)*
            $($threaded,)*
        }

        /// Runs one case against a fresh namespace of `factory`; panics when it fails.
        pub async fn run(case: Case, factory: &dyn ConformanceFactory) {
            match case {
                $(Case::$case => $case(factory).await,)*
                $(Case::$threaded => $threaded(factory).await,)*
            }
        }
    };
    (@tests $factory:expr ; [$($case:ident),* $(,)?] [$($threaded:ident),* $(,)?]) => {
        $(
            #[tokio::test]
            async fn $case() {
                $crate::conformance::run($crate::conformance::Case::$case, &$factory).await;
            }
        )*
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $threaded() {
                $crate::conformance::run($crate::conformance::Case::$threaded, &$factory).await;
            }
        )*
    };
    (@tests_with_skips $factory:expr ; [$($case:ident),* $(,)?] [$($threaded:ident),* $(,)?]) => {
        $( __queuebox_conformance_case! { $case, $factory, current } )*
        $( __queuebox_conformance_case! { $threaded, $factory, threaded } )*
    };
    ($factory:expr) => {
        $crate::__conformance_case_list! { @tests $factory }
    };
    // A store on which a case cannot apply (a property its database cannot have, such as two
    // writers at once on SQLite) lists it with the reason: that test is generated with
    // `#[ignore = reason]`, so it is reported as ignored, never as passed, and every other case
    // still runs. A name that is no case matches nothing, so that case runs as usual. The `$`
    // after `not_applicable` is passed on to the macro that generates the tests (a macro
    // cannot write a `$` of its own on stable Rust):
    // `conformance_tests!(MyFactory, not_applicable $ { case_name => "why", });`
    ($factory:expr, not_applicable $d:tt { $($skip:ident => $reason:literal),* $(,)? }) => {
        $crate::__conformance_case_macro! { $d ; $($skip => $reason),* }
        $crate::__conformance_case_list! { @tests_with_skips $factory }
    };
}

/// Defines `__queuebox_conformance_case!`, which generates one case's test, ignored with its
/// reason when the case is listed. `$d` is a `$` passed in, so the generated macro can have
/// metavariables of its own.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case_macro {
    ($d:tt ; $($skip:ident => $reason:literal),*) => {
        macro_rules! __queuebox_conformance_case {
            $(
                ($skip, $d factory:expr, current) => {
                    #[ignore = $reason]
                    #[tokio::test]
                    async fn $skip() {
                        $crate::conformance::run($crate::conformance::Case::$skip, &$d factory).await;
                    }
                };
                ($skip, $d factory:expr, threaded) => {
                    #[ignore = $reason]
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $skip() {
                        $crate::conformance::run($crate::conformance::Case::$skip, &$d factory).await;
                    }
                };
            )*
            ($d case:ident, $d factory:expr, current) => {
                #[tokio::test]
                async fn $d case() {
                    $crate::conformance::run($crate::conformance::Case::$d case, &$d factory).await;
                }
            };
            ($d case:ident, $d factory:expr, threaded) => {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $d case() {
                    $crate::conformance::run($crate::conformance::Case::$d case, &$d factory).await;
                }
            };
        }
    };
}

crate::__conformance_case_list! { @define }
