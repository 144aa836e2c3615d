//! Reads the PostgreSQL catalog into the guard's facts (schema.md SCH-60), for the mapped
//! table and column names. Catalog reads only: no lock, no DDL.

use std::collections::BTreeSet;

use queuebox_core::TableLayout;
use queuebox_store::{SCHEMA_HISTORY_TABLE, SchemaFacts, TableFacts};
use tokio_postgres::Client;
use tokio_postgres::types::Oid;

use crate::sql::{self, CatalogSql};

/// The oid of a table in the first schema of `search_path`, if it exists.
pub(crate) async fn table_oid(
    client: &Client,
    catalog: &CatalogSql,
    name: &str,
) -> Result<Option<Oid>, tokio_postgres::Error> {
    let row = client.query_opt(&catalog.table_oid, &[&name]).await?;
    row.map(|r| r.try_get::<_, Oid>(0)).transpose()
}

pub(crate) async fn enabled_triggers(
    client: &Client,
    catalog: &CatalogSql,
    oid: Oid,
) -> Result<BTreeSet<String>, tokio_postgres::Error> {
    let rows = client.query(&catalog.enabled_triggers, &[&oid]).await?;
    rows.iter().map(|r| r.try_get::<_, String>(0)).collect()
}

async fn table_facts(
    client: &Client,
    catalog: &CatalogSql,
    name: &str,
) -> Result<Option<TableFacts>, tokio_postgres::Error> {
    let Some(oid) = table_oid(client, catalog, name).await? else {
        return Ok(None);
    };
    let columns = client
        .query(&catalog.columns, &[&oid])
        .await?
        .iter()
        .map(|r| r.try_get::<_, String>(0))
        .collect::<Result<_, _>>()?;
    let unique_keys = client
        .query(&catalog.unique_keys, &[&oid])
        .await?
        .iter()
        .map(|r| {
            r.try_get::<_, Vec<String>>(0)
                .map(|cols| cols.into_iter().collect())
        })
        .collect::<Result<_, _>>()?;
    Ok(Some(TableFacts {
        columns,
        unique_keys,
        enabled_triggers: enabled_triggers(client, catalog, oid).await?,
    }))
}

/// Everything the guard checks, read from the catalog.
pub(crate) async fn read_facts(
    client: &Client,
    catalog: &CatalogSql,
    layout: &TableLayout,
) -> Result<SchemaFacts, tokio_postgres::Error> {
    let recorded_versions = if table_oid(client, catalog, SCHEMA_HISTORY_TABLE)
        .await?
        .is_some()
    {
        client
            .query(sql::HISTORY_VERSIONS, &[])
            .await?
            .iter()
            .map(|r| r.try_get::<_, i32>(0))
            .collect::<Result<Vec<i32>, _>>()?
            .into_iter()
            .filter_map(|v| u32::try_from(v).ok())
            .collect()
    } else {
        Vec::new()
    };
    Ok(SchemaFacts {
        outbox: table_facts(client, catalog, layout.outbox_table.as_str()).await?,
        inbox: table_facts(client, catalog, layout.inbox_table.as_str()).await?,
        recorded_versions,
    })
}
