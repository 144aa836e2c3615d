//! The two tables QueueBox owns, and how an inbox row is consumed: one name for each, used by
//! the config, the stores, the engine and its metrics alike.

/// The outbox or the inbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Outbox,
    Inbox,
}

impl Table {
    pub const ALL: &'static [Self] = &[Self::Outbox, Self::Inbox];

    /// The table's default name and its metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Outbox => "outbox",
            Self::Inbox => "inbox",
        }
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `consumption` of a source (CFG-65), written on each of its rows at receipt (INB-2): the
/// relay forwards `push` rows, a pull worker claims `pull` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Consumption {
    Push,
    Pull,
}

impl Consumption {
    /// The value of the `consumption` column and of the config key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Pull => "pull",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_column_and_label_values() {
        assert_eq!(
            (Table::Outbox.as_str(), Table::Inbox.as_str()),
            ("outbox", "inbox")
        );
        assert_eq!(
            (Consumption::Push.as_str(), Consumption::Pull.as_str()),
            ("push", "pull")
        );
    }
}
