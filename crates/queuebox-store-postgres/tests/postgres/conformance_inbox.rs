//! The inbox, relay and retention part of the store-independent suite, run against PostgreSQL
//! with the set-up and inspection steps of `conformance.rs`.

use queuebox_store::conformance as suite;

use crate::conformance::PgFactory;

#[tokio::test]
async fn conformance_inb_49_insert_stores_every_column() {
    suite::inb_49_insert_stores_every_column(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_2_consumption_is_written() {
    suite::inb_2_consumption_is_written(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_50_duplicate_changes_nothing_whatever_the_state() {
    suite::inb_50_duplicate_changes_nothing_whatever_the_state(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_50_same_key_under_two_sources_is_two_rows() {
    suite::inb_50_same_key_under_two_sources_is_two_rows(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_50_duplicate_pair_within_one_batch() {
    suite::inb_50_duplicate_pair_within_one_batch(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_41_scheduled_at_after_receipt() {
    suite::inb_41_scheduled_at_after_receipt(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_42_scheduled_at_after_publish_takes_the_earlier_time() {
    suite::inb_42_scheduled_at_after_publish_takes_the_earlier_time(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_2_claim_takes_due_push_rows_of_listed_sources() {
    suite::rly_2_claim_takes_due_push_rows_of_listed_sources(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_3_one_row_per_aggregate_and_busy_aggregates_skipped() {
    suite::rly_3_one_row_per_aggregate_and_busy_aggregates_skipped(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_3_null_aggregates_are_each_their_own_group() {
    suite::rly_3_null_aggregates_are_each_their_own_group(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_4_limit_and_order() {
    suite::rly_4_limit_and_order(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_5_claim_writes_token_times_and_lease() {
    suite::rly_5_claim_writes_token_times_and_lease(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_3_relay_never_touches_pull_rows() {
    suite::inb_3_relay_never_touches_pull_rows(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_10_forward_inserts_the_outbox_row_and_marks_processed() {
    suite::rly_10_forward_inserts_the_outbox_row_and_marks_processed(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_13_forward_with_a_lost_claim_rolls_back() {
    suite::rly_13_forward_with_a_lost_claim_rolls_back(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_9_dead_writes_the_error_under_the_fence() {
    suite::rly_9_dead_writes_the_error_under_the_fence(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_12_release_with_and_without_error() {
    suite::rly_12_release_with_and_without_error(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_7_renew_extends_the_lease_and_stale_renews_nothing() {
    suite::rly_7_renew_extends_the_lease_and_stale_renews_nothing(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_8_reclaim_returns_only_expired_rows() {
    suite::rly_8_reclaim_returns_only_expired_rows(&PgFactory).await;
}

#[tokio::test]
async fn conformance_rly_16_oldest_pending_age() {
    suite::rly_16_oldest_pending_age(&PgFactory).await;
}

#[tokio::test]
async fn conformance_ret_4_outbox_age_deletes_only_old_sent_and_dead() {
    suite::ret_4_outbox_age_deletes_only_old_sent_and_dead(&PgFactory).await;
}

#[tokio::test]
async fn conformance_ret_5_outbox_count_keeps_the_newest_per_state() {
    suite::ret_5_outbox_count_keeps_the_newest_per_state(&PgFactory).await;
}

#[tokio::test]
async fn conformance_ret_4_inbox_age_deletes_only_old_processed_and_dead() {
    suite::ret_4_inbox_age_deletes_only_old_processed_and_dead(&PgFactory).await;
}

#[tokio::test]
async fn conformance_inb_52_repeat_after_retention_is_stored_as_new() {
    suite::inb_52_repeat_after_retention_is_stored_as_new(&PgFactory).await;
}

#[tokio::test]
async fn conformance_sch_38_inbox_statements_use_mapped_names() {
    suite::sch_38_inbox_statements_use_mapped_names(&PgFactory).await;
}

// Several threads, so the connection tasks of the relays' pooled connections run beside the
// task that drives the relays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_rly_3_concurrent_relay_claims_never_share_a_row_or_an_aggregate() {
    suite::rly_3_concurrent_relay_claims_never_share_a_row_or_an_aggregate(&PgFactory).await;
}
