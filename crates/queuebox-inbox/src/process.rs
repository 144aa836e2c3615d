//! One message: the handler transaction, the outcome table of PULL-40, renewal (§7.5) and the
//! failure write (§7.6). Every write after the claim carries the fence.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::claim::Claimed;
use crate::db::{DbError, HandlerTx, Purpose, SqlValue};
use crate::message::InboxMessage;
use crate::options::{Dialect, clamp_ms};
use crate::redacted;
use crate::retry::FailureAction;
use crate::task::OwnedTask;
use crate::worker::{Handler, Inner};

/// The text PULL-47 writes for a payload that is not JSON.
pub(crate) const INVALID_JSON: &str = "The payload is not valid JSON.";

/// Shared between a row's processing and its renewal.
pub(crate) struct RowState {
    /// Set by renewal when Renew affected 0 rows: another worker owns the row.
    pub lost: AtomicBool,
    /// The handler's signal: fired on lease loss, or (as a child) when the grace expires.
    pub cancel: CancellationToken,
    /// Ends the renewal loop once the row has an outcome.
    pub renew_stop: CancellationToken,
}

/// Logs with the fields of PULL-53; never the token or the payload.
macro_rules! log_msg {
    ($level:ident, $m:expr, $text:literal $(, $($field:tt)+)?) => {
        tracing::$level!(
            source = %$m.source,
            messageId = %$m.id,
            attempt = $m.attempt,
            correlationId = $m.correlation_id.as_deref().unwrap_or_default(),
            $($($field)+,)?
            $text
        )
    };
}
pub(crate) use log_msg;

/// Renews the lease every `max(1 ms, lease/3)` on its own autocommit connection (PULL-43/44).
pub(crate) async fn renew_loop(
    inner: Arc<Inner>,
    id: Uuid,
    token: Uuid,
    message: InboxMessage,
    state: Arc<RowState>,
) {
    if inner.options.dialect == Dialect::Sqlite {
        // No renewal on SQLite: while the handler transaction holds the write lock no other
        // connection can take the row or renew it (PULL-28, PULL-39).
        return;
    }
    let lease_ms = inner.options.lease_ms();
    let every = Duration::from_millis((lease_ms / 3).max(1) as u64);
    loop {
        tokio::select! {
            _ = state.renew_stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        // Not raced against renew_stop: the processing side waits for a statement in flight.
        let renewed = async {
            let mut conn = inner.source.connect(Purpose::Renew).await?;
            let params = [
                SqlValue::Int(lease_ms),
                SqlValue::Uuid(id),
                SqlValue::Uuid(token),
            ];
            let renew = &inner.statements.renew;
            conn.execute(renew, &renew.bind(&params)).await
        };
        // A renewal that hangs longer than a lease is useless (the lease has ended) and would
        // hold up the row's outcome, which waits for it: count it as a failed tick.
        let renewed = tokio::time::timeout(inner.options.lease, renewed)
            .await
            .unwrap_or_else(|_| Err("The renewal did not finish within the lease.".into()));
        match renewed {
            Ok(1) => {}
            Ok(_) => {
                state.lost.store(true, Ordering::SeqCst);
                log_msg!(warn, message, "The lease was lost to another worker.");
                state.cancel.cancel();
                return;
            }
            // An error is not a loss: the next tick tries again, and the fence decides later.
            Err(e) => log_msg!(warn, message, "The renewal failed.", error = %redacted(&*e)),
        }
    }
}

/// Processes one claimed row to its outcome (PULL-40).
pub(crate) async fn process<H: Handler>(
    inner: Arc<Inner>,
    row: Claimed,
    state: Arc<RowState>,
    renewal: OwnedTask<()>,
    handler: Arc<H>,
    _permit: OwnedSemaphorePermit,
) {
    // If the handler panics or this task is aborted (the run future was dropped), `renewal` is
    // dropped with it, which aborts the renewal task: no lease outlives its processing.
    let message = &row.message;
    let stop_renewal = || async {
        state.renew_stop.cancel();
        let _ = renewal.await;
    };
    if row.payload_invalid {
        stop_renewal().await;
        let error: DbError = INVALID_JSON.into();
        return write_failure(&inner, &row, FailureAction::DeadLetter, &*error).await;
    }
    let mut tx = match open_tx(&inner).await {
        Ok(tx) => tx,
        Err(e) => {
            stop_renewal().await;
            return abandoned(message, &*e);
        }
    };
    let result = handler.handle(message, &mut tx, state.cancel.clone()).await;
    stop_renewal().await;
    let lost = state.lost.load(Ordering::SeqCst);
    if inner.grace.is_cancelled() {
        let _ = tx.conn.rollback().await;
        return log_msg!(
            info,
            message,
            "The shutdown abandoned the message, so it spends no attempt."
        );
    }
    match (lost, result) {
        (true, Err(_)) => {
            let _ = tx.conn.rollback().await;
            log_msg!(warn, message, "The lease was lost, so nothing was written.");
        }
        (true, Ok(())) => {
            let _ = tx.conn.rollback().await;
            log_msg!(
                warn,
                message,
                "The lease was lost, so the work was rolled back."
            );
        }
        (false, Err(error)) => {
            // Roll back first: the failure write runs outside the handler's transaction.
            let _ = tx.conn.rollback().await;
            drop(tx);
            let action = inner.options.retry_policy.decide(message, &*error);
            write_failure(&inner, &row, action, &*error).await;
        }
        (false, Ok(())) => complete(&inner, &row, tx).await,
    }
}

pub(crate) async fn open_tx(inner: &Inner) -> Result<HandlerTx, DbError> {
    let mut conn = inner.source.connect(Purpose::Handler).await?;
    conn.begin().await?;
    Ok(HandlerTx { conn })
}

/// Complete inside the handler transaction, so the mark and the work commit together (PULL-41).
async fn complete(inner: &Inner, row: &Claimed, mut tx: HandlerTx) {
    let message = &row.message;
    let params = [SqlValue::Uuid(message.id), SqlValue::Uuid(row.token)];
    let complete = &inner.statements.complete;
    match tx.conn.execute(complete, &complete.bind(&params)).await {
        Ok(1) => match tx.conn.commit().await {
            Ok(()) => log_msg!(debug, message, "The message was processed."),
            Err(e) => abandoned(message, &*e),
        },
        Ok(_) => {
            let _ = tx.conn.rollback().await;
            log_msg!(
                warn,
                message,
                "The completion affected no row, so the work was rolled back."
            );
        }
        Err(e) => {
            let _ = tx.conn.rollback().await;
            abandoned(message, &*e);
        }
    }
}

/// Retry or Dead on a new autocommit connection, with the redacted error text (PULL-46).
pub(crate) async fn write_failure(
    inner: &Inner,
    row: &Claimed,
    action: FailureAction,
    error: &(dyn Error + Send + Sync + 'static),
) {
    let message = &row.message;
    let text = redacted(error);
    let (id, token) = (SqlValue::Uuid(message.id), SqlValue::Uuid(row.token));
    let written = async {
        let mut conn = inner.source.connect(Purpose::Failure).await?;
        match action {
            FailureAction::RetryAfter(delay) => {
                let params = [
                    SqlValue::Int(clamp_ms(delay)),
                    SqlValue::Text(text.clone()),
                    id,
                    token,
                ];
                let retry = &inner.statements.retry;
                conn.execute(retry, &retry.bind(&params)).await
            }
            FailureAction::DeadLetter => {
                let params = [SqlValue::Text(text.clone()), id, token];
                let dead = &inner.statements.dead;
                conn.execute(dead, &dead.bind(&params)).await
            }
        }
    }
    .await;
    match (written, action) {
        (Ok(1), FailureAction::RetryAfter(delay)) => log_msg!(
            warn, message, "The message retries.",
            delayMs = clamp_ms(delay), error = %text
        ),
        (Ok(1), FailureAction::DeadLetter) => {
            log_msg!(error, message, "The message reached the dead letter.", error = %text)
        }
        (Ok(_), _) => log_msg!(
            warn, message, "The failure changed nothing, because the claim was lost.",
            error = %text
        ),
        (Err(e), _) => abandoned(message, &*e),
    }
}

/// A library failure: write nothing more; the row returns after its lease (PULL-52).
pub(crate) fn abandoned(message: &InboxMessage, error: &(dyn Error + Send + Sync + 'static)) {
    log_msg!(error, message, "The message was abandoned.", error = %redacted(error));
}
