//! `qb-nats-floor`: the NATS JetStream floors of bench/nats.sh, with the client library QueueBox
//! uses (async-nats) and no database.
//!
//! - `fill SUBJECT N`: publishes N JSON bodies `{"id":"m-<i>","n":<i>,"pad":"x…"}` to SUBJECT
//!   through JetStream, each acknowledged by the stream, 1000 in flight at most (the set-up,
//!   not a floor).
//! - `consume STREAM DURABLE N BATCH`: creates the durable pull consumer DURABLE (explicit ack,
//!   deliver all) on STREAM and fetches N messages BATCH at a time with a 1 s wait, acknowledging
//!   each as it arrives: the fetch and acknowledgement of QueueBox's source, without the
//!   database (the raw consumer floor of the intake).
//! - `publish SUBJECT N CONCURRENCY`: publishes N bodies to SUBJECT through JetStream with
//!   CONCURRENCY publishes in flight, each waiting for its own stream acknowledgement: the
//!   acknowledgement mode of QueueBox's destination (the raw publisher floor of the delivery).
//!
//! The server is `QUEUEBOX_BENCH_NATS_URL` (default `nats://127.0.0.1:4222`). Prints
//! `messages=<n> seconds=<s>` on standard output.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::pull::Config as PullConfig;
use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy};
use futures_util::StreamExt;

fn body(i: u64) -> Vec<u8> {
    format!(r#"{{"id":"m-{i}","n":{i},"pad":"{}"}}"#, "x".repeat(150)).into_bytes()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = std::env::var("QUEUEBOX_BENCH_NATS_URL")
        .unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let client = async_nats::connect(&url).await?;
    let js = jetstream::new(client.clone());
    let arg = |i: usize| -> anyhow::Result<&str> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| anyhow::anyhow!("usage: qb-nats-floor fill|consume|publish ..."))
    };
    let started;
    let count: u64;
    match args.first().map(String::as_str) {
        Some("fill") => {
            let subject = arg(1)?.to_owned();
            count = arg(2)?.parse()?;
            started = Instant::now();
            let mut in_flight = VecDeque::new();
            for i in 0..count {
                in_flight.push_back(js.publish(subject.clone(), body(i).into()).await?);
                if in_flight.len() >= 1000 {
                    in_flight.pop_front().unwrap().await?;
                }
            }
            for ack in in_flight {
                ack.await?;
            }
        }
        Some("consume") => {
            let stream = js.get_stream(arg(1)?).await?;
            let durable = arg(2)?.to_owned();
            count = arg(3)?.parse()?;
            let batch: usize = arg(4)?.parse()?;
            let consumer = stream
                .create_consumer(PullConfig {
                    durable_name: Some(durable),
                    ack_policy: AckPolicy::Explicit,
                    deliver_policy: DeliverPolicy::All,
                    ..Default::default()
                })
                .await?;
            started = Instant::now();
            let mut seen = 0;
            while seen < count {
                let mut messages = consumer
                    .batch()
                    .max_messages(batch)
                    .expires(Duration::from_secs(1))
                    .messages()
                    .await?;
                while let Some(message) = messages.next().await {
                    let message = message.map_err(|e| anyhow::anyhow!("{e}"))?;
                    message.ack().await.map_err(|e| anyhow::anyhow!("{e}"))?;
                    seen += 1;
                }
            }
            client.flush().await?;
        }
        Some("publish") => {
            let subject = arg(1)?.to_owned();
            count = arg(2)?.parse()?;
            let concurrency: u64 = arg(3)?.parse()?;
            started = Instant::now();
            let mut tasks = Vec::new();
            for c in 0..concurrency {
                let js = js.clone();
                let subject = subject.clone();
                tasks.push(tokio::spawn(async move {
                    let mut i = c;
                    while i < count {
                        js.publish(subject.clone(), body(i).into()).await?.await?;
                        i += concurrency;
                    }
                    Ok::<(), anyhow::Error>(())
                }));
            }
            for task in tasks {
                task.await??;
            }
        }
        _ => anyhow::bail!("usage: qb-nats-floor fill|consume|publish ..."),
    }
    let seconds = started.elapsed().as_secs_f64();
    println!("messages={count} seconds={seconds:.3}");
    Ok(())
}
