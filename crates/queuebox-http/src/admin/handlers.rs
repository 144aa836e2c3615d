//! The handlers of ADM-15..25 and `GET /admin/stats`, each after [`admit`] (ADM-5).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::request::Parts;
use axum::http::{Response, StatusCode};
use queuebox_store::{
    DeleteOutcome, FinishedInboxState, FinishedOutboxState, InboxState, OutboxState,
};
use queuebox_telemetry::GaugeHandle;
use serde_json::{Value, json};
use uuid::Uuid;

use super::AdminApi;
use super::error::AdminError;
use super::fields::Fields;
use super::filters::{
    INBOX_FILTERS, InboxQuery, OUTBOX_FILTERS, OutboxQuery, REPLAY_FILTERS, bulk_limit, page,
};
use super::render;
use crate::server::respond::json_response;
use crate::source::body::{BodyError, read_capped};
use crate::source::budget::Budget;

/// A request that passed ADM-5's steps up to authentication.
pub(crate) struct Admitted {
    pub(crate) parts: Parts,
    pub(crate) body: Vec<u8>,
}

impl Admitted {
    fn query(&self) -> Fields {
        Fields::from_query(self.parts.uri.query())
    }

    fn body(&self) -> Result<Fields, AdminError> {
        Fields::from_body(&self.body)
    }
}

/// ADM-5: the declared length, the counted read, then authentication. The draining check and
/// the data port's global limit ran in the port's pipeline before this.
pub(crate) async fn admit(api: &AdminApi, request: Request) -> Result<Admitted, AdminError> {
    let max = api.max_payload_bytes;
    let too_large = || {
        AdminError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body exceeds {max} bytes"),
        )
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|d| d > max) {
        return Err(too_large());
    }
    // The admin API is outside the intake's memory bound: its own cap is the bound here, and
    // its bytes are not the intake's (a detached gauge, never exported).
    let mut held = Budget::new(max, GaugeHandle::default()).hold();
    let body = match read_capped(body, max, declared, &mut held).await {
        Ok(body) => body,
        Err(BodyError::TooLarge | BodyError::Overloaded) => return Err(too_large()),
        Err(BodyError::Broken) => return Err(AdminError::invalid("the body could not be read")),
    };
    if let Err(text) = api.auth.check(&parts, &body) {
        return Err(AdminError::new(StatusCode::UNAUTHORIZED, text));
    }
    Ok(Admitted { parts, body })
}

fn ok(value: Value) -> Response<Body> {
    json_response(StatusCode::OK, value.to_string())
}

fn answer(result: Result<Value, AdminError>) -> Response<Body> {
    match result {
        Ok(value) => ok(value),
        Err(err) => err.into_response(),
    }
}

/// ADM-7: an id in a path.
fn path_id(text: &str) -> Result<Uuid, AdminError> {
    Uuid::try_parse(text).map_err(|_| AdminError::bad_request(format!("Invalid id: {text}")))
}

/// ADM-10: one info line per change, after it finished.
fn log_change(api: &AdminApi, operation: &str, filter: &str, limit: Option<u64>, count: u64) {
    tracing::info!(
        operation,
        filter,
        limit = limit.map_or_else(|| "none".to_owned(), |l| l.to_string()),
        count,
        auth = api.auth.kind(),
        "admin {operation}: {count} rows"
    );
}

fn outbox_state(text: Option<String>) -> Result<OutboxState, AdminError> {
    match text {
        None => Ok(OutboxState::Dead),
        Some(t) => OutboxState::parse(&t).ok_or_else(|| {
            AdminError::invalid(format!(
                "state must be pending, processing, sent or dead, got {t}"
            ))
        }),
    }
}

fn inbox_state(text: Option<String>) -> Result<InboxState, AdminError> {
    match text {
        None => Ok(InboxState::Dead),
        Some(t) => InboxState::parse(&t).ok_or_else(|| {
            AdminError::invalid(format!(
                "state must be pending, processing, processed or dead, got {t}"
            ))
        }),
    }
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

/// ADM-17.
pub(crate) async fn list_outbox(
    State(api): State<Arc<AdminApi>>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            let fields = req.query();
            fields.only(&with(OUTBOX_FILTERS, &["state", "limit", "cursor"]))?;
            let state = outbox_state(fields.string("state")?)?;
            let query = OutboxQuery::read(&fields, OUTBOX_FILTERS)?;
            let page_request = page(&fields)?;
            let filter = query.resolve(&api.routing, &*api.store).await?;
            let found = api
                .store
                .list_outbox(state, &filter, page_request)
                .await
                .map_err(|e| AdminError::store("list outbox rows", &e))?;
            Ok(render::page(&found, |s| {
                render::outbox_item(s, &api.routing)
            }))
        }
        .await,
    )
}

/// ADM-18.
pub(crate) async fn show_outbox(
    State(api): State<Arc<AdminApi>>,
    Path(id): Path<String>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            req.query().only(&[])?;
            let id = path_id(&id)?;
            let found = api
                .store
                .show_outbox(id)
                .await
                .map_err(|e| AdminError::store("read an outbox row", &e))?;
            found
                .map(|m| render::outbox_show(&m, &api.routing))
                .ok_or_else(AdminError::not_found)
        }
        .await,
    )
}

/// ADM-19.
pub(crate) async fn delete_outbox_one(
    State(api): State<Arc<AdminApi>>,
    Path(id): Path<String>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            req.query().only(&[])?;
            let id = path_id(&id)?;
            let outcome = api
                .store
                .delete_outbox_row(id)
                .await
                .map_err(|e| AdminError::store("delete an outbox row", &e))?;
            match outcome {
                DeleteOutcome::Deleted => {
                    log_change(&api, "outbox delete", "ids: 1 ids", None, 1);
                    Ok(json!({"deleted": 1}))
                }
                DeleteOutcome::NotFound => Err(AdminError::not_found()),
                DeleteOutcome::NotDeletable => Err(AdminError::new(
                    StatusCode::CONFLICT,
                    "Only sent or dead rows can be deleted.",
                )),
            }
        }
        .await,
    )
}

/// ADM-20.
pub(crate) async fn delete_outbox(
    State(api): State<Arc<AdminApi>>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            let fields = req.body()?;
            fields.only(&with(OUTBOX_FILTERS, &["state", "limit"]))?;
            let state = match fields.string("state").ok().flatten().as_deref() {
                Some("sent") => FinishedOutboxState::Sent,
                Some("dead") => FinishedOutboxState::Dead,
                _ => {
                    return Err(AdminError::bad_request(
                        "A bulk delete needs state: sent or dead.",
                    ));
                }
            };
            let query = OutboxQuery::read(&fields, OUTBOX_FILTERS)?;
            let limit = bulk_limit(&fields)?;
            let filter = query.resolve(&api.routing, &*api.store).await?;
            let n = api
                .store
                .delete_outbox_rows(state, &filter, limit)
                .await
                .map_err(|e| AdminError::store("delete outbox rows", &e))?;
            let name = match state {
                FinishedOutboxState::Sent => "sent",
                FinishedOutboxState::Dead => "dead",
            };
            let filter_text = format!("state: {name}; {}", query.describe());
            log_change(&api, "outbox bulk delete", &filter_text, limit, n);
            Ok(json!({"deleted": n}))
        }
        .await,
    )
}

/// ADM-15, OUT-48..52.
pub(crate) async fn replay(State(api): State<Arc<AdminApi>>, request: Request) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            let fields = req.body()?;
            fields.only(&with(REPLAY_FILTERS, &["limit"]))?;
            let query = OutboxQuery::read(&fields, REPLAY_FILTERS)?;
            let limit = bulk_limit(&fields)?;
            if !query.has_replay_filter() {
                return Err(AdminError::bad_request(
                    "A replay needs at least one filter.",
                ));
            }
            let filter = query.resolve(&api.routing, &*api.store).await?;
            let n = api
                .store
                .replay_outbox(&filter, limit)
                .await
                .map_err(|e| AdminError::store("replay outbox rows", &e))?;
            if n > 0 {
                api.outbox_wake.notify_one();
            }
            log_change(&api, "replay", &query.describe(), limit, n);
            Ok(json!({"moved": n}))
        }
        .await,
    )
}

/// ADM-21.
pub(crate) async fn list_inbox(
    State(api): State<Arc<AdminApi>>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            let fields = req.query();
            fields.only(&with(INBOX_FILTERS, &["state", "limit", "cursor"]))?;
            let state = inbox_state(fields.string("state")?)?;
            let query = InboxQuery::read(&fields)?;
            let page_request = page(&fields)?;
            let found = api
                .store
                .list_inbox(state, &query.filter(), page_request)
                .await
                .map_err(|e| AdminError::store("list inbox rows", &e))?;
            Ok(render::page(&found, render::inbox_item))
        }
        .await,
    )
}

/// ADM-22.
pub(crate) async fn show_inbox(
    State(api): State<Arc<AdminApi>>,
    Path(id): Path<String>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            req.query().only(&[])?;
            let id = path_id(&id)?;
            let found = api
                .store
                .show_inbox(id)
                .await
                .map_err(|e| AdminError::store("read an inbox row", &e))?;
            found
                .map(|m| render::inbox_show(&m))
                .ok_or_else(AdminError::not_found)
        }
        .await,
    )
}

/// ADM-23.
pub(crate) async fn delete_inbox_one(
    State(api): State<Arc<AdminApi>>,
    Path(id): Path<String>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            req.query().only(&[])?;
            let id = path_id(&id)?;
            let outcome = api
                .store
                .delete_inbox_row(id)
                .await
                .map_err(|e| AdminError::store("delete an inbox row", &e))?;
            match outcome {
                DeleteOutcome::Deleted => {
                    log_change(&api, "inbox delete", "ids: 1 ids", None, 1);
                    Ok(json!({"deleted": 1}))
                }
                DeleteOutcome::NotFound => Err(AdminError::not_found()),
                DeleteOutcome::NotDeletable => Err(AdminError::new(
                    StatusCode::CONFLICT,
                    "Only processed or dead rows can be deleted.",
                )),
            }
        }
        .await,
    )
}

/// ADM-24.
pub(crate) async fn delete_inbox(
    State(api): State<Arc<AdminApi>>,
    request: Request,
) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            let fields = req.body()?;
            fields.only(&with(INBOX_FILTERS, &["state", "limit"]))?;
            let state = match fields.string("state").ok().flatten().as_deref() {
                Some("processed") => FinishedInboxState::Processed,
                Some("dead") => FinishedInboxState::Dead,
                _ => {
                    return Err(AdminError::bad_request(
                        "A bulk delete needs state: processed or dead.",
                    ));
                }
            };
            let query = InboxQuery::read(&fields)?;
            let limit = bulk_limit(&fields)?;
            let n = api
                .store
                .delete_inbox_rows(state, &query.filter(), limit)
                .await
                .map_err(|e| AdminError::store("delete inbox rows", &e))?;
            let name = match state {
                FinishedInboxState::Processed => "processed",
                FinishedInboxState::Dead => "dead",
            };
            let filter_text = format!("state: {name}; {}", query.describe());
            log_change(&api, "inbox bulk delete", &filter_text, limit, n);
            Ok(json!({"deleted": n}))
        }
        .await,
    )
}

/// ADM-25, RLY-17.
pub(crate) async fn requeue(State(api): State<Arc<AdminApi>>, request: Request) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            let fields = req.body()?;
            fields.only(&with(INBOX_FILTERS, &["limit"]))?;
            let query = InboxQuery::read(&fields)?;
            let limit = bulk_limit(&fields)?;
            if query.is_empty() {
                return Err(AdminError::bad_request(
                    "A requeue needs at least one filter.",
                ));
            }
            let n = api
                .store
                .requeue_inbox(&query.filter(), limit)
                .await
                .map_err(|e| AdminError::store("requeue inbox rows", &e))?;
            if n > 0 {
                api.relay_wake.notify_one();
            }
            log_change(&api, "requeue", &query.describe(), limit, n);
            Ok(json!({"requeued": n}))
        }
        .await,
    )
}

/// `GET /admin/stats`: rows per state, per topic and per source, the oldest pending ages, and
/// dead outbox rows per destination.
pub(crate) async fn stats(State(api): State<Arc<AdminApi>>, request: Request) -> Response<Body> {
    answer(
        async {
            let req = admit(&api, request).await?;
            req.query().only(&[])?;
            let outbox = api
                .store
                .outbox_counts()
                .await
                .map_err(|e| AdminError::store("count outbox rows", &e))?;
            let inbox = api
                .store
                .inbox_counts()
                .await
                .map_err(|e| AdminError::store("count inbox rows", &e))?;
            Ok(json!({
                "outbox": render::outbox_stats(&outbox, &api.routing),
                "inbox": render::inbox_stats(&inbox),
            }))
        }
        .await,
    )
}
