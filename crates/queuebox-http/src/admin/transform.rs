//! `POST /admin/transform/test` (ADM-14): one expression against a sample payload, with the
//! engine, variables and limits of a real stage; compiled for this request only, writes nothing.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Response, StatusCode};
use queuebox_transform::{Expression, Limits, Variables, timestamp_text};
use serde_json::{Map, Value, json};

use super::AdminApi;
use super::error::AdminError;
use super::fields::Fields;
use super::handlers::admit;
use crate::server::respond::json_response;

const FIELDS: &[&str] = &[
    "expression",
    "payload",
    "stage",
    "context",
    "timeoutMs",
    "maxDepth",
];

pub(crate) async fn test(State(api): State<Arc<AdminApi>>, request: Request) -> Response<Body> {
    match run(&api, request).await {
        Ok(value) => json_response(StatusCode::OK, value.to_string()),
        Err(err) => err.into_response(),
    }
}

async fn run(api: &AdminApi, request: Request) -> Result<Value, AdminError> {
    let req = admit(api, request).await?;
    let fields = Fields::from_body(&req.body)?;
    fields.only(FIELDS)?;
    let expression = fields
        .string("expression")?
        .ok_or_else(|| AdminError::invalid("expression is required"))?;
    let Some(payload) = fields.value("payload") else {
        return Err(AdminError::invalid("payload is required"));
    };
    let outbox = match fields.string("stage")?.as_deref() {
        None | Some("outbox") => true,
        Some("source") => false,
        Some(other) => {
            return Err(AdminError::invalid(format!(
                "stage must be outbox or source, got {other}"
            )));
        }
    };
    let context = match fields.value("context") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(AdminError::invalid("context must be an object")),
    };
    let max_timeout = i64::try_from(api.max_transform_timeout_ms.max(1)).unwrap_or(i64::MAX);
    let timeout_ms = fields
        .integer("timeoutMs")?
        .unwrap_or(100)
        .clamp(1, max_timeout);
    let max_depth = fields.integer("maxDepth")?.unwrap_or(100).clamp(1, 1000);

    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let (variables, mut bound) = if outbox {
        outbox_context(&context)?
    } else {
        source_context(&context)?
    };
    bound.insert("timestamp".into(), Value::String(timestamp_text(now_ms)));

    let limits = Limits {
        timeout: Duration::from_millis(timeout_ms as u64),
        max_depth: max_depth as usize,
    };
    let compiled = Expression::compile(&expression, limits)
        .map_err(|err| AdminError::bad_request(format!("Invalid expression: {err}")))?;
    let result = api
        .pool
        .evaluate(&compiled, payload, variables.at_time(now_ms))
        .await
        .map_err(|failure| {
            AdminError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("Transform failed: {}", failure.reason()),
            )
        })?;
    Ok(json!({"result": result, "context": Value::Object(bound)}))
}

fn only(context: &Map<String, Value>, known: &[&str]) -> Result<(), AdminError> {
    match context.keys().find(|k| !known.contains(&k.as_str())) {
        Some(name) => Err(AdminError::bad_request(format!("Unknown field: {name}"))),
        None => Ok(()),
    }
}

fn text(context: &Map<String, Value>, name: &str, default: &str) -> Result<String, AdminError> {
    match context.get(name) {
        None => Ok(default.to_owned()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(AdminError::invalid(format!(
            "context.{name} must be a string"
        ))),
    }
}

/// `messageId` (a new UUID), `topic` (`test.topic`), `attempt` (0).
fn outbox_context(
    context: &Map<String, Value>,
) -> Result<(Variables, Map<String, Value>), AdminError> {
    only(context, &["messageId", "topic", "attempt"])?;
    let message_id = text(context, "messageId", &uuid::Uuid::new_v4().to_string())?;
    let topic = text(context, "topic", "test.topic")?;
    let attempt = match context.get("attempt") {
        None => 0,
        Some(v) => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| AdminError::invalid("context.attempt must be a whole number >= 0"))?,
    };
    let mut bound = Map::new();
    bound.insert("messageId".into(), json!(message_id));
    bound.insert("topic".into(), json!(topic));
    bound.insert("attempt".into(), json!(attempt));
    Ok((Variables::outbox_stage(&message_id, &topic, attempt), bound))
}

/// `source` (`test`), `headers` (`{}`), `idempotencyKey` (`test-key`), `eventType` (`null`).
fn source_context(
    context: &Map<String, Value>,
) -> Result<(Variables, Map<String, Value>), AdminError> {
    only(
        context,
        &["source", "headers", "idempotencyKey", "eventType"],
    )?;
    let source = text(context, "source", "test")?;
    let headers = match context.get("headers") {
        None => Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return Err(AdminError::invalid("context.headers must be an object")),
    };
    let key = text(context, "idempotencyKey", "test-key")?;
    let event_type = match context.get("eventType") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(AdminError::invalid("context.eventType must be a string")),
    };
    let mut bound = Map::new();
    bound.insert("source".into(), json!(source));
    bound.insert("headers".into(), Value::Object(headers.clone()));
    bound.insert("idempotencyKey".into(), json!(key));
    bound.insert("eventType".into(), json!(event_type));
    let variables = Variables::source_stage(&source, headers, &key, event_type.as_deref());
    Ok((variables, bound))
}
