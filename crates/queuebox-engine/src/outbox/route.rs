//! Routing of a claimed row to its one destination (outbox.md §6.1): the routes in list order,
//! first match wins (OUT-22), no match is a dead letter with a fixed text (OUT-23).

use std::fmt;
use std::sync::Arc;

use queuebox_core::delivery::Publisher;
use queuebox_core::glob::TopicGlob;

/// A configured destination as the poller sees it: its name (a metric label and a log field) and
/// the connector that publishes to it.
pub struct Destination {
    pub name: String,
    pub publisher: Arc<dyn Publisher>,
}

impl fmt::Debug for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Destination")
            .field("name", &self.name)
            .field("kind", &self.publisher.kind())
            .finish()
    }
}

/// One entry of the `routes` list.
#[derive(Debug)]
pub struct Route {
    pub pattern: TopicGlob,
    pub destination: Arc<Destination>,
}

/// The `last_error` of a row whose topic matches no route (OUT-23).
pub fn no_route_reason(topic: &str) -> String {
    format!("No route matches topic '{topic}'.")
}

/// OUT-22: the destination of the first route whose pattern matches; later routes are not tested.
/// `Err` carries the OUT-23 reason.
pub fn route<'a>(routes: &'a [Route], topic: &str) -> Result<&'a Arc<Destination>, String> {
    routes
        .iter()
        .find(|r| r.pattern.matches(topic))
        .map(|r| &r.destination)
        .ok_or_else(|| no_route_reason(topic))
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuebox_core::delivery::{Outcome, OutgoingMessage};

    struct Nothing;

    #[async_trait::async_trait]
    impl Publisher for Nothing {
        fn kind(&self) -> &'static str {
            "log"
        }
        async fn publish(&self, _: &OutgoingMessage) -> Outcome {
            Outcome::Delivered
        }
    }

    fn routes(list: &[(&str, &str)]) -> Vec<Route> {
        list.iter()
            .map(|(pattern, name)| Route {
                pattern: TopicGlob::parse(pattern).unwrap(),
                destination: Arc::new(Destination {
                    name: (*name).to_owned(),
                    publisher: Arc::new(Nothing),
                }),
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
        assert_eq!(route(&routes, "order.created").unwrap().name, "orders");
        assert_eq!(
            route(&routes, "order.item.added").unwrap().name,
            "catch-all"
        );
        assert_eq!(route(&routes, "invoice.paid").unwrap().name, "catch-all");
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
