//! Families: the series of one catalogue row, keyed by label values, and how a scrape reads them.
//! Fixed label sets live in an array indexed by the enum (no lock to find a series); configured
//! names (destination, source) live in a locked map, so hot code looks them up once and keeps
//! the handle.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use super::catalogue::{FamilySpec, Presence, spec};
use super::handles::{CounterHandle, GaugeHandle, TimeBase};
use super::labels::LabelSet;
use super::summary::{SummaryHandle, SummarySnapshot};

/// The value of one series at scrape time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    Counter(u64),
    Gauge(f64),
    Summary(SummarySnapshot),
}

/// One series as the renderer sees it: label pairs in the spec's order, and its value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    pub(crate) labels: Vec<(&'static str, String)>,
    pub(crate) value: Value,
}

/// What the renderer asks of every family.
pub(crate) trait Collect: Send + Sync {
    fn spec(&self) -> &'static FamilySpec;
    /// Appends the series that exist now (first-use series only once moved).
    fn collect(&self, out: &mut Vec<Sample>);
}

/// A series type: counter, gauge or summary.
pub(crate) trait Series: Clone + Send + Sync {
    fn create(time: &Arc<TimeBase>) -> Self;
    fn is_used(&self) -> bool;
    /// Makes an at-start series visible before its first movement (MET-7).
    fn mark_used(&self);
    fn value(&self) -> Value;
}

impl Series for CounterHandle {
    fn create(_: &Arc<TimeBase>) -> Self {
        Self::default()
    }
    fn is_used(&self) -> bool {
        CounterHandle::is_used(self)
    }
    fn mark_used(&self) {
        CounterHandle::mark_used(self);
    }
    fn value(&self) -> Value {
        Value::Counter(self.get())
    }
}

impl Series for GaugeHandle {
    fn create(_: &Arc<TimeBase>) -> Self {
        Self::default()
    }
    fn is_used(&self) -> bool {
        GaugeHandle::is_used(self)
    }
    fn mark_used(&self) {
        GaugeHandle::mark_used(self);
    }
    fn value(&self) -> Value {
        Value::Gauge(self.get())
    }
}

impl Series for SummaryHandle {
    fn create(time: &Arc<TimeBase>) -> Self {
        Self::new(Arc::clone(time))
    }
    fn is_used(&self) -> bool {
        SummaryHandle::is_used(self)
    }
    fn mark_used(&self) {
        // No summary is "at start" in §5.2; a summary with no observation has nothing to say.
    }
    fn value(&self) -> Value {
        Value::Summary(self.snapshot())
    }
}

/// A family whose labels all come from fixed sets (or that has no labels: `E = NoLabels`).
pub(crate) struct EnumFamily<E, S> {
    spec: &'static FamilySpec,
    series: Box<[S]>,
    labels: PhantomData<fn(E)>,
}

impl<E: LabelSet, S: Series> EnumFamily<E, S> {
    pub(crate) fn new(name: &str, time: &Arc<TimeBase>) -> Self {
        let spec = spec(name);
        assert_eq!(
            spec.labels.len(),
            E::ALL[0].values().len(),
            "labels of {name}"
        );
        let series: Box<[S]> = E::ALL.iter().map(|_| S::create(time)).collect();
        if spec.presence == Presence::AtStart {
            series.iter().for_each(S::mark_used);
        }
        Self {
            spec,
            series,
            labels: PhantomData,
        }
    }

    pub(crate) fn get(&self, label: E) -> &S {
        &self.series[label.index()]
    }
}

impl<E: LabelSet, S: Series> Collect for EnumFamily<E, S> {
    fn spec(&self) -> &'static FamilySpec {
        self.spec
    }

    fn collect(&self, out: &mut Vec<Sample>) {
        for label in E::ALL {
            let series = self.get(*label);
            if series.is_used() {
                let labels = self.spec.labels.iter().copied();
                let values = label.values().iter().map(|v| (*v).to_owned());
                out.push(Sample {
                    labels: labels.zip(values).collect(),
                    value: series.value(),
                });
            }
        }
    }
}

/// A family whose first label is a configured name, followed by fixed-set labels `E`.
pub(crate) struct NamedFamily<E, S> {
    spec: &'static FamilySpec,
    time: Arc<TimeBase>,
    series: Mutex<BTreeMap<(String, usize), S>>,
    labels: PhantomData<fn(E)>,
}

impl<E: LabelSet, S: Series> NamedFamily<E, S> {
    pub(crate) fn new(name: &str, time: &Arc<TimeBase>) -> Self {
        let spec = spec(name);
        assert_eq!(
            spec.labels.len(),
            1 + E::ALL[0].values().len(),
            "labels of {name}"
        );
        assert_eq!(
            spec.presence,
            Presence::FirstUse,
            "{name}: names are not known at start"
        );
        Self {
            spec,
            time: Arc::clone(time),
            series: Mutex::default(),
            labels: PhantomData,
        }
    }

    /// The series for one configured name; created (still invisible) on first lookup. The
    /// names come from the configuration, so the map is bounded by it (MET-5).
    pub(crate) fn get(&self, configured_name: &str, label: E) -> S {
        let mut map = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (configured_name.to_owned(), label.index());
        map.entry(key)
            .or_insert_with(|| S::create(&self.time))
            .clone()
    }
}

impl<E: LabelSet, S: Series> Collect for NamedFamily<E, S> {
    fn spec(&self) -> &'static FamilySpec {
        self.spec
    }

    fn collect(&self, out: &mut Vec<Sample>) {
        let map = self.series.lock().unwrap_or_else(PoisonError::into_inner);
        for ((name, index), series) in map.iter() {
            if !series.is_used() {
                continue;
            }
            let mut labels = vec![(self.spec.labels[0], name.clone())];
            let fixed = E::ALL[*index].values().iter().map(|v| (*v).to_owned());
            labels.extend(self.spec.labels[1..].iter().copied().zip(fixed));
            out.push(Sample {
                labels,
                value: series.value(),
            });
        }
    }
}

/// `queuebox_info`: always 1, labelled with the build's version.
pub(crate) struct InfoFamily {
    pub(crate) spec: &'static FamilySpec,
    pub(crate) version: String,
}

impl Collect for InfoFamily {
    fn spec(&self) -> &'static FamilySpec {
        self.spec
    }

    fn collect(&self, out: &mut Vec<Sample>) {
        out.push(Sample {
            labels: vec![(self.spec.labels[0], self.version.clone())],
            value: Value::Gauge(1.0),
        });
    }
}

/// `queuebox_uptime_seconds`: computed at scrape time, so nothing has to tick it.
pub(crate) struct UptimeFamily {
    pub(crate) spec: &'static FamilySpec,
    pub(crate) time: Arc<TimeBase>,
}

impl Collect for UptimeFamily {
    fn spec(&self) -> &'static FamilySpec {
        self.spec
    }

    fn collect(&self, out: &mut Vec<Sample>) {
        out.push(Sample {
            labels: Vec::new(),
            value: Value::Gauge(self.time.elapsed().as_secs_f64()),
        });
    }
}
