//! The fixed label value sets of the metric catalogue (operations.md §5.2, MET-5): one enum per
//! label, so no caller can put free text (a status code, a topic, an id) into a label value.

pub use queuebox_core::{DestinationType, Table};

/// A fixed set of label values, indexable so a family can keep one series per value in an array
/// (no lock to find it).
pub(crate) trait LabelSet: Copy + 'static {
    /// Every value, in the order of the catalogue table; `index` is the position in this slice.
    const ALL: &'static [Self];
    fn index(self) -> usize;
    /// The label values this contributes, in the order of the family's label names.
    fn values(self) -> &'static [&'static str];
}

/// The label set of a family with no labels (or of the configured-name part only): one series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NoLabels;

impl LabelSet for NoLabels {
    const ALL: &'static [Self] = &[NoLabels];
    fn index(self) -> usize {
        0
    }
    fn values(self) -> &'static [&'static str] {
        &[]
    }
}

/// Declares a label enum with its exposition strings, in catalogue order.
macro_rules! label_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $name {
            /// Every value, in the order of the catalogue table.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The label value as exposed.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl LabelSet for $name {
            const ALL: &'static [Self] = $name::ALL;
            fn index(self) -> usize {
                self as usize
            }
            fn values(self) -> &'static [&'static str] {
                match self {
                    $(Self::$variant => &[$text]),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

label_enum! {
    /// `status` of `queuebox_outbox_messages_total`.
    OutboxStatus {
        /// A row marked sent.
        Sent => "sent",
        /// A failed attempt that returns the row to `pending`.
        Failed => "failed",
        /// A row marked dead, for any reason.
        Dead => "dead",
    }
}

/// `table` of the retention families and `component` of `queuebox_claims_lost_total`: the
/// outbox or the inbox, the one enum every crate uses for the two tables.
impl LabelSet for Table {
    const ALL: &'static [Self] = Table::ALL;
    fn index(self) -> usize {
        self as usize
    }
    fn values(self) -> &'static [&'static str] {
        match self {
            Self::Outbox => &["outbox"],
            Self::Inbox => &["inbox"],
        }
    }
}

/// `destination_type` of `queuebox_outbox_publish_duration_seconds`: the configuration's
/// `type` word, from the destination contract's own enum.
impl LabelSet for DestinationType {
    const ALL: &'static [Self] = DestinationType::ALL;
    fn index(self) -> usize {
        self as usize
    }
    fn values(self) -> &'static [&'static str] {
        match self {
            Self::Http => &["http"],
            Self::Rabbitmq => &["rabbitmq"],
            Self::Kafka => &["kafka"],
            Self::Nats => &["nats"],
            Self::Log => &["log"],
        }
    }
}

label_enum! {
    /// `reason` of `queuebox_outbox_destination_held_total`.
    HeldReason {
        RateLimit => "rate_limit",
        CircuitOpen => "circuit_open",
    }
}

label_enum! {
    /// `outcome` of `queuebox_outbox_destination_messages_total`.
    PublishOutcome {
        Success => "success",
        Failure => "failure",
    }
}

label_enum! {
    /// `status_class` of `queuebox_http_publish_responses_total`.
    StatusClass {
        Informational => "1xx",
        Success => "2xx",
        Redirection => "3xx",
        ClientError => "4xx",
        ServerError => "5xx",
        /// A status outside 100–599.
        Other => "other",
    }
}

impl StatusClass {
    /// The class of a raw HTTP status code; the code itself is never a label value (MET-5).
    pub fn of(status: u16) -> Self {
        match status {
            100..=199 => Self::Informational,
            200..=299 => Self::Success,
            300..=399 => Self::Redirection,
            400..=499 => Self::ClientError,
            500..=599 => Self::ServerError,
            _ => Self::Other,
        }
    }
}

label_enum! {
    /// `strategy` of `queuebox_transform_failures_total` (the transform's `onError`).
    TransformStrategy {
        Fail => "fail",
        Skip => "skip",
        Dead => "dead",
    }
}

label_enum! {
    /// `status` of `queuebox_inbox_messages_total`.
    InboxStatus {
        /// A row stored as `pending`.
        New => "new",
        /// A push row relayed to the outbox.
        Forwarded => "forwarded",
        /// A repeat of a stored key.
        Duplicate => "duplicate",
    }
}

label_enum! {
    /// `reason` of `queuebox_inbox_rejections_total`.
    RejectionReason {
        ExtractionFailed => "extraction_failed",
        TransformFailed => "transform_failed",
        StorageFailed => "storage_failed",
    }
}

label_enum! {
    /// `reason` of `queuebox_inbox_webhook_refusals_total`: why an HTTP source answered with an
    /// error.
    RefusalReason {
        /// 401: the authentication check failed.
        Unauthorized => "unauthorized",
        /// 413: the body is over `inbox.maxBodyBytes`.
        TooLarge => "too_large",
        /// 429: the source's rate limit.
        RateLimited => "rate_limited",
        /// 400: the body could not be read.
        UnreadableBody => "unreadable_body",
        /// 400: the body is not JSON.
        InvalidJson => "invalid_json",
        /// 400: valid JSON beyond a parser limit.
        JsonLimit => "json_limit",
        /// 400: no idempotency key found.
        NoKey => "no_key",
        /// 400: the relay topic rendered empty or invalid.
        InvalidTopic => "invalid_topic",
        /// 422: a source transform failed.
        TransformFailed => "transform_failed",
        /// 422: the database refuses the data.
        DataRejected => "data_rejected",
        /// 500: the insert failed.
        StorageFailed => "storage_failed",
        /// 503: QueueBox is shutting down.
        ShuttingDown => "shutting_down",
        /// 503: the intake's memory bound (`inbox.maxPendingBytes`) has no room for the body.
        Overloaded => "overloaded",
        /// 503: the database did not store the message within `inbox.storageWaitMs`.
        StorageTimeout => "storage_timeout",
    }
}

label_enum! {
    /// `port` of `queuebox_http_connections`.
    Port {
        Data => "data",
        Management => "management",
    }
}

label_enum! {
    /// `state` of `queuebox_db_pool_connections`.
    PoolState {
        Active => "active",
        Idle => "idle",
    }
}
