//! Reading `routes` (config.md §9.2, CFG-55) into drafts that keep each valid part, so the
//! cross-key rules can judge them even when another part is in error (CFG-26).

use queuebox_core::glob::TopicGlob;
use queuebox_core::template::{Template, TemplateFields};

use crate::model_destination::Route;
use crate::node::Node;
use crate::parse_common::read_transform;
use crate::read::{Cx, Sec, index, list_items};
use crate::values as v;

const ROUTE_KEYS: &[&str] = &[
    "topicPattern",
    "destination",
    "routingKeyTemplate",
    "routingKeyMissingFieldDefault",
    "transform",
];

/// A route as read: each key on its own, so the cross-key rules can use the parts that are
/// valid even when another part of the route is not (CFG-26).
pub(crate) struct RouteDraft {
    pub path: String,
    pub topic_pattern: Option<TopicGlob>,
    pub destination: Option<String>,
    pub routing_key_template: Option<Template>,
    pub has_routing_key_template: bool,
    pub missing_default: String,
    pub transform: Option<crate::model::TransformConfig>,
}

impl RouteDraft {
    pub fn build(self) -> Option<Route> {
        Some(Route {
            topic_pattern: self.topic_pattern?,
            destination: self.destination?,
            routing_key_template: self.routing_key_template,
            routing_key_missing_field_default: self.missing_default,
            transform: self.transform,
        })
    }
}

/// `routes` (CFG-55), one draft per position.
pub(crate) fn read_routes(cx: &mut Cx<'_>, node: Option<&Node>) -> Vec<RouteDraft> {
    let Some(items) = node.and_then(|n| list_items(cx, "routes", n)) else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let path = index("routes", i);
            let mut s = Sec::open(cx, &path, Some(item));
            let topic_pattern = required_key(cx, &mut s, "topicPattern")
                .and_then(|n| v::glob(cx, &s.at("topicPattern"), n));
            let destination = required_key(cx, &mut s, "destination")
                .and_then(|n| v::non_blank(cx, &s.at("destination"), n));
            let has_routing_key_template = s.has("routingKeyTemplate");
            let routing_key_template = s.node("routingKeyTemplate").and_then(|n| {
                v::template(
                    cx,
                    &s.at("routingKeyTemplate"),
                    n,
                    TemplateFields::Destination,
                )
            });
            let missing_default = s
                .node("routingKeyMissingFieldDefault")
                .and_then(|n| v::string(cx, &s.at("routingKeyMissingFieldDefault"), n))
                .unwrap_or_default();
            let transform_node = s.node("transform");
            let transform = read_transform(cx, &s.at("transform"), transform_node);
            s.finish(cx, ROUTE_KEYS);
            RouteDraft {
                path,
                topic_pattern,
                destination,
                routing_key_template,
                has_routing_key_template,
                missing_default,
                transform,
            }
        })
        .collect()
}

fn required_key<'n>(cx: &mut Cx<'_>, s: &mut Sec<'n>, key: &str) -> Option<&'n Node> {
    let node = s.node(key);
    if node.is_none() {
        cx.error(&s.at(key), "required");
    }
    node
}
