//! Cross-key rules that span sections (config.md §15): routes against destinations (CFG-103,
//! CFG-104), timeouts against the lease (CFG-94), source routes (CFG-107) and relay topics
//! against routes (CFG-111). Each rule is skipped while one of its inputs is in error (CFG-26).

use std::collections::BTreeMap;

use queuebox_core::template::TemplateField;

use crate::model::{InboxConfig, OutboxConfig, ServerConfig};
use crate::model_destination::{Destination, DestinationKind};
use crate::model_source::{Consumption, Source, SourceKind};
use crate::parse_route::RouteDraft;
use crate::read::Cx;
use crate::suggest::did_you_mean;

/// CFG-103 and CFG-104. `declared` holds every destination name, including destinations that
/// are themselves in error, so a broken destination does not also break its routes.
pub(crate) fn check_routes(
    cx: &mut Cx<'_>,
    routes: &[RouteDraft],
    declared: &[String],
    destinations: &BTreeMap<String, Destination>,
) {
    for route in routes {
        let Some(name) = &route.destination else {
            continue;
        };
        if !declared.contains(name) {
            cx.error(
                &format!("{}.destination", route.path),
                format!(
                    "no destination named {}{}",
                    crate::diag::quote(name),
                    did_you_mean(name, declared.iter().map(String::as_str))
                ),
            );
            continue;
        }
        let Some(destination) = destinations.get(name) else {
            continue;
        };
        if route.has_routing_key_template
            && !matches!(
                destination.kind,
                DestinationKind::Rabbitmq(_) | DestinationKind::Kafka(_)
            )
        {
            cx.error(
                &format!("{}.routingKeyTemplate", route.path),
                "applies only to rabbitmq and kafka destinations",
            );
        }
    }
}

/// CFG-94 (a warning): a publish that can outlive its lease can be delivered twice.
pub(crate) fn check_timeouts(
    cx: &mut Cx<'_>,
    outbox: &OutboxConfig,
    destinations: &BTreeMap<String, Destination>,
) {
    if cx.is_bad("outbox.claimTimeoutMs") {
        return;
    }
    for (name, destination) in destinations {
        let path = format!("destinations.{name}.timeoutMs");
        let Some(timeout) = destination.kind.timeout_ms() else {
            continue;
        };
        if timeout >= outbox.claim_timeout_ms && !cx.is_bad(&path) {
            cx.warn(
                &path,
                "not below outbox.claimTimeoutMs, so a slow publish can be delivered twice",
            );
        }
    }
}

/// CFG-107, OPS-4: every http source route is unique and no fixed route of the data port.
pub(crate) fn check_source_routes(
    cx: &mut Cx<'_>,
    server: &ServerConfig,
    sources: &BTreeMap<String, Source>,
) {
    if cx.any_bad(&["inbox.basePath", "server.managementPort"]) {
        return;
    }
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (name, source) in sources {
        let SourceKind::Http(http) = &source.kind else {
            continue;
        };
        let path = format!("sources.{name}.path");
        let route = http.route.as_str();
        let operational = server.management_port.is_none()
            && (matches!(
                route,
                "/health" | "/health/live" | "/health/ready" | "/metrics" | "/admin"
            ) || route.starts_with("/admin/"));
        if route == "/" || operational {
            cx.error(
                &path,
                format!("the route {route} is a fixed route of the data port"),
            );
        } else if let Some((other, _)) = seen.iter().find(|(_, r)| *r == route) {
            cx.error(
                &path,
                format!("the same route as sources.{other}.path ({route})"),
            );
        }
        seen.push((name, route));
    }
}

/// CFG-111: while the relay runs, a push source's fixed topic must match some route.
pub(crate) fn check_relay_topics(
    cx: &mut Cx<'_>,
    inbox: &InboxConfig,
    routes: &[RouteDraft],
    sources: &BTreeMap<String, Source>,
) {
    if !inbox.relay.enabled || cx.is_bad("inbox.relay.enabled") || cx.is_bad("routes") {
        return;
    }
    if routes.iter().any(|r| r.topic_pattern.is_none()) {
        return;
    }
    for (name, source) in sources {
        let path = format!("sources.{name}.topic");
        if source.consumption != Consumption::Push
            || source.topic.uses(&TemplateField::EventType)
            || cx.is_bad(&path)
        {
            continue;
        }
        let topic = source.topic.render("", |field| match field {
            TemplateField::Source => Some(name.clone()),
            _ => None,
        });
        let matched = routes
            .iter()
            .filter_map(|r| r.topic_pattern.as_ref())
            .any(|glob| glob.matches(&topic));
        if !matched {
            cx.error(
                &path,
                format!("no route matches the topic {topic}; add a route or set consumption: pull"),
            );
        }
    }
}
