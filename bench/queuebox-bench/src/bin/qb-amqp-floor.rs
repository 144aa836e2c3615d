//! `qb-amqp-floor`: the RabbitMQ floors of bench/rabbitmq.sh, with the client library QueueBox
//! uses (lapin) and no database.
//!
//! - `fill QUEUE N`: publishes N JSON bodies `{"id":"m-<i>","n":<i>}` to QUEUE through the
//!   default exchange, persistent, with publisher confirms (the set-up, not a floor).
//! - `consume QUEUE N PREFETCH`: consumes N messages with manual acknowledgement and a prefetch
//!   of PREFETCH, acknowledging each one as it arrives (the raw consumer floor of the intake).
//! - `publish EXCHANGE N CHANNELS`: publishes N bodies to EXCHANGE on CHANNELS confirm-mode
//!   channels, one message in flight per channel, each waiting for its own confirm: the
//!   acknowledgement mode of QueueBox's destination (the raw publisher floor of the delivery).
//!
//! Prints `messages=<n> seconds=<s>` on standard output. Every wait on the broker is bounded by
//! [`BROKER_WAIT`]: a run of 2026-12-04 sat 5 minutes in `fill` after the queue held every
//! message, waiting for confirms that never came.

use std::future::Future;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

/// The longest wait for the broker's next answer (a confirm window, a delivery) before giving up.
const BROKER_WAIT: Duration = Duration::from_secs(60);

/// `step`, failing with what was awaited when the broker does not answer within [`BROKER_WAIT`].
async fn bounded<T>(what: &str, step: impl Future<Output = T>) -> anyhow::Result<T> {
    tokio::time::timeout(BROKER_WAIT, step)
        .await
        .map_err(|_| anyhow::anyhow!("no answer from the broker for {BROKER_WAIT:?} while {what}"))
}

fn body(i: u64) -> Vec<u8> {
    format!(r#"{{"id":"m-{i}","n":{i},"pad":"{}"}}"#, "x".repeat(150)).into_bytes()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = std::env::var("QUEUEBOX_BENCH_AMQP_URL")
        .unwrap_or_else(|_| "amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    let connection = Connection::connect(&url, ConnectionProperties::default()).await?;
    let count: u64 = args.get(2).map(|n| n.parse()).transpose()?.unwrap_or(0);
    let started = Instant::now();
    match args.first().map(String::as_str) {
        Some("fill") => {
            let channel = connection.create_channel().await?;
            channel
                .confirm_select(ConfirmSelectOptions::default())
                .await?;
            let queue = args[1].as_str();
            // Each publish's own confirm, awaited in windows of 1000 so the broker's memory
            // stays bounded.
            let mut window = Vec::with_capacity(1000);
            for i in 0..count {
                let confirm = channel
                    .basic_publish(
                        "".into(),
                        queue.into(),
                        BasicPublishOptions::default(),
                        &body(i),
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await?;
                window.push(confirm);
                if window.len() == 1000 || i + 1 == count {
                    let what = format!("waiting for the confirms of messages up to {i}");
                    let confirms =
                        bounded(&what, futures_util::future::try_join_all(window.drain(..)))
                            .await??;
                    anyhow::ensure!(
                        confirms.iter().all(|c| c.is_ack()),
                        "the broker refused a message up to {i}"
                    );
                }
            }
        }
        Some("consume") => {
            let channel = connection.create_channel().await?;
            let prefetch: u16 = args[3].parse()?;
            channel
                .basic_qos(prefetch, BasicQosOptions { global: false })
                .await?;
            let mut consumer = channel
                .basic_consume(
                    args[1].as_str().into(),
                    "qb-amqp-floor".into(),
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                )
                .await?;
            let mut seen = 0;
            while seen < count {
                let what = format!("waiting for message {} of {count}", seen + 1);
                let Some(delivery) = bounded(&what, consumer.next()).await? else {
                    anyhow::bail!("the consumer ended after {seen} messages");
                };
                let delivery = delivery?;
                channel
                    .basic_ack(delivery.delivery_tag, BasicAckOptions::default())
                    .await?;
                seen += 1;
            }
        }
        Some("publish") => {
            let channels: u64 = args[3].parse()?;
            let exchange = args[1].clone();
            let mut tasks = Vec::new();
            for c in 0..channels {
                let channel = connection.create_channel().await?;
                channel
                    .confirm_select(ConfirmSelectOptions::default())
                    .await?;
                let exchange = exchange.clone();
                tasks.push(tokio::spawn(async move {
                    let mut i = c;
                    while i < count {
                        let publish = channel
                            .basic_publish(
                                exchange.as_str().into(),
                                "bench.order.created".into(),
                                BasicPublishOptions {
                                    mandatory: true,
                                    immediate: false,
                                },
                                &body(i),
                                BasicProperties::default()
                                    .with_delivery_mode(2)
                                    .with_content_type("application/json".into()),
                            )
                            .await?;
                        let what = format!("waiting for the confirm of message {i}");
                        let confirm = bounded(&what, publish).await??;
                        anyhow::ensure!(confirm.is_ack(), "message {i} was not confirmed");
                        i += channels;
                    }
                    Ok::<(), anyhow::Error>(())
                }));
            }
            for task in tasks {
                task.await??;
            }
        }
        _ => anyhow::bail!("usage: qb-amqp-floor fill|consume|publish ..."),
    }
    let seconds = started.elapsed().as_secs_f64();
    println!("messages={count} seconds={seconds:.3}");
    let _ = connection.close(200, "done".into()).await;
    Ok(())
}
