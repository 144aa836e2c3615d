//! Routing of a claimed row to its one destination (outbox.md §6.1): the routes in list order,
//! first match wins (OUT-22), no match is a dead letter with a fixed text (OUT-23).

use std::fmt;
use std::sync::Arc;

use queuebox_core::Destination;
use queuebox_core::glob::TopicGlob;

use crate::transform::StageTransform;

/// One entry of the `routes` list: its pattern, the configured destination (whose name is a
/// metric label and a log field), and the transforms a delivery through it runs.
pub struct Route {
    pub pattern: TopicGlob,
    pub destination: Arc<dyn Destination>,
    pub transforms: OutboxTransforms,
}

/// The outbox stages of one route (TRF-5): the route's own transform, then its destination's.
/// Both run on every delivery attempt (TRF-6).
#[derive(Clone, Debug, Default)]
pub struct OutboxTransforms {
    pub route: Option<StageTransform>,
    pub destination: Option<StageTransform>,
}

impl OutboxTransforms {
    pub fn is_empty(&self) -> bool {
        self.route.is_none() && self.destination.is_none()
    }
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Route")
            .field("pattern", &self.pattern)
            .field("destination", &self.destination.name())
            .field("kind", &self.destination.kind())
            .finish()
    }
}

/// The `last_error` of a row whose topic matches no route (OUT-23).
pub fn no_route_reason(topic: &str) -> String {
    format!("No route matches topic '{topic}'.")
}

/// OUT-22: the first route whose pattern matches; later routes are not tested. `Err` carries
/// the OUT-23 reason.
pub fn route<'a>(routes: &'a [Route], topic: &str) -> Result<&'a Route, String> {
    routes
        .iter()
        .find(|r| r.pattern.matches(topic))
        .ok_or_else(|| no_route_reason(topic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbox::test_destination::Accepting;

    fn routes(list: &[(&str, &str)]) -> Vec<Route> {
        list.iter()
            .map(|(pattern, name)| Route {
                pattern: TopicGlob::parse(pattern).unwrap(),
                destination: Arc::new(Accepting::named(name)),
                transforms: OutboxTransforms::default(),
            })
            .collect()
    }

    #[test]
    fn out_22_first_matching_route_wins() {
        let routes = routes(&[
            ("order.*", "orders"),
            ("**", "catch-all"),
            ("order.created", "never"),
        ]);
        assert_eq!(
            route(&routes, "order.created").unwrap().destination.name(),
            "orders"
        );
        assert_eq!(
            route(&routes, "order.item.added")
                .unwrap()
                .destination
                .name(),
            "catch-all"
        );
        assert_eq!(
            route(&routes, "invoice.paid").unwrap().destination.name(),
            "catch-all"
        );
    }

    #[test]
    fn out_23_no_match_gives_the_dead_letter_text() {
        let routes = routes(&[("order.*", "orders")]);
        assert_eq!(
            route(&routes, "invoice.paid").unwrap_err(),
            "No route matches topic 'invoice.paid'."
        );
        assert_eq!(route(&[], "a").unwrap_err(), "No route matches topic 'a'.");
    }

    #[test]
    fn out_21_matching_is_case_sensitive() {
        let routes = routes(&[("order.*", "orders")]);
        assert!(route(&routes, "Order.created").is_err());
    }
}
