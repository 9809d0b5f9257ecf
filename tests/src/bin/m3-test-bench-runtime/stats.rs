//! Percentiles of latency samples, and what `/proc` says about a process and its children.

use std::path::Path;

/// Percentiles of one series of latencies, in milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Summary {
    pub(crate) n: usize,
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

impl Summary {
    /// The summary of `samples` (`None` when there are none).
    pub(crate) fn of(mut samples: Vec<f64>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
        Some(Self {
            n: samples.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: at(1.0),
        })
    }

    /// `n=.. p50=.. p99=.. max=..`.
    pub(crate) fn line(&self) -> String {
        format!(
            "n={:<4} p50={:>7.2} ms  p99={:>7.2} ms  max={:>7.2} ms",
            self.n, self.p50, self.p99, self.max
        )
    }
}

/// Prints `name  summary  | reference`.
pub(crate) fn print_row(name: &str, summary: Option<Summary>, reference: &str) {
    let figure = summary.map_or_else(|| "no samples".to_owned(), |s| s.line());
    println!("{name:<48} {figure}  | {reference}");
}

/// A field of `/proc/<pid>/status` in kB (`VmRSS`, `VmHWM`, ...).
pub(crate) fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// The fields of `/proc/<pid>/stat` after the command name (field 3 is index 0).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = text.rsplit_once(')')?.1;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// User plus system CPU time of `pid`, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let fields = stat_fields(pid)?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 when unknown).
pub(crate) fn ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100.0)
}

/// Every live descendant of `pid` (children, their children, ...).
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(Path::new("/proc")) {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = stat_fields(child).and_then(|f| f.get(1)?.parse().ok()) {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        next += 1;
    }
    found.remove(0);
    found
}
