//! The headers a destination sends: reserved names, the four groups and their precedence
//! (DST-8, DST-9, DST-10), shared by the HTTP and `log` destinations.

use queuebox_core::Secret;

use super::DestinationError;

pub(crate) use queuebox_core::outgoing_headers::{Assembled, Groups, assemble, is_reserved};

/// Reserved for HTTP in addition (DST-8): a stored header must never be able to change the
/// framing or the routing of the request.
pub(crate) const RESERVED_HTTP: &[&str] = &[
    "content-type",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "content-encoding",
];

/// Logs the row headers `assemble` left out: a debug line per reserved name, one warning per
/// delivery for the rest (DST-8, DST-10). Names are printed escaped (they may hold a CR or LF);
/// values never.
pub(crate) fn log_dropped(destination: &str, message_id: &str, assembled: &Assembled) {
    for name in &assembled.reserved_dropped {
        tracing::debug!(
            destination,
            message_id,
            "row header {name:?} has a reserved name and is not sent"
        );
    }
    if !assembled.uncarriable_dropped.is_empty() {
        tracing::warn!(
            destination,
            message_id,
            "row headers {:?} cannot be carried by this destination and are not sent",
            assembled.uncarriable_dropped
        );
    }
}

/// Start-time check of static headers (DST-8, DST-10): a reserved name or a header the
/// protocol cannot carry stops the start.
pub(crate) fn check_static(
    destination: &str,
    statics: &[(String, Secret)],
    reserved_extra: &[&str],
    can_carry: impl Fn(&str, &str) -> Option<&'static str>,
) -> Result<(), DestinationError> {
    for (name, value) in statics {
        if is_reserved(name, reserved_extra) {
            return Err(DestinationError::ReservedHeader {
                destination: destination.to_owned(),
                key: "headers",
                header: name.clone(),
            });
        }
        if let Some(reason) = can_carry(name, value.expose()) {
            return Err(DestinationError::InvalidHeader {
                destination: destination.to_owned(),
                key: "headers",
                header: name.clone(),
                reason,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn statics(items: &[(&str, &str)]) -> Vec<(String, Secret)> {
        items
            .iter()
            .map(|(n, v)| (n.to_string(), Secret::new(*v)))
            .collect()
    }

    #[test]
    fn dst_9_precedence_standard_row_auth_static_and_winning_spelling() {
        let row = pairs(&[("x-tenant", "row"), ("AUTHORIZATION", "row-auth")]);
        let st = statics(&[
            ("X-Tenant", "static"),
            ("X-Static", "s"),
            ("authorization", "static-auth"),
        ]);
        let assembled = assemble(
            Groups {
                standard: pairs(&[("X-Message-Id", "id")]),
                row: &row,
                auth: Some(("Authorization", "Bearer t")),
                statics: &st,
            },
            RESERVED_HTTP,
            |_, _| true,
        );
        assert_eq!(
            assembled.headers,
            pairs(&[
                ("X-Message-Id", "id"),
                ("x-tenant", "row"),
                ("AUTHORIZATION", "row-auth"),
                ("X-Static", "s"),
            ])
        );
    }

    #[test]
    fn dst_9_auth_beats_static() {
        let st = statics(&[("authorization", "static")]);
        let assembled = assemble(
            Groups {
                standard: vec![],
                row: &[],
                auth: Some(("Authorization", "Bearer t")),
                statics: &st,
            },
            RESERVED_HTTP,
            |_, _| true,
        );
        assert_eq!(assembled.headers, pairs(&[("Authorization", "Bearer t")]));
    }

    #[test]
    fn dst_8_reserved_row_headers_are_dropped_in_any_case() {
        let row = pairs(&[
            ("X-MESSAGE-ID", "forged"),
            ("Content-Length", "1"),
            ("ok", "1"),
        ]);
        let assembled = assemble(
            Groups {
                standard: pairs(&[("X-Message-Id", "real")]),
                row: &row,
                auth: None,
                statics: &[],
            },
            RESERVED_HTTP,
            |_, _| true,
        );
        assert_eq!(
            assembled.headers,
            pairs(&[("X-Message-Id", "real"), ("ok", "1")])
        );
        assert_eq!(
            assembled.reserved_dropped,
            vec!["X-MESSAGE-ID", "Content-Length"]
        );
    }

    #[test]
    fn dst_8_http_only_names_are_not_reserved_for_log() {
        assert!(is_reserved("Content-Type", RESERVED_HTTP));
        assert!(!is_reserved("Content-Type", &[]));
        assert!(is_reserved("X-Attempt", &[]));
    }

    #[test]
    fn dst_10_uncarriable_row_headers_are_dropped_and_named() {
        let row = pairs(&[("bad name", "v"), ("good", "v")]);
        let assembled = assemble(
            Groups {
                standard: vec![],
                row: &row,
                auth: None,
                statics: &[],
            },
            &[],
            |name, _| !name.contains(' '),
        );
        assert_eq!(assembled.headers, pairs(&[("good", "v")]));
        assert_eq!(assembled.uncarriable_dropped, vec!["bad name"]);
    }

    #[test]
    fn dst_8_reserved_static_header_stops_the_start() {
        let err = check_static(
            "orders",
            &statics(&[("Host", "x")]),
            RESERVED_HTTP,
            |_, _| None,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "destinations.orders.headers: 'Host' is a reserved header name; only QueueBox sets it"
        );
    }

    #[test]
    fn dst_10_uncarriable_static_header_stops_the_start_without_its_value() {
        let err = check_static("orders", &statics(&[("X-A", "hunter\n2")]), &[], |_, v| {
            v.contains('\n').then_some("bad value")
        })
        .unwrap_err();
        assert!(!err.to_string().contains("hunter"), "{err}");
    }
}
