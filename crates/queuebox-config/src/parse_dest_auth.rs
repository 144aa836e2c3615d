//! Reading the auth block of an `http` destination (CFG-50, CFG-97): `oauth2`, `basic` and
//! `header`.

use std::collections::BTreeMap;

use crate::model::HeaderName;
use crate::model_destination::DestinationAuth;
use crate::node::Node;
use crate::parse_common::read_type;
use crate::parse_destination::{is_reserved, required};
use crate::parse_urls::http_url;
use crate::read::{Cx, Sec, join};
use crate::values as v;

const AUTH_TYPES: &[(&str, &[&str])] = &[
    ("basic", &["username", "password"]),
    ("header", &["headerName", "headerValue"]),
    (
        "oauth2",
        &[
            "clientId",
            "clientSecret",
            "tokenUrl",
            "scope",
            "extraParams",
        ],
    ),
];

/// The auth block of an `http` destination (CFG-50, CFG-97).
pub(crate) fn read_destination_auth(
    cx: &mut Cx<'_>,
    path: &str,
    node: Option<&Node>,
) -> Option<DestinationAuth> {
    let mut s = Sec::open(cx, path, Some(node?));
    let Some(kind) = read_type(cx, &mut s, &["basic", "header", "oauth2"]) else {
        s.all();
        return None;
    };
    let auth = match kind {
        "oauth2" => {
            let client_id = required(cx, &mut s, "clientId", kind)
                .and_then(|n| v::non_blank(cx, &s.at("clientId"), n));
            let client_secret = required(cx, &mut s, "clientSecret", kind)
                .and_then(|n| v::required_secret(cx, &s.at("clientSecret"), n));
            let token_url = required(cx, &mut s, "tokenUrl", kind)
                .and_then(|n| http_url(cx, &s.at("tokenUrl"), n));
            let scope = s
                .node("scope")
                .and_then(|n| v::string(cx, &s.at("scope"), n));
            let params_path = s.at("extraParams");
            let params_node = s.node("extraParams");
            let mut params = Sec::open(cx, &params_path, params_node);
            let mut extra_params = BTreeMap::new();
            for (key, value) in params.all() {
                if let Some(text) = v::string(cx, &join(&params_path, key), value) {
                    extra_params.insert(key.to_owned(), text);
                }
            }
            match (client_id, client_secret, token_url) {
                (Some(client_id), Some(client_secret), Some(token_url)) => {
                    Some(DestinationAuth::Oauth2 {
                        client_id,
                        client_secret,
                        token_url,
                        scope,
                        extra_params,
                    })
                }
                _ => None,
            }
        }
        "basic" => {
            let username = required(cx, &mut s, "username", kind)
                .and_then(|n| v::non_blank(cx, &s.at("username"), n));
            let password = required(cx, &mut s, "password", kind)
                .and_then(|n| v::required_secret(cx, &s.at("password"), n));
            username
                .zip(password)
                .map(|(username, password)| DestinationAuth::Basic { username, password })
        }
        _ => {
            let name_path = s.at("headerName");
            let header_name = match s.node("headerName") {
                Some(n) => v::header_name(cx, &name_path, n).and_then(|h| {
                    if is_reserved(h.as_str(), true) {
                        cx.error_at(
                            &name_path,
                            n,
                            "a reserved header name; only QueueBox sets it",
                        );
                        None
                    } else {
                        Some(h)
                    }
                }),
                None => Some(HeaderName::known("Authorization")),
            };
            let value_path = s.at("headerValue");
            let header_value = required(cx, &mut s, "headerValue", kind).and_then(|n| {
                let value = v::required_secret(cx, &value_path, n)?;
                if value.expose().contains(['\r', '\n', '\0']) {
                    cx.error_at(&value_path, n, "must not contain CR, LF or NUL");
                    return None;
                }
                Some(value)
            });
            header_name
                .zip(header_value)
                .map(|(header_name, header_value)| DestinationAuth::Header {
                    header_name,
                    header_value,
                })
        }
    };
    let mut known = vec!["type"];
    known.extend(
        AUTH_TYPES
            .iter()
            .find(|(t, _)| *t == kind)
            .map(|(_, k)| *k)
            .unwrap_or_default(),
    );
    s.finish_typed(cx, Some(kind), &known, AUTH_TYPES);
    auth
}
