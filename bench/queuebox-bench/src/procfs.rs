//! Readings from `/proc`: a process's resident set (now and peak) and CPU time, the load
//! average, and the machine (cores, memory, CPU model) for the report's header.

use std::fs;

/// `VmRSS` and `VmHWM` of a process, in kB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    pub rss_kb: u64,
    pub peak_kb: u64,
}

/// A `kB` field of `/proc/<pid>/status`, e.g. `VmHWM:\t  10240 kB`.
pub fn status_kb(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

pub fn memory(pid: u32) -> std::io::Result<Memory> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name| {
        status_kb(&status, name)
            .ok_or_else(|| std::io::Error::other(format!("/proc/{pid}/status has no {name} line")))
    };
    Ok(Memory {
        rss_kb: field("VmRSS")?,
        peak_kb: field("VmHWM")?,
    })
}

/// User + system CPU time in clock ticks from `/proc/<pid>/stat` (fields 14 and 15; the
/// command name in parentheses may hold spaces, so counting starts after the last `)`).
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    // After ")": field 3 (state) is the first; utime is field 14, stime field 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds used so far by `pid`, assuming the usual 100 ticks per second (`getconf
/// CLK_TCK` on Linux x86-64 and arm64).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_cpu_ticks(&stat).map(|t| t as f64 / 100.0)
}

/// The three load averages, as `/proc/loadavg` prints them.
pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The machine, for the report.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cores: usize,
    pub mem_total_kb: u64,
    pub cpu_model: String,
}

pub fn machine() -> Machine {
    let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Machine {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        mem_total_kb: status_kb(&meminfo, "MemTotal").unwrap_or(0),
        cpu_model: cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
            .map_or_else(|| "unknown".to_owned(), |(_, m)| m.trim().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_in_kb() {
        let status = "Name:\tqueuebox\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(status_kb(status, "VmHWM"), Some(20480));
        assert_eq!(status_kb(status, "VmRSS"), Some(10240));
        assert_eq!(status_kb(status, "VmSwap"), None);
    }

    #[test]
    fn cpu_ticks_skip_a_command_name_with_spaces() {
        let stat = "42 (a b) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 4 0 1 2 3";
        assert_eq!(stat_cpu_ticks(stat), Some(300));
    }
}
