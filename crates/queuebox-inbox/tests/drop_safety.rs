//! Dropping a running worker (its `run` future, e.g. the losing branch of a `select!` on Ctrl-C)
//! ends every task the worker started: no lease is extended afterwards and nothing of the worker
//! stays alive (issue 8, item 7).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use queuebox_inbox::{Connection, ConnectionSource, DbError, Purpose, Worker, handler_fn};
use support::{Db, NewRow, opts};
use uuid::Uuid;

/// A connection source that lives exactly as long as the worker's shared state: the test keeps a
/// `Weak` to its marker, which dies only once the worker and every task holding it have ended.
struct Tracked {
    inner: queuebox_inbox::PgConnectionSource,
    _alive: Arc<()>,
}

#[async_trait]
impl ConnectionSource for Tracked {
    async fn connect(&self, purpose: Purpose) -> Result<Box<dyn Connection>, DbError> {
        self.inner.connect(purpose).await
    }
}

/// The lease ends of `ids`, in milliseconds since the epoch, as the database holds them.
async fn lease_ends(db: &Db, ids: &[Uuid]) -> Vec<Option<i64>> {
    let sql = format!(
        "SELECT (EXTRACT(EPOCH FROM \"{}\") * 1000)::bigint FROM {} WHERE \"{}\" = ANY($1) ORDER BY \"{}\"",
        db.schema.lease_expires_at,
        db.t(),
        db.schema.id,
        db.schema.id
    );
    let rows = db.admin.query(&sql, &[&ids]).await.unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

async fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Two rows in one batch with one slot: the first runs a slow handler, the second waits for the
/// slot with its lease renewed (PULL-39). Dropping `run` must stop both renewals and free the
/// worker; before the fix the waiting row's renewal was a detached task that renewed forever.
#[tokio::test]
async fn dropping_the_run_future_ends_every_task_of_the_worker() {
    let db = Db::new().await;
    let ids = vec![
        db.insert(NewRow::new("a").created(-60_000)).await,
        db.insert(NewRow::new("b").created(-59_000)).await,
    ];
    let mut o = opts();
    o.batch_size = 2;
    o.max_concurrency = 1;
    // Renewal every 100 ms, so a surviving renewal shows within a few hundred milliseconds.
    o.lease = Duration::from_millis(300);
    let alive = Arc::new(());
    let marker: Weak<()> = Arc::downgrade(&alive);
    let source = Tracked {
        inner: db.source(),
        _alive: alive,
    };
    let worker = Worker::new(source, o).expect("valid options");
    let started = Arc::new(AtomicUsize::new(0));
    let s2 = started.clone();
    let slow = handler_fn(move |_m, _tx, _cancel| {
        let started = s2.clone();
        Box::pin(async move {
            started.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(())
        })
    });
    {
        let run = worker.run(slow);
        tokio::pin!(run);
        let claimed = async {
            wait_until("the first handler", Duration::from_secs(10), || {
                started.load(Ordering::SeqCst) == 1
            })
            .await;
            // Let both rows' renewals tick at least once, so they are known to be running.
            tokio::time::sleep(Duration::from_millis(350)).await;
        };
        tokio::select! {
            _ = &mut run => panic!("run returned without a stop request"),
            _ = claimed => {}
        }
        // `run` is dropped here, as the losing branch of a select! would drop it.
    }
    drop(worker);
    wait_until(
        "the worker's state to be freed by all its tasks",
        Duration::from_secs(5),
        || marker.upgrade().is_none(),
    )
    .await;
    // A renewal statement already sent when the task ended may still land; after that, nothing.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let after_drop = lease_ends(&db, &ids).await;
    assert!(after_drop.iter().all(Option::is_some), "{after_drop:?}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        lease_ends(&db, &ids).await,
        after_drop,
        "no lease is extended after the worker is dropped"
    );
}
