//! The opt-in batch handler: every row of one claim goes to one handler call in one transaction,
//! and all of them complete together in one fenced statement (`complete-batch.sql`), or none
//! does. Each row keeps the single-row rules: its own renewal, its own fence inside the one
//! statement, and on failure its own retry or dead letter by the retry policy (§7.6).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;

use crate::claim::Claimed;
use crate::db::{DbError, SqlValue};
use crate::message::InboxMessage;
use crate::options::Dialect;
use crate::process::{
    INVALID_JSON, RowState, abandoned, log_msg, open_tx, renew_loop, write_failure,
};
use crate::task::OwnedTask;
use crate::worker::{BatchHandler, Inner};

/// Runs one claimed batch through the batch handler, to an outcome for every row.
pub(crate) async fn run<H: BatchHandler + ?Sized>(
    inner: &Arc<Inner>,
    rows: Vec<Claimed>,
    handler: &H,
) {
    // A payload that is not JSON is the message's failure, never the handler's (PULL-47): it
    // is dead-lettered on its own and the rest of the batch goes on.
    let (invalid, rows): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.payload_invalid);
    for row in &invalid {
        let error: DbError = INVALID_JSON.into();
        write_failure(inner, row, crate::retry::FailureAction::DeadLetter, &*error).await;
    }
    if rows.is_empty() {
        return;
    }
    // A stop that arrived while the claim ran: the handler has not started, write nothing
    // (PULL-48 step 2); the rows return after their lease.
    if inner.stop.is_cancelled() {
        for row in &rows {
            log_msg!(
                info,
                row.message,
                "The shutdown abandoned the message, so it spends no attempt."
            );
        }
        return;
    }
    // One signal for the handler: any row's lost lease, or the grace, cancels the whole batch,
    // whose work can no longer commit (PULL-44).
    let cancel = inner.grace.child_token();
    let states: Vec<Arc<RowState>> = rows
        .iter()
        .map(|_| {
            Arc::new(RowState {
                lost: AtomicBool::new(false),
                cancel: cancel.clone(),
                renew_stop: CancellationToken::new(),
            })
        })
        .collect();
    let renewals: Vec<OwnedTask<()>> = rows
        .iter()
        .zip(&states)
        .map(|(row, state)| {
            OwnedTask::spawn(renew_loop(
                inner.clone(),
                row.message.id,
                row.token,
                row.message.clone(),
                state.clone(),
            ))
        })
        .collect();
    let stop_renewals = || async {
        for state in &states {
            state.renew_stop.cancel();
        }
        for renewal in renewals {
            let _ = renewal.await;
        }
    };
    let messages: Vec<InboxMessage> = rows.iter().map(|r| r.message.clone()).collect();
    let mut tx = match open_tx(inner).await {
        Ok(tx) => tx,
        Err(e) => {
            stop_renewals().await;
            return messages.iter().for_each(|m| abandoned(m, &*e));
        }
    };
    let result = handler.handle(&messages, &mut tx, cancel.clone()).await;
    stop_renewals().await;
    if inner.grace.is_cancelled() {
        let _ = tx.conn.rollback().await;
        for m in &messages {
            log_msg!(
                info,
                m,
                "The shutdown abandoned the message, so it spends no attempt."
            );
        }
        return;
    }
    let lost: Vec<bool> = states
        .iter()
        .map(|s| s.lost.load(Ordering::SeqCst))
        .collect();
    match result {
        Err(error) => {
            // Roll back first: the failure writes run outside the handler's transaction. A
            // lost row gets nothing; every row still owned fails as a single row would.
            let _ = tx.conn.rollback().await;
            drop(tx);
            for (row, lost) in rows.iter().zip(&lost) {
                if *lost {
                    log_msg!(
                        warn,
                        row.message,
                        "The lease was lost, so nothing was written."
                    );
                } else {
                    let action = inner.options.retry_policy.decide(&row.message, &*error);
                    write_failure(inner, row, action, &*error).await;
                }
            }
        }
        Ok(()) if lost.iter().any(|l| *l) => {
            // The work covers a row this worker no longer owns, and one transaction cannot
            // keep part of it: roll it all back and write nothing. Rows still owned come back
            // after their lease with `attempt` unchanged, as after an abandon.
            let _ = tx.conn.rollback().await;
            for (m, lost) in messages.iter().zip(&lost) {
                if *lost {
                    log_msg!(warn, m, "The lease was lost, so the work was rolled back.");
                } else {
                    log_msg!(
                        warn,
                        m,
                        "Another message of the batch lost its lease, so the work was rolled back."
                    );
                }
            }
        }
        Ok(()) => complete(inner, &rows, &messages, tx).await,
    }
}

/// Completes every row in one statement inside the handler transaction; commits only when the
/// fence held for every row, so no row this worker no longer owns is completed (PULL-9).
async fn complete(
    inner: &Inner,
    rows: &[Claimed],
    messages: &[InboxMessage],
    mut tx: crate::db::HandlerTx,
) {
    // Every row of a batch comes from one claim call, so they share its token (PULL-13).
    let token = rows[0].token;
    let statement = &inner.statements.complete_batch;
    let (text, params) = match inner.options.dialect {
        Dialect::Mysql => {
            let ids: Vec<SqlValue> = rows
                .iter()
                .map(|r| SqlValue::Text(r.message.id.to_string()))
                .collect();
            statement.bind_ids(&[SqlValue::Null, SqlValue::Uuid(token)], &ids)
        }
        Dialect::Sqlite => {
            let ids: Vec<String> = rows.iter().map(|r| r.message.id.to_string()).collect();
            let ids = serde_json::to_string(&ids).expect("a list of strings serializes");
            let values = [SqlValue::Text(ids), SqlValue::Uuid(token)];
            (statement.text().to_owned(), statement.bind(&values))
        }
        _ => {
            let ids: Vec<String> = rows.iter().map(|r| r.message.id.to_string()).collect();
            let values = [SqlValue::Text(ids.join(",")), SqlValue::Uuid(token)];
            (statement.text().to_owned(), statement.bind(&values))
        }
    };
    match tx.conn.execute(&text, &params).await {
        Ok(n) if n == rows.len() as u64 => match tx.conn.commit().await {
            Ok(()) => {
                for m in messages {
                    log_msg!(debug, m, "The message was processed.");
                }
            }
            Err(e) => messages.iter().for_each(|m| abandoned(m, &*e)),
        },
        Ok(_) => {
            let _ = tx.conn.rollback().await;
            for m in messages {
                log_msg!(
                    warn,
                    m,
                    "The batch completion affected fewer rows than the batch, so the work was rolled back."
                );
            }
        }
        Err(e) => {
            let _ = tx.conn.rollback().await;
            messages.iter().for_each(|m| abandoned(m, &*e));
        }
    }
}
