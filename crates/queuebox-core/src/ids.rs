//! The identifiers of a claimed row, as newtypes: a row's id and the token of its claim are
//! both UUIDs, and a write fenced by the wrong one of the two would match nothing, silently.

use std::fmt;

use uuid::Uuid;

/// The `id` of an outbox or inbox row (SCH-7): an outbox row's id is its `X-Message-Id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowId(pub Uuid);

/// The `claim_token` a claim wrote on a row; every later write of the claim is fenced by it
/// (OUT-41, RLY-7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimToken(pub Uuid);

impl fmt::Display for RowId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for ClaimToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_as_their_uuid() {
        let uuid = Uuid::from_u128(0x0190_0000_0000_7000_8000_0000_0000_0001);
        assert_eq!(RowId(uuid).to_string(), uuid.hyphenated().to_string());
        assert_eq!(ClaimToken(uuid).to_string(), uuid.to_string());
    }
}
