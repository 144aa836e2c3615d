//! `docs/benchmarks.md`: the outbox section rendered from an [`Outcome`], and spliced between
//! its markers so the other benchmarks' sections (inbox intake, relay, pull) stay as written.
//! Every figure is cut, never rounded up (`stats::down`).

use std::fmt::Write as _;

use crate::driver::{Drain, Outcome, Steady};
use crate::stats::{down, grouped};

pub const BEGIN: &str =
    "<!-- outbox-benchmark:begin: written by bench/outbox.sh; edits inside are overwritten -->";
pub const END: &str = "<!-- outbox-benchmark:end -->";

/// The page a first run creates, before any section.
const PAGE_HEAD: &str = "\
# Benchmarks

Each benchmark is one command that writes its section of this page (quality.md, \"Benchmarks\").
Every figure is measured beside a floor or a peer in the same run, because the machines are
shared and noisy: the ratio measured side by side is the figure that counts. Figures are cut,
never rounded up.

| Benchmark | Command | Section |
|---|---|---|
| outbox drain and steady | `bench/outbox.sh` | [Outbox](#outbox-drain-and-steady) |
";

/// Replaces the outbox section of `page` (or creates the page, or appends the section).
pub fn splice(page: Option<&str>, section: &str) -> String {
    let block = format!("{BEGIN}\n{}\n{END}", section.trim_end());
    let Some(page) = page else {
        return format!("{PAGE_HEAD}\n{block}\n");
    };
    match (page.find(BEGIN), page.find(END)) {
        (Some(b), Some(e)) if e > b => {
            format!("{}{block}{}", &page[..b], &page[e + END.len()..])
        }
        _ => format!("{}\n\n{block}\n", page.trim_end()),
    }
}

/// Decimal megabytes (10^6 bytes) of a kB (KiB) figure from /proc.
fn mb(kb: u64) -> f64 {
    kb as f64 * 1024.0 / 1e6
}

fn yes(met: bool) -> &'static str {
    if met { "yes" } else { "**no**" }
}

fn label(d: &Drain) -> String {
    if d.concurrency_is_default {
        format!("concurrency {} (default)", d.concurrency)
    } else {
        format!("concurrency {}", d.concurrency)
    }
}

/// The outbox section, between (not including) the markers.
pub fn render(o: &Outcome) -> String {
    let i = &o.info;
    let m = &i.machine;
    let floor = o
        .floors
        .iter()
        .map(|f| f.rows_per_s())
        .fold(0.0f64, f64::max);
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(w, "## Outbox: drain and steady\n");
    let _ = writeln!(
        w,
        "Command: `bench/outbox.sh` (what it does: [bench/README.md](../bench/README.md)).\n"
    );
    let _ = writeln!(w, "- Run: {} UTC, commit {}.", i.date, i.commit);
    let _ = writeln!(
        w,
        "- Machine: {} cores ({}), {} GB memory.",
        m.cores,
        m.cpu_model,
        down(mb(m.mem_total_kb) / 1000.0, 1)
    );
    let settings: Vec<String> = i
        .server
        .iter()
        .filter(|(k, _)| k != "server_version")
        .map(|(k, v)| format!("`{k}` {v}"))
        .collect();
    let version = i
        .server
        .iter()
        .find(|(k, _)| k == "server_version")
        .map_or("?", |(_, v)| v.as_str());
    let _ = writeln!(
        w,
        "- PostgreSQL {version} on the same machine (127.0.0.1), untuned: {}.",
        settings.join(", ")
    );
    let _ = writeln!(
        w,
        "- Load average (1, 5, 15 min) at the start: {}; at the end: {}. The lead's test suites \
         may have run at the same time on these 2 cores; per-phase figures are in the tables.",
        i.load_start, i.load_end
    );
    let _ = writeln!(
        w,
        "- Rows: {} pending rows, inserted in one `INSERT … SELECT … generate_series` (one \
         transaction); every tenth row has a NULL key, the others take `k0`..`k999` round robin \
         ({} rows per key); topic `bench.order.created`; JSON payload of {} bytes on average; \
         `created_at` = `clock_timestamp()` of each row. The same transaction runs `ANALYZE \
         outbox`: this server has `autovacuum` off, and without statistics the claim's plan \
         scans every pending row (bench/README.md, \"Statistics\"). The steady phase does not \
         analyze.",
        grouped(i.rows),
        i.rows * 9 / 10 / 1000,
        down(i.payload_bytes, 1)
    );
    let _ = writeln!(
        w,
        "- QueueBox: the release build, one `http` destination to `qb-receiver` (hyper, \
         HTTP/1.1, 127.0.0.1, answers 200 to everything) and a `**` route; `outbox.batchSize` \
         {}; every other setting at its default (`pollIntervalMs` 100, `poolSize` 10, the inbox \
         relay on). No inbox source.",
        i.batch_size
    );
    let _ = writeln!(
        w,
        "- Memory is in MB of 10^6 bytes. Idle RSS: `VmRSS` 3 s after `QueueBox started`, with \
         an empty outbox. Peak RSS: `VmHWM` when the phase's last row was marked.\n"
    );

    let _ = writeln!(w, "### Drain of {} rows\n", grouped(i.rows));
    let _ = write!(w, "| |");
    for d in &o.drains {
        let _ = write!(w, " {} |", label(d));
    }
    let _ = writeln!(w, "\n|---|{}", "---|".repeat(o.drains.len()));
    let row = |w: &mut String, name: &str, f: &dyn Fn(&Drain) -> String| {
        let _ = write!(w, "| {name} |");
        for d in &o.drains {
            let _ = write!(w, " {} |", f(d));
        }
        let _ = writeln!(w);
    };
    row(w, "**msgs/s** (INSERT commit → last delivery)", &|d| {
        format!("**{}**", grouped(d.msgs_per_s() as u64))
    });
    row(w, "**ratio to the SQL floor**", &|d| {
        format!("**{}**", down(d.msgs_per_s() / floor, 2))
    });
    row(w, "drain time (INSERT commit → last delivery)", &|d| {
        format!("{} s", down(d.drain_s, 2))
    });
    row(w, "first → last delivery", &|d| {
        format!("{} s", down(d.first_to_last_s, 2))
    });
    row(w, "INSERT commit → every row marked `sent`", &|d| {
        format!("{} s", down(d.marked_s, 2))
    });
    row(w, "the INSERT and ANALYZE of all rows took", &|d| {
        format!("{} ms", down(d.insert_ms, 0))
    });
    row(w, "insert-to-delivery p50", &|d| {
        format!("{} ms", down(d.latency.p50_ms, 1))
    });
    row(w, "insert-to-delivery p99", &|d| {
        format!("{} ms", down(d.latency.p99_ms, 1))
    });
    row(w, "insert-to-delivery max", &|d| {
        format!("{} ms", down(d.latency.max_ms, 1))
    });
    row(
        w,
        "claim statements (scans of `idx_outbox_pending`) / rows per claim",
        &|d| {
            format!(
                "{} / {}",
                grouped(d.index_scans.max(0) as u64),
                down(d.rows as f64 / d.index_scans.max(1) as f64, 1)
            )
        },
    );
    row(w, "rows per claim: p10 / p50 / p90 / mean (claims)", &|d| {
        d.claim_sizes.clone()
    });
    row(w, "idle RSS", &|d| {
        format!("{} MB", down(mb(d.idle.rss_kb), 1))
    });
    row(w, "peak RSS", &|d| {
        format!("{} MB", down(mb(d.end.peak_kb), 1))
    });
    row(w, "queuebox CPU time (user + system)", &|d| {
        format!("{} s", down(d.cpu_s, 2))
    });
    row(w, "delivered / duplicates / missing", &|d| {
        format!(
            "{} / {} / {}",
            grouped(d.latency.delivered as u64),
            d.latency.duplicates,
            d.latency.missing
        )
    });
    row(w, "final states", &|d| d.states.clone());
    row(w, "warnings and errors logged", &|d| {
        d.complaints.to_string()
    });
    row(w, "load average before → after", &|d| {
        format!("{} → {}", d.load_before, d.load_after)
    });
    let _ = writeln!(
        w,
        "\nThe rows only become visible when the one INSERT commits, so a row's insert-to-delivery \
         latency includes the rest of that INSERT and its wait in the backlog: in a drain it \
         measures the backlog, not the poller's reaction time (the steady phase does). The claim \
         statements are counted as the scans of the partial index `idx_outbox_pending`, which \
         the claim's plan starts once per statement (plus one per pending-gauge refresh, every \
         5 s).\n"
    );

    let _ = writeln!(w, "### SQL floor\n");
    let _ = writeln!(
        w,
        "`qb-sql-floor` runs QueueBox's own statements through the PostgreSQL store on a fresh copy of the \
         same rows: `OutboxStore::claim({})` then `finish` with `Sent` for every claimed row, \
         one after the other on one claimer, until a claim returns nothing; no delivery. \
         (QueueBox itself also has one claimer, but marks from a separate writer task while it \
         claims.) It ran before and after the two drains; the ratios above use the faster of \
         the two runs.\n",
        i.batch_size
    );
    let _ = writeln!(
        w,
        "| run | rows/s | time | claim statements (scans of `idx_outbox_pending`) | load average before → after |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|");
    for (n, f) in o.floors.iter().enumerate() {
        let _ = writeln!(
            w,
            "| {} | {} | {} s | {} ({}) | {} → {} |",
            n + 1,
            grouped(f.rows_per_s() as u64),
            down(f.seconds, 2),
            grouped(f.claims),
            grouped(f.index_scans.max(0) as u64),
            f.load_before,
            f.load_after
        );
    }

    let st = &o.steady;
    let mut runs: Vec<&Steady> = vec![st];
    runs.extend(o.steady_notify.as_ref());
    runs.extend(o.fine.iter());
    let _ = writeln!(w, "\n### Steady producer\n");
    let _ = writeln!(
        w,
        "A producer inserts {} rows/s into a running QueueBox for {} s: one `INSERT … SELECT` of \
         {} rows every {} ms, each its own statement and transaction (autocommit), on one \
         connection. QueueBox: `concurrency` {} (the default); the first run polls with the \
         default `pollIntervalMs` {}; the second, when present, runs in the same run with \
         `capture.mode: notify` (LISTEN/NOTIFY wake-ups, OUT-57) and `pollIntervalMs` 5000. \
         The runs in smaller ticks, when present, repeat both at the same rate: a producer that \
         commits every few milliseconds, where the first two see bursts of {} rows, each of \
         which one claim takes whole (a claim asks for `batchSize` minus what is held, OUT-54) \
         and the publish slots then deliver {} at a time.\n",
        grouped(st.target_rate),
        st.seconds,
        st.rows_per_tick,
        st.tick_ms,
        st.concurrency,
        st.poll_interval_ms,
        st.rows_per_tick,
        st.concurrency
    );
    let _ = write!(w, "| |");
    for r in &runs {
        let _ = write!(
            w,
            " {}, `pollIntervalMs` {}, {} rows every {} ms |",
            r.capture, r.poll_interval_ms, r.rows_per_tick, r.tick_ms
        );
    }
    let _ = writeln!(w, "\n|---|{}", "---|".repeat(runs.len()));
    let srow = |w: &mut String, name: &str, f: &dyn Fn(&Steady) -> String| {
        let _ = write!(w, "| {name} |");
        for r in &runs {
            let _ = write!(w, " {} |", f(r));
        }
        let _ = writeln!(w);
    };
    srow(w, "rows produced / achieved rate", &|r| {
        format!("{} / {} rows/s", grouped(r.rows), down(r.achieved_rate, 1))
    });
    srow(w, "INSERTs slower than one tick / INSERT p99", &|r| {
        format!("{} / {} ms", r.late_inserts, down(r.insert_p99_ms, 1))
    });
    srow(w, "**insert-to-delivery p50 / p99**", &|r| {
        format!(
            "**{} ms / {} ms**",
            down(r.latency.p50_ms, 1),
            down(r.latency.p99_ms, 1)
        )
    });
    srow(w, "insert-to-delivery max", &|r| {
        format!("{} ms", down(r.latency.max_ms, 1))
    });
    srow(w, "idle RSS / peak RSS", &|r| {
        format!(
            "{} MB / {} MB",
            down(mb(r.idle.rss_kb), 1),
            down(mb(r.end.peak_kb), 1)
        )
    });
    srow(w, "queuebox CPU time", &|r| {
        format!("{} s", down(r.cpu_s, 2))
    });
    srow(w, "delivered / duplicates / missing", &|r| {
        format!(
            "{} / {} / {}",
            grouped(r.latency.delivered as u64),
            r.latency.duplicates,
            r.latency.missing
        )
    });
    srow(w, "final states", &|r| r.states.clone());
    srow(w, "warnings and errors logged", &|r| {
        r.complaints.to_string()
    });
    srow(w, "load average before → after", &|r| {
        format!("{} → {}", r.load_before, r.load_after)
    });

    if let Some((hd, hf)) = &o.hot {
        let _ = writeln!(w, "\n### One hot key\n");
        let _ = writeln!(
            w,
            "{} pending rows, all of the one key `hot` (otherwise the rows above), inserted and \
             analyzed in one transaction; QueueBox at its defaults drains them to the receiver, \
             one row of the key published at a time, each after the previous one's `sent`, the \
             rows claimed in runs of up to `outbox.keyRunLength` (OUT-13, OUT-13a). The SQL \
             floor runs `qb-sql-floor` on a fresh copy of the same rows: claim, then mark \
             `sent`, until a claim returns nothing (one row per claim, as a key allows without \
             runs).\n",
            grouped(hd.rows)
        );
        let _ = writeln!(w, "| | |\n|---|---|");
        let _ = writeln!(
            w,
            "| **QueueBox msgs/s** (INSERT commit → last delivery) | **{}** |",
            grouped(hd.msgs_per_s() as u64)
        );
        let _ = writeln!(
            w,
            "| SQL floor rows/s ({} claims, {} s) | {} |",
            grouped(hf.claims),
            down(hf.seconds, 2),
            grouped(hf.rows_per_s() as u64)
        );
        let _ = writeln!(
            w,
            "| **ratio to the floor** | **{}** |",
            down(hd.msgs_per_s() / hf.rows_per_s(), 2)
        );
        let _ = writeln!(
            w,
            "| delivered / duplicates / missing | {} / {} / {} |",
            grouped(hd.latency.delivered as u64),
            hd.latency.duplicates,
            hd.latency.missing
        );
        let _ = writeln!(
            w,
            "| claim statements (scans of `idx_outbox_pending`) | {} |",
            grouped(hd.index_scans.max(0) as u64)
        );
        let _ = writeln!(w, "| queuebox CPU time | {} s |", down(hd.cpu_s, 2));
        let _ = writeln!(w, "| final states | {} |", hd.states);
        let _ = writeln!(
            w,
            "| load average before → after (drain; floor) | {} → {}; {} → {} |",
            hd.load_before, hd.load_after, hf.load_before, hf.load_after
        );
    }

    let _ = writeln!(w, "\n### Aims\n");
    let _ = writeln!(w, "| Aim | Measured | Met |\n|---|---|---|");
    let mut short = Vec::new();
    for d in &o.drains {
        let rate = d.msgs_per_s();
        let ratio = rate / floor;
        let l = label(d);
        let _ = writeln!(
            w,
            "| drain ≥ 10,000 msgs/s, {l} | {} msgs/s | {} |",
            grouped(rate as u64),
            yes(rate >= 10_000.0)
        );
        if rate < 10_000.0 {
            short.push(format!(
                "the drain with {l} delivered {} msgs/s, below the aim of 10,000",
                grouped(rate as u64)
            ));
        }
        let _ = writeln!(
            w,
            "| drain ≥ 0.7 × SQL floor (issue 16), {l} | {} × ({} of {} rows/s) | {} |",
            down(ratio, 2),
            grouped(rate as u64),
            grouped(floor as u64),
            yes(ratio >= 0.7)
        );
        if ratio < 0.7 {
            short.push(format!(
                "the drain with {l} reached {} of the SQL floor ({} of {} rows/s), below the aim of 0.7",
                down(ratio, 2),
                grouped(rate as u64),
                grouped(floor as u64)
            ));
        }
    }
    let idle_kb = o
        .drains
        .iter()
        .map(|d| d.idle.rss_kb)
        .chain([st.idle.rss_kb])
        .max()
        .unwrap_or(0);
    let peak_kb = o
        .drains
        .iter()
        .map(|d| d.end.peak_kb)
        .chain([st.end.peak_kb])
        .max()
        .unwrap_or(0);
    let idle_ok = mb(idle_kb) < 64.0;
    let peak_ok = mb(peak_kb) < 256.0;
    let _ = writeln!(
        w,
        "| idle RSS < 64 MB (highest of the three runs) | {} MB | {} |",
        down(mb(idle_kb), 1),
        yes(idle_ok)
    );
    let _ = writeln!(
        w,
        "| peak RSS < 256 MB (highest of the three runs) | {} MB | {} |",
        down(mb(peak_kb), 1),
        yes(peak_ok)
    );
    if !idle_ok {
        short.push(format!(
            "idle RSS was {} MB, above 64 MB",
            down(mb(idle_kb), 1)
        ));
    }
    if !peak_ok {
        short.push(format!(
            "peak RSS was {} MB, above 256 MB",
            down(mb(peak_kb), 1)
        ));
    }
    let p99_ok = st.latency.p99_ms < 250.0;
    let _ = writeln!(
        w,
        "| steady {} rows/s: p99 insert-to-delivery < 250 ms | {} ms | {} |",
        grouped(st.target_rate),
        down(st.latency.p99_ms, 1),
        yes(p99_ok)
    );
    if !p99_ok {
        short.push(format!(
            "at a steady {} rows/s the p99 insert-to-delivery latency was {} ms, above 250 ms",
            grouped(st.target_rate),
            down(st.latency.p99_ms, 1)
        ));
    }
    // Each notify run beside the polling run of the same ticks.
    let pairs = [
        o.steady_notify.as_ref().map(|n| (n, st)),
        o.fine.get(1).zip(o.fine.first()),
    ];
    for (n, polling) in pairs.into_iter().flatten() {
        let ok = n.latency.p99_ms <= 15.0;
        let _ = writeln!(
            w,
            "| steady {} rows/s ({} rows every {} ms) with notify, `pollIntervalMs` {}: p99 ≤ 15 ms | {} ms (polling: {} ms) | {} |",
            grouped(n.target_rate),
            n.rows_per_tick,
            n.tick_ms,
            n.poll_interval_ms,
            down(n.latency.p99_ms, 1),
            down(polling.latency.p99_ms, 1),
            yes(ok)
        );
        if !ok {
            short.push(format!(
                "with notify and {} rows every {} ms the steady p99 was {} ms, above 15 ms",
                n.rows_per_tick,
                n.tick_ms,
                down(n.latency.p99_ms, 1)
            ));
        }
    }
    if let Some((hd, _)) = &o.hot {
        let rate = hd.msgs_per_s();
        let ok = rate >= 1000.0;
        let _ = writeln!(
            w,
            "| one key's {} pending rows drain at ≥ 1,000 msgs/s | {} msgs/s | {} |",
            grouped(hd.rows),
            grouped(rate as u64),
            yes(ok)
        );
        if !ok {
            short.push(format!(
                "one key's backlog drained at {} msgs/s, below 1,000",
                grouped(rate as u64)
            ));
        }
    }
    let lost: usize = o
        .drains
        .iter()
        .map(|d| d.latency.missing)
        .chain([st.latency.missing])
        .sum();
    if lost > 0 {
        short.push(format!("{lost} rows were never received"));
    }

    let _ = writeln!(w, "\n### Where it falls short\n");
    if short.is_empty() {
        let _ = writeln!(w, "In this run every aim was met.");
    } else {
        let mut text = String::from("In this run ");
        text.push_str(&short.join("; "));
        text.push('.');
        let _ = writeln!(w, "{text}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_creates_replaces_and_appends() {
        let created = splice(None, "## A\n1\n");
        assert!(created.starts_with("# Benchmarks"));
        assert!(created.contains(&format!("{BEGIN}\n## A\n1\n{END}")));

        let page = format!("# B\n\nbefore\n\n{BEGIN}\nold\n{END}\n\n## Inbox\nkept\n");
        let replaced = splice(Some(&page), "new");
        assert_eq!(
            replaced,
            format!("# B\n\nbefore\n\n{BEGIN}\nnew\n{END}\n\n## Inbox\nkept\n")
        );

        let appended = splice(Some("# B\n\n## Inbox\n"), "new");
        assert!(appended.starts_with("# B\n\n## Inbox\n\n"));
        assert!(appended.ends_with(&format!("{BEGIN}\nnew\n{END}\n")));
    }
}
