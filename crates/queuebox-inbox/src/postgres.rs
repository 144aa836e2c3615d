//! The PostgreSQL adapter (feature `postgres`): a deadpool-postgres pool as the connection
//! source. Thin by design (PULL-73): statements, rows, affected counts, begin/commit/rollback.

use std::error::Error;
use std::time::SystemTime;

use async_trait::async_trait;
use deadpool_postgres::{Object, Pool};
use tokio_postgres::types::private::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use uuid::Uuid;

use crate::db::{Connection, ConnectionSource, DbError, Purpose, SqlRow, SqlValue};

/// Lends pooled connections. Each call takes its own connection (PULL-34).
#[derive(Clone)]
pub struct PgConnectionSource {
    pool: Pool,
}

impl PgConnectionSource {
    pub fn new(pool: Pool) -> Self {
        Self { pool }
    }
}

#[async_trait]
impl ConnectionSource for PgConnectionSource {
    async fn connect(&self, _purpose: Purpose) -> Result<Box<dyn Connection>, DbError> {
        let object = self.pool.get().await?;
        Ok(Box::new(PgConnection {
            object: Some(object),
            in_tx: false,
        }))
    }
}

struct PgConnection {
    object: Option<Object>,
    in_tx: bool,
}

impl PgConnection {
    fn client(&self) -> &Object {
        self.object
            .as_ref()
            .expect("the connection is present until drop")
    }

    async fn bind<'p>(
        &self,
        sql: &str,
        params: &'p [SqlValue],
    ) -> Result<(tokio_postgres::Statement, Vec<PgParam<'p>>), DbError> {
        let statement = self.client().prepare_cached(sql).await?;
        Ok((statement, params.iter().map(PgParam).collect()))
    }
}

impl Drop for PgConnection {
    fn drop(&mut self) {
        // A connection must never go back to the pool with an open transaction (PULL-73): close
        // it instead, and the server rolls the transaction back.
        if self.in_tx
            && let Some(object) = self.object.take()
        {
            drop(Object::take(object));
        }
    }
}

#[async_trait]
impl Connection for PgConnection {
    async fn execute(&mut self, sql: &str, params: &[SqlValue]) -> Result<u64, DbError> {
        let (statement, bound) = self.bind(sql, params).await?;
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|p| p as _).collect();
        Ok(self.client().execute(&statement, &refs).await?)
    }

    async fn query(&mut self, sql: &str, params: &[SqlValue]) -> Result<Vec<SqlRow>, DbError> {
        let (statement, bound) = self.bind(sql, params).await?;
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|p| p as _).collect();
        let rows = self.client().query(&statement, &refs).await?;
        rows.iter().map(decode_row).collect()
    }

    async fn begin(&mut self) -> Result<(), DbError> {
        self.in_tx = true;
        self.client().batch_execute("BEGIN").await?;
        Ok(())
    }

    async fn commit(&mut self) -> Result<(), DbError> {
        self.client().batch_execute("COMMIT").await?;
        self.in_tx = false;
        Ok(())
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        self.client().batch_execute("ROLLBACK").await?;
        self.in_tx = false;
        Ok(())
    }
}

/// Binds a neutral value to whatever type the server inferred for the parameter, so `:lease_ms`
/// works whether PostgreSQL typed it int4, int8 or float8.
#[derive(Debug)]
struct PgParam<'a>(&'a SqlValue);

impl ToSql for PgParam<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self.0 {
            SqlValue::Null => Ok(IsNull::Yes),
            SqlValue::Int(v) => match *ty {
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => v.to_string().to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            SqlValue::Text(v) => match *ty {
                Type::UUID => Uuid::parse_str(v)?.to_sql(ty, out),
                Type::JSON | Type::JSONB => {
                    serde_json::from_str::<serde_json::Value>(v)?.to_sql(ty, out)
                }
                _ => v.to_sql(ty, out),
            },
            SqlValue::Bool(v) => v.to_sql(ty, out),
            SqlValue::Uuid(v) => match *ty {
                Type::TEXT | Type::VARCHAR => v.to_string().to_sql(ty, out),
                _ => v.to_sql(ty, out),
            },
            SqlValue::Json(v) => v.to_sql(ty, out),
            SqlValue::Timestamp(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        // The real check happens in to_sql, against the value's variant.
        true
    }

    to_sql_checked!();
}

fn decode_row(row: &tokio_postgres::Row) -> Result<SqlRow, DbError> {
    (0..row.len())
        .map(|i| {
            let ty = row.columns()[i].type_().clone();
            let value = match ty {
                Type::UUID => row.try_get::<_, Option<Uuid>>(i)?.map(SqlValue::Uuid),
                Type::INT2 => row
                    .try_get::<_, Option<i16>>(i)?
                    .map(|v| SqlValue::Int(v.into())),
                Type::INT4 => row
                    .try_get::<_, Option<i32>>(i)?
                    .map(|v| SqlValue::Int(v.into())),
                Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(SqlValue::Int),
                Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(SqlValue::Bool),
                Type::JSON | Type::JSONB => row
                    .try_get::<_, Option<serde_json::Value>>(i)?
                    .map(SqlValue::Json),
                Type::TIMESTAMPTZ | Type::TIMESTAMP => row
                    .try_get::<_, Option<SystemTime>>(i)?
                    .map(SqlValue::Timestamp),
                _ => row.try_get::<_, Option<String>>(i)?.map(SqlValue::Text),
            };
            Ok(value.unwrap_or(SqlValue::Null))
        })
        .collect()
}
