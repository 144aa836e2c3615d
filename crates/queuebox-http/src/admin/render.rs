//! The JSON forms of rows (ADM-16, ADM-21, ADM-22) and of the stats; `claim_token` is never
//! read, so it cannot be written (ADM-12). The CLI prints the same forms with `--output json`.

use std::collections::BTreeMap;
use std::time::SystemTime;

use queuebox_core::Consumption;
use queuebox_store::{
    InboxMessage, InboxState, InboxSummary, OutboxMessage, OutboxState, OutboxSummary, Page,
    StateCounts,
};
use serde_json::{Map, Value, json};

use super::cursor;
use super::filters::AdminRouting;
use super::time::format_millis;

fn time(at: SystemTime) -> Value {
    Value::String(format_millis(at))
}

fn opt_time(at: Option<SystemTime>) -> Value {
    at.map_or(Value::Null, time)
}

/// A stored JSON column; text that does not parse (never written by QueueBox) stays a string.
fn stored_json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

pub fn consumption_name(c: Consumption) -> &'static str {
    match c {
        Consumption::Push => "push",
        Consumption::Pull => "pull",
    }
}

pub fn outbox_item(s: &OutboxSummary, routing: &AdminRouting) -> Map<String, Value> {
    let value = json!({
        "id": s.id.to_string(),
        "topic": s.topic,
        "key": s.key,
        "aggregateType": s.aggregate_type,
        "destination": routing.destination_of(&s.topic),
        "state": s.state.as_str(),
        "attempt": s.attempt,
        "maxAttempts": s.max_attempts,
        "scheduledAt": time(s.scheduled_at),
        "createdAt": time(s.created_at),
        "updatedAt": time(s.updated_at),
        "lastError": s.last_error,
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub fn outbox_show(m: &OutboxMessage, routing: &AdminRouting) -> Value {
    let mut map = outbox_item(&m.summary, routing);
    map.insert("sequence".into(), json!(m.sequence));
    map.insert("claimedAt".into(), opt_time(m.claimed_at));
    map.insert("leaseExpiresAt".into(), opt_time(m.lease_expires_at));
    map.insert("headers".into(), stored_json(&m.headers));
    map.insert("payload".into(), stored_json(&m.payload));
    Value::Object(map)
}

pub fn inbox_item(s: &InboxSummary) -> Map<String, Value> {
    let value = json!({
        "id": s.id.to_string(),
        "source": s.source,
        "idempotencyKey": s.idempotency_key,
        "aggregateId": s.aggregate_id,
        "eventType": s.event_type,
        "consumption": consumption_name(s.consumption),
        "state": s.state.as_str(),
        "attempt": s.attempt,
        "correlationId": s.correlation_id,
        "scheduledAt": time(s.scheduled_at),
        "createdAt": time(s.created_at),
        "processedAt": opt_time(s.processed_at),
        "lastError": s.last_error,
    });
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub fn inbox_show(m: &InboxMessage) -> Value {
    let mut map = inbox_item(&m.summary);
    map.insert("claimedAt".into(), opt_time(m.claimed_at));
    map.insert("leaseExpiresAt".into(), opt_time(m.lease_expires_at));
    map.insert("headers".into(), stored_json(&m.headers));
    map.insert("payload".into(), stored_json(&m.payload));
    Value::Object(map)
}

/// `{"items":[...],"nextCursor":...}` (ADM-11).
pub fn page<T>(page: &Page<T>, item: impl Fn(&T) -> Map<String, Value>) -> Value {
    json!({
        "items": page.items.iter().map(|i| Value::Object(item(i))).collect::<Vec<_>>(),
        "nextCursor": page.next.as_ref().map(cursor::encode),
    })
}

fn zero_states<S: Copy>(all: &[S], name: impl Fn(S) -> &'static str) -> Map<String, Value> {
    all.iter()
        .map(|s| (name(*s).to_owned(), json!(0u64)))
        .collect()
}

fn add(map: &mut Map<String, Value>, state: &str, n: u64) {
    let old = map.get(state).and_then(Value::as_u64).unwrap_or(0);
    map.insert(state.to_owned(), json!(old + n));
}

/// The `outbox` half of `GET /admin/stats`.
pub fn outbox_stats(counts: &StateCounts<OutboxState>, routing: &AdminRouting) -> Value {
    let mut states = zero_states(OutboxState::ALL, OutboxState::as_str);
    for (state, n) in &counts.states {
        add(&mut states, state.as_str(), *n);
    }
    // Per topic, only the states the store counts per group: sent is a total only.
    const PER_TOPIC: &[OutboxState] = &[
        OutboxState::Pending,
        OutboxState::Processing,
        OutboxState::Dead,
    ];
    let mut topics: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    let mut dead: BTreeMap<Option<&str>, u64> = routing
        .destinations()
        .iter()
        .map(|d| (Some(d.as_str()), 0))
        .collect();
    for c in &counts.counts {
        let topic = topics
            .entry(c.group.as_str())
            .or_insert_with(|| zero_states(PER_TOPIC, OutboxState::as_str));
        add(topic, c.state.as_str(), c.count);
        if c.state == OutboxState::Dead {
            *dead.entry(routing.destination_of(&c.group)).or_insert(0) += c.count;
        }
    }
    // The unrouted entry sorts first as `None`; it is listed last and only when it has rows.
    let unrouted = dead.remove(&None).unwrap_or(0);
    let mut by_destination: Vec<Value> = dead
        .into_iter()
        .map(|(d, n)| json!({"destination": d, "dead": n}))
        .collect();
    if unrouted > 0 {
        by_destination.push(json!({"destination": null, "dead": unrouted}));
    }
    json!({
        "states": states,
        "estimated": counts.estimated.map(OutboxState::as_str).into_iter().collect::<Vec<_>>(),
        "oldestPendingAgeSeconds": counts.oldest_pending_age_seconds,
        "topics": topics
            .into_iter()
            .map(|(t, s)| json!({"topic": t, "states": s}))
            .collect::<Vec<_>>(),
        "deadByDestination": by_destination,
    })
}

/// The `inbox` half of `GET /admin/stats`.
pub fn inbox_stats(counts: &StateCounts<InboxState>) -> Value {
    let mut states = zero_states(InboxState::ALL, InboxState::as_str);
    for (state, n) in &counts.states {
        add(&mut states, state.as_str(), *n);
    }
    // Per source, only the states the store counts per group: processed is a total only.
    const PER_SOURCE: &[InboxState] = &[
        InboxState::Pending,
        InboxState::Processing,
        InboxState::Dead,
    ];
    let mut sources: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for c in &counts.counts {
        let source = sources
            .entry(c.group.as_str())
            .or_insert_with(|| zero_states(PER_SOURCE, InboxState::as_str));
        add(source, c.state.as_str(), c.count);
    }
    json!({
        "states": states,
        "estimated": counts.estimated.map(InboxState::as_str).into_iter().collect::<Vec<_>>(),
        "oldestPendingAgeSeconds": counts.oldest_pending_age_seconds,
        "sources": sources
            .into_iter()
            .map(|(s, st)| json!({"source": s, "states": st}))
            .collect::<Vec<_>>(),
    })
}
