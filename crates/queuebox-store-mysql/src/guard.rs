//! The catalog reads of the start-up schema guard (schema.md SCH-60): which of the mapped
//! tables exist, their columns, their unique keys, and the versions the history records, all
//! from `information_schema` of the URL's database. The rules are `queuebox_store::guard`'s.

use std::collections::{BTreeMap, BTreeSet};

use mysql_async::Conn;
use mysql_async::prelude::Queryable;
use queuebox_core::TableLayout;
use queuebox_store::{SCHEMA_HISTORY_TABLE, SchemaFacts, TableFacts};

use crate::sql::Statements;

pub(crate) async fn table_exists(
    conn: &mut Conn,
    sql: &Statements,
    name: &str,
) -> Result<bool, mysql_async::Error> {
    let count: Option<i64> = conn
        .exec_first(
            &sql.table_exists.sql,
            sql.table_exists.params(&[("name", name.into())]),
        )
        .await?;
    Ok(count.unwrap_or(0) > 0)
}

async fn table_facts(
    conn: &mut Conn,
    sql: &Statements,
    name: &str,
) -> Result<Option<TableFacts>, mysql_async::Error> {
    if !table_exists(conn, sql, name).await? {
        return Ok(None);
    }
    let columns: Vec<String> = conn
        .exec(
            &sql.columns.sql,
            sql.columns.params(&[("name", name.into())]),
        )
        .await?;
    let parts: Vec<(String, String)> = conn
        .exec(
            &sql.unique_keys.sql,
            sql.unique_keys.params(&[("name", name.into())]),
        )
        .await?;
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (index, column) in parts {
        keys.entry(index).or_default().insert(column);
    }
    Ok(Some(TableFacts {
        columns: columns.into_iter().collect(),
        unique_keys: keys.into_values().collect(),
        // MySQL has no notify mode, so no trigger is ever looked for.
        enabled_triggers: BTreeSet::new(),
    }))
}

/// Everything the guard needs, for the layout's (mapped) names.
pub(crate) async fn read_facts(
    conn: &mut Conn,
    sql: &Statements,
    layout: &TableLayout,
) -> Result<SchemaFacts, mysql_async::Error> {
    let outbox = table_facts(conn, sql, layout.outbox_table.as_str()).await?;
    let inbox = table_facts(conn, sql, layout.inbox_table.as_str()).await?;
    let recorded_versions = if table_exists(conn, sql, SCHEMA_HISTORY_TABLE).await? {
        let versions: Vec<i64> = conn.exec(&sql.history_versions.sql, ()).await?;
        versions
            .into_iter()
            .filter_map(|v| u32::try_from(v).ok())
            .collect()
    } else {
        Vec::new()
    };
    Ok(SchemaFacts {
        outbox,
        inbox,
        recorded_versions,
    })
}
