//! An intake whose outcomes the test decides, standing in for the engine (never for the broker):
//! it records every message the source submitted, in order, and answers each with the outcome
//! the test's rule gives, optionally holding the answers until the test releases them. The
//! engine's own intake runs behind the real source in the binary's end-to-end tests.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use queuebox_core::intake::{IntakeOutcome, PendingOutcome, StoredState};
use queuebox_core::{Intake, ReceivedMessage};
use tokio::sync::{Semaphore, oneshot};
use uuid::Uuid;

type Rule = dyn Fn(&ReceivedMessage, usize) -> IntakeOutcome + Send + Sync;

pub struct ScriptedIntake {
    /// Every submitted message, in the order of submission, with the replica that sent it.
    seen: Mutex<Vec<ReceivedMessage>>,
    /// How many times each body was submitted.
    deliveries: Mutex<HashMap<Vec<u8>, usize>>,
    /// The size of each group submitted together (`submit_all`), in order.
    groups: Mutex<Vec<usize>>,
    rule: Box<Rule>,
    /// When set, each answer waits for one permit.
    gate: Option<Arc<Semaphore>>,
}

impl ScriptedIntake {
    /// `rule(message, delivery)`: the outcome of the `delivery`-th submission (1, 2, …) of
    /// this body.
    pub fn new(
        rule: impl Fn(&ReceivedMessage, usize) -> IntakeOutcome + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            seen: Mutex::new(Vec::new()),
            deliveries: Mutex::new(HashMap::new()),
            groups: Mutex::new(Vec::new()),
            rule: Box::new(rule),
            gate: None,
        })
    }

    /// Every message is new (stored `pending`) the first time, a duplicate after.
    pub fn storing() -> Arc<Self> {
        Self::new(store_once)
    }

    /// Like `storing`, but answers only as the returned semaphore gives permits.
    pub fn held() -> (Arc<Self>, Arc<Semaphore>) {
        let gate = Arc::new(Semaphore::new(0));
        let intake = Arc::new(Self {
            seen: Mutex::new(Vec::new()),
            deliveries: Mutex::new(HashMap::new()),
            groups: Mutex::new(Vec::new()),
            rule: Box::new(store_once),
            gate: Some(Arc::clone(&gate)),
        });
        (intake, gate)
    }

    pub fn seen(&self) -> Vec<ReceivedMessage> {
        self.seen.lock().unwrap().clone()
    }

    pub fn bodies(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned())
            .collect()
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The size of each group submitted together, in order; empty when the source submitted
    /// every message on its own.
    pub fn groups(&self) -> Vec<usize> {
        self.groups.lock().unwrap().clone()
    }

    pub fn deliveries_of(&self, body: &str) -> usize {
        self.deliveries
            .lock()
            .unwrap()
            .get(body.as_bytes())
            .copied()
            .unwrap_or(0)
    }
}

pub fn new_row() -> IntakeOutcome {
    IntakeOutcome::New {
        id: Uuid::now_v7(),
        state: StoredState::Pending,
    }
}

fn store_once(_: &ReceivedMessage, delivery: usize) -> IntakeOutcome {
    if delivery == 1 {
        new_row()
    } else {
        IntakeOutcome::Duplicate
    }
}

#[async_trait::async_trait]
impl Intake for ScriptedIntake {
    async fn enqueue(&self, message: ReceivedMessage) -> PendingOutcome {
        let delivery = {
            let mut deliveries = self.deliveries.lock().unwrap();
            let n = deliveries.entry(message.body.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let outcome = (self.rule)(&message, delivery);
        self.seen.lock().unwrap().push(message);
        let Some(gate) = self.gate.clone() else {
            return PendingOutcome::ready(outcome);
        };
        let (answer, wait) = oneshot::channel();
        tokio::spawn(async move {
            if let Ok(permit) = gate.acquire().await {
                permit.forget();
                let _ = answer.send(outcome);
            }
        });
        PendingOutcome::waiting(wait)
    }

    async fn enqueue_all(&self, messages: Vec<ReceivedMessage>) -> Vec<PendingOutcome> {
        self.groups.lock().unwrap().push(messages.len());
        let mut pending = Vec::with_capacity(messages.len());
        for message in messages {
            pending.push(self.enqueue(message).await);
        }
        pending
    }
}
