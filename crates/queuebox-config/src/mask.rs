//! Masking of passwords in URLs and connection strings (CFG-23).

const MASK: &str = "***";

/// Replaces every password in a URL or connection string by `***`: the password of the user
/// information, `password=` / `pwd=` parameters (query or `;` properties) and ADO.NET
/// `Password=` / `PWD=` entries. Everything else is kept as written.
pub fn mask_url(url: &str) -> String {
    match url.find("://") {
        Some(scheme_end) => mask_url_form(url, scheme_end + 3),
        None => mask_properties(url, ';'),
    }
}

fn mask_url_form(url: &str, authority_start: usize) -> String {
    let rest = &url[authority_start..];
    // The query or the `;` properties start at the first `?`, `#` or `;`; the user information
    // ends at the last `@` before them, so a password holding a raw `/` is still masked whole.
    let params_start = rest.find(['?', '#', ';']).unwrap_or(rest.len());
    let head = &rest[..params_start];
    let mut out = String::from(&url[..authority_start]);
    match head.rfind('@') {
        Some(at) => {
            let userinfo = &head[..at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..=colon]);
                    out.push_str(MASK);
                }
                None => out.push_str(userinfo),
            }
            out.push_str(&head[at..]);
        }
        None => out.push_str(head),
    }
    let params = &rest[params_start..];
    if !params.is_empty() {
        let separator = if params.starts_with(';') { ';' } else { '&' };
        let (lead, body) = params.split_at(1);
        out.push_str(lead);
        if separator == ';' {
            out.push_str(&mask_properties(body, ';'));
        } else {
            out.push_str(&mask_properties(body, '&'));
        }
    }
    out
}

/// Masks `password=` and `pwd=` entries of `key=value` lists; keys compare without case and
/// spaces (ADO.NET writes `Password`, `PWD`).
fn mask_properties(text: &str, separator: char) -> String {
    text.split(separator)
        .map(|part| match part.split_once('=') {
            Some((key, _)) if is_password_key(key) => format!("{key}={MASK}"),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(&separator.to_string())
}

fn is_password_key(key: &str) -> bool {
    let normalized: String = key
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(normalized.as_str(), "password" | "pwd" | "saslpassword")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_23_the_four_documented_forms() {
        assert_eq!(
            mask_url("postgres://app:s3cret@db:5432/app"),
            "postgres://app:***@db:5432/app"
        );
        assert_eq!(
            mask_url("amqp://queuebox:hunter2@rabbit:5672/%2f"),
            "amqp://queuebox:***@rabbit:5672/%2f"
        );
        assert_eq!(
            mask_url("Server=db;User Id=app;Password=hunter2"),
            "Server=db;User Id=app;Password=***"
        );
        assert_eq!(
            mask_url("jdbc:sqlserver://db;user=app;password=hunter2"),
            "jdbc:sqlserver://db;user=app;password=***"
        );
    }

    #[test]
    fn cfg_23_query_passwords_and_awkward_passwords_are_masked() {
        assert_eq!(
            mask_url("jdbc:postgresql://db/app?user=app&password=p%40ss&sslmode=require"),
            "jdbc:postgresql://db/app?user=app&password=***&sslmode=require"
        );
        assert_eq!(mask_url("nats://u:pa/ss@n:4222"), "nats://u:***@n:4222");
        assert_eq!(
            mask_url("Data Source=db; PWD = x ;UID=a"),
            "Data Source=db; PWD =***;UID=a"
        );
        assert_eq!(mask_url("postgres://app@db/app"), "postgres://app@db/app");
        assert_eq!(mask_url("sqlite://data/qb.db"), "sqlite://data/qb.db");
    }
}
