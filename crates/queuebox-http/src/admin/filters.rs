//! From request fields to the store's filters (ADM-8, ADM-9, ADM-13, ADM-21): which fields each
//! operation takes, their limits, and the `destination` filter resolved through the routes.
//! The CLI builds the same fields from its flags, so both apply one set of rules.

use std::collections::BTreeSet;
use std::time::SystemTime;

use queuebox_config::Config;
use queuebox_core::Consumption;
use queuebox_core::glob::TopicGlob;
use queuebox_store::{InboxFilter, ListCursor, OperatorStore, OutboxFilter, PageRequest};
use uuid::Uuid;

use super::cursor;
use super::error::AdminError;
use super::fields::Fields;

pub const LIST_DEFAULT_LIMIT: u32 = 50;
pub const LIST_MAX_LIMIT: i64 = 500;
pub const MAX_IDS: usize = 1000;
pub const MAX_NAMES: usize = 100;
pub const MAX_ERROR_CONTAINS: usize = 200;

/// The fields of the outbox filters (ADM-13), replay's subset, and the inbox's (ADM-21).
pub const OUTBOX_FILTERS: &[&str] = &[
    "ids",
    "topic",
    "topics",
    "destination",
    "createdAfter",
    "createdBefore",
    "key",
    "errorContains",
];
pub const REPLAY_FILTERS: &[&str] = &[
    "ids",
    "topic",
    "topics",
    "destination",
    "createdAfter",
    "createdBefore",
];
pub const INBOX_FILTERS: &[&str] = &[
    "ids",
    "source",
    "sources",
    "consumption",
    "eventType",
    "aggregateId",
    "idempotencyKey",
    "createdAfter",
    "createdBefore",
    "errorContains",
];

/// The routes as QueueBox matches them (first match in list order wins, OUT-22), by
/// destination name, and every configured destination.
#[derive(Clone, Debug, Default)]
pub struct AdminRouting {
    routes: Vec<(TopicGlob, String)>,
    destinations: BTreeSet<String>,
}

impl AdminRouting {
    pub fn from_config(config: &Config) -> Self {
        Self {
            routes: config
                .routes
                .iter()
                .map(|r| (r.topic_pattern.clone(), r.destination.clone()))
                .collect(),
            destinations: config.destinations.keys().cloned().collect(),
        }
    }

    /// The destination a topic routes to; `None` when no route matches.
    pub fn destination_of(&self, topic: &str) -> Option<&str> {
        self.routes
            .iter()
            .find(|(glob, _)| glob.matches(topic))
            .map(|(_, d)| d.as_str())
    }

    pub fn destinations(&self) -> &BTreeSet<String> {
        &self.destinations
    }
}

/// The outbox filter fields of one request, before `destination` is resolved.
#[derive(Clone, Debug, Default)]
pub struct OutboxQuery {
    pub ids: Option<Vec<Uuid>>,
    pub topic: Option<String>,
    pub topics: Option<Vec<String>>,
    pub destination: Option<String>,
    pub key: Option<String>,
    pub created_after: Option<SystemTime>,
    pub created_before: Option<SystemTime>,
    pub error_contains: Option<String>,
}

impl OutboxQuery {
    /// Reads the filters of `names` (the caller has refused every other field).
    pub fn read(fields: &Fields, names: &[&str]) -> Result<Self, AdminError> {
        let want = |n: &str| names.contains(&n);
        Ok(Self {
            ids: if want("ids") { ids(fields)? } else { None },
            topic: if want("topic") {
                fields.string("topic")?
            } else {
                None
            },
            topics: if want("topics") {
                names_list(fields, "topics")?
            } else {
                None
            },
            destination: if want("destination") {
                fields.string("destination")?
            } else {
                None
            },
            key: if want("key") {
                fields.string("key")?
            } else {
                None
            },
            created_after: fields.instant("createdAfter")?,
            created_before: fields.instant("createdBefore")?,
            error_contains: if want("errorContains") {
                error_contains(fields)?
            } else {
                None
            },
        })
    }

    /// ADM-15: a replay needs one of these.
    pub fn has_replay_filter(&self) -> bool {
        self.ids.is_some()
            || self.topic.is_some()
            || self.topics.is_some()
            || self.destination.is_some()
            || self.created_after.is_some()
            || self.created_before.is_some()
    }

    /// ADM-13: `topic`, `topics` and the topics that route to `destination`, intersected; an
    /// empty result matches nothing.
    pub async fn resolve(
        &self,
        routing: &AdminRouting,
        store: &dyn OperatorStore,
    ) -> Result<OutboxFilter, AdminError> {
        let mut topics: Option<Vec<String>> = None;
        let mut narrow = |set: Vec<String>| {
            topics = Some(match topics.take() {
                None => set,
                Some(old) => old.into_iter().filter(|t| set.contains(t)).collect(),
            });
        };
        if let Some(topic) = &self.topic {
            narrow(vec![topic.clone()]);
        }
        if let Some(list) = &self.topics {
            narrow(list.clone());
        }
        if let Some(destination) = &self.destination {
            if !routing.destinations.contains(destination) {
                return Err(AdminError::bad_request(format!(
                    "Unknown destination: {destination}"
                )));
            }
            let all = store
                .outbox_topics()
                .await
                .map_err(|err| AdminError::store("read the outbox topics", &err))?;
            narrow(
                all.into_iter()
                    .filter(|t| routing.destination_of(t) == Some(destination.as_str()))
                    .collect(),
            );
        }
        Ok(OutboxFilter {
            ids: self.ids.clone(),
            topics,
            key: self.key.clone(),
            created_after: self.created_after,
            created_before: self.created_before,
            error_contains: self.error_contains.clone(),
        })
    }

    /// ADM-10: the filter for the log line, ids as a count.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(ids) = &self.ids {
            parts.push(format!("ids: {} ids", ids.len()));
        }
        describe_common(
            &mut parts,
            &[
                ("topic", self.topic.as_deref()),
                ("destination", self.destination.as_deref()),
                ("key", self.key.as_deref()),
                ("errorContains", self.error_contains.as_deref()),
            ],
        );
        if let Some(topics) = &self.topics {
            parts.push(format!("topics: {}", topics.join(",")));
        }
        describe_times(&mut parts, self.created_after, self.created_before);
        join_parts(parts)
    }
}

/// The inbox filter fields of one request.
#[derive(Clone, Debug, Default)]
pub struct InboxQuery {
    pub ids: Option<Vec<Uuid>>,
    pub source: Option<String>,
    pub sources: Option<Vec<String>>,
    pub consumption: Option<Consumption>,
    pub event_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub created_after: Option<SystemTime>,
    pub created_before: Option<SystemTime>,
    pub error_contains: Option<String>,
}

impl InboxQuery {
    pub fn read(fields: &Fields) -> Result<Self, AdminError> {
        let consumption = match fields.string("consumption")?.as_deref() {
            None => None,
            Some("push") => Some(Consumption::Push),
            Some("pull") => Some(Consumption::Pull),
            Some(other) => {
                return Err(AdminError::invalid(format!(
                    "consumption must be push or pull, got {other}"
                )));
            }
        };
        Ok(Self {
            ids: ids(fields)?,
            source: fields.string("source")?,
            sources: names_list(fields, "sources")?,
            consumption,
            event_type: fields.string("eventType")?,
            aggregate_id: fields.string("aggregateId")?,
            idempotency_key: fields.string("idempotencyKey")?,
            created_after: fields.instant("createdAfter")?,
            created_before: fields.instant("createdBefore")?,
            error_contains: error_contains(fields)?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_none()
            && self.source.is_none()
            && self.sources.is_none()
            && self.consumption.is_none()
            && self.event_type.is_none()
            && self.aggregate_id.is_none()
            && self.idempotency_key.is_none()
            && self.created_after.is_none()
            && self.created_before.is_none()
            && self.error_contains.is_none()
    }

    /// `source` and `sources` intersected.
    pub fn filter(&self) -> InboxFilter {
        let sources = match (&self.source, &self.sources) {
            (None, None) => None,
            (Some(one), None) => Some(vec![one.clone()]),
            (None, Some(list)) => Some(list.clone()),
            (Some(one), Some(list)) => Some(list.iter().filter(|s| *s == one).cloned().collect()),
        };
        InboxFilter {
            ids: self.ids.clone(),
            sources,
            consumption: self.consumption,
            event_type: self.event_type.clone(),
            aggregate_id: self.aggregate_id.clone(),
            idempotency_key: self.idempotency_key.clone(),
            created_after: self.created_after,
            created_before: self.created_before,
            error_contains: self.error_contains.clone(),
        }
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(ids) = &self.ids {
            parts.push(format!("ids: {} ids", ids.len()));
        }
        let consumption = self.consumption.map(|c| match c {
            Consumption::Push => "push",
            Consumption::Pull => "pull",
        });
        describe_common(
            &mut parts,
            &[
                ("source", self.source.as_deref()),
                ("consumption", consumption),
                ("eventType", self.event_type.as_deref()),
                ("aggregateId", self.aggregate_id.as_deref()),
                ("idempotencyKey", self.idempotency_key.as_deref()),
                ("errorContains", self.error_contains.as_deref()),
            ],
        );
        if let Some(sources) = &self.sources {
            parts.push(format!("sources: {}", sources.join(",")));
        }
        describe_times(&mut parts, self.created_after, self.created_before);
        join_parts(parts)
    }
}

fn describe_common(parts: &mut Vec<String>, named: &[(&str, Option<&str>)]) {
    for (name, value) in named {
        if let Some(value) = value {
            parts.push(format!("{name}: {value}"));
        }
    }
}

fn describe_times(parts: &mut Vec<String>, after: Option<SystemTime>, before: Option<SystemTime>) {
    if let Some(at) = after {
        parts.push(format!("createdAfter: {}", super::time::format_millis(at)));
    }
    if let Some(at) = before {
        parts.push(format!("createdBefore: {}", super::time::format_millis(at)));
    }
}

fn join_parts(parts: Vec<String>) -> String {
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join("; ")
    }
}

fn ids(fields: &Fields) -> Result<Option<Vec<Uuid>>, AdminError> {
    let Some(list) = fields.list("ids")? else {
        return Ok(None);
    };
    if list.len() > MAX_IDS {
        return Err(AdminError::bad_request(format!(
            "ids takes at most {MAX_IDS} entries"
        )));
    }
    list.iter()
        .map(|text| {
            Uuid::try_parse(text)
                .map_err(|_| AdminError::invalid(format!("ids: {text} is not a UUID")))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn names_list(fields: &Fields, name: &str) -> Result<Option<Vec<String>>, AdminError> {
    let list = fields.list(name)?;
    if list.as_ref().is_some_and(|l| l.len() > MAX_NAMES) {
        return Err(AdminError::bad_request(format!(
            "{name} takes at most {MAX_NAMES} entries"
        )));
    }
    Ok(list)
}

fn error_contains(fields: &Fields) -> Result<Option<String>, AdminError> {
    let text = fields.string("errorContains")?;
    if text
        .as_ref()
        .is_some_and(|t| t.chars().count() > MAX_ERROR_CONTAINS)
    {
        return Err(AdminError::bad_request(format!(
            "errorContains takes at most {MAX_ERROR_CONTAINS} characters"
        )));
    }
    Ok(text)
}

/// ADM-8, ADM-11: `limit` (1..500, default 50) and `cursor` of a list.
pub fn page(fields: &Fields) -> Result<PageRequest, AdminError> {
    let limit = match fields.integer("limit") {
        Ok(None) => LIST_DEFAULT_LIMIT,
        Ok(Some(n)) if (1..=LIST_MAX_LIMIT).contains(&n) => n as u32,
        Ok(Some(_)) | Err(_) => {
            return Err(AdminError::bad_request("limit must be between 1 and 500"));
        }
    };
    let after: Option<ListCursor> = match fields.string("cursor")? {
        None => None,
        Some(text) => {
            Some(cursor::decode(&text).ok_or_else(|| AdminError::bad_request("Invalid cursor"))?)
        }
    };
    Ok(PageRequest { after, limit })
}

/// ADM-8: `limit` of a bulk operation: at least 1, none means every matching row.
pub fn bulk_limit(fields: &Fields) -> Result<Option<u64>, AdminError> {
    match fields.integer("limit") {
        Ok(None) => Ok(None),
        Ok(Some(n)) if n >= 1 => Ok(Some(n as u64)),
        Ok(Some(_)) => Err(AdminError::bad_request("limit must be at least 1")),
        Err(err) => Err(err),
    }
}
