//! The store's statements in QueueBox's one SQL grammar (`queuebox_core::sql_template`): the
//! placeholders each table's statements may use (the table and its columns by default name,
//! schema.md §8, SCH-10), and rendering with PostgreSQL's quotes and `$n` parameters, once per
//! store. No state is ever a parameter (SCH-9: the states are literals in the files).

use queuebox_core::sql_template::{self, Dialect};
use queuebox_core::{SqlIdentifier, TableLayout};
use queuebox_store::StoreError;

/// `{outbox}` and every outbox column by its default name.
pub(crate) fn outbox_names(layout: &TableLayout) -> Vec<(&'static str, &SqlIdentifier)> {
    let mut names = vec![("outbox", &layout.outbox_table)];
    names.extend(
        layout
            .outbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (default, column)),
    );
    names
}

/// `{inbox}` and every inbox column by its default name.
pub(crate) fn inbox_names(layout: &TableLayout) -> Vec<(&'static str, &SqlIdentifier)> {
    let mut names = vec![("inbox", &layout.inbox_table)];
    names.extend(
        layout
            .inbox
            .entries()
            .into_iter()
            .map(|(_, default, column)| (default, column)),
    );
    names
}

/// Renders one bundled file; `order` is the order in which the store binds its parameters.
/// A file that does not render is a defect of this build, reported when the store opens.
pub(crate) fn render(
    file: &'static str,
    template: &str,
    names: &[(&str, &SqlIdentifier)],
    order: &[&str],
) -> Result<String, StoreError> {
    sql_template::render(template, names, order, Dialect::POSTGRES)
        .map(|rendered| rendered.sql)
        .map_err(|err| StoreError::BadTarget {
            reason: format!("the bundled statement {file} cannot be rendered: {err}"),
        })
}
