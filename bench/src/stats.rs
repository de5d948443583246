//! Small measurement helpers: percentiles, resident memory, machine description.

/// Latency summary of a set of samples (nanoseconds).
#[derive(Debug, Clone, Default)]
pub struct Latency {
    pub n: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
    /// p50 of each of the 8 turns.
    pub per_turn_p50_us: Vec<f64>,
}

/// Said above each bench's own table, whose LangGraph column is not from this machine.
pub const REFERENCE_COLUMN: &str = "The LangGraph column holds the reference figures of bench/WORKLOADS.md \
    (LangGraph 1.2.22 on another machine of this class), so a ratio and a verdict here compare with those. \
    scripts/compare.sh runs LangGraph on this machine in the same sitting; BENCHMARKS.md records its verdicts.";

/// Nearest-rank percentile of sorted samples (ns), in µs.
pub fn percentile(sorted: &[u64], p: f64) -> f64 {
    nearest_rank(sorted, p) as f64 / 1_000.0
}

/// The nearest-rank `p`th percentile of ascending `sorted`, as it is (0 when empty).
pub fn nearest_rank(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// `samples` are per-turn latencies in turn order, 8 per conversation.
pub fn latency(samples: &[u64]) -> Latency {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let per_turn_p50_us = (0..8)
        .map(|t| {
            let mut turn: Vec<u64> = samples.iter().skip(t).step_by(8).copied().collect();
            turn.sort_unstable();
            percentile(&turn, 50.0)
        })
        .collect();
    Latency {
        n: samples.len(),
        p50_us: percentile(&sorted, 50.0),
        p99_us: percentile(&sorted, 99.0),
        mean_us: sorted.iter().sum::<u64>() as f64 / sorted.len().max(1) as f64 / 1_000.0,
        max_us: sorted.last().copied().unwrap_or(0) as f64 / 1_000.0,
        per_turn_p50_us,
    }
}

/// VmRSS of this process, in bytes.
pub fn vm_rss() -> u64 {
    status_kb("VmRSS:") * 1024
}

fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    parse_status_kb(&status, key).unwrap_or(0)
}

/// The value of `key` (with its colon, e.g. `VmHWM:`) in a `/proc/<pid>/status` text, in kB.
pub fn parse_status_kb(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The machine's CPUs (`processor` entries of /proc/cpuinfo), whatever this process may use.
pub fn machine_cpus() -> usize {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo.lines().filter(|l| l.starts_with("processor")).count().max(1)
}

/// The CPUs this process may run on (`Cpus_allowed_list`, e.g. `0-1`, or `0` under
/// `taskset -c 0`): a per-turn figure measured on one CPU and one measured across two differ
/// by the cost of waking a thread on the other CPU.
pub fn cpus_allowed() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map_or_else(|| "unknown".to_owned(), |v| v.trim().to_owned())
}

pub fn mem_total_gib() -> f64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kb / 1024.0 / 1024.0
}

pub fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

pub fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned())
}

pub fn rustc_version() -> String {
    std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|x| x * 1_000).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
    }
}
