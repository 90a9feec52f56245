//! The standard process metrics, named as every Prometheus client library names them
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …), read from `/proc/self` at
//! each scrape. The `prometheus` crate's own collector (its `process` feature) counts CPU in
//! whole seconds and brings procfs with a second rustix; these few files are read here instead.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, IntGauge};
use std::sync::Mutex;

pub struct ProcessCollector {
    cpu: Counter,
    resident: IntGauge,
    virtual_memory: IntGauge,
    open_fds: IntGauge,
    max_fds: IntGauge,
    threads: IntGauge,
    start_time: Gauge,
    descs: Vec<Desc>,
    ticks_per_second: f64,
    page_size: i64,
    /// One scrape at a time: the CPU counter moves by what was used since the last one.
    scraping: Mutex<()>,
}

/// What `/proc/self/stat` says, of what is exported.
#[derive(Debug, PartialEq)]
struct Stat {
    /// User and system CPU time, in clock ticks.
    cpu_ticks: u64,
    threads: i64,
    /// Clock ticks after boot when the process started.
    start_ticks: u64,
    virtual_bytes: i64,
    resident_pages: i64,
}

/// Parses `/proc/PID/stat`: the fields after the command name, which is in parentheses and may
/// hold anything, spaces and parentheses included (proc(5)).
fn parse_stat(text: &str) -> Option<Stat> {
    let after_name = &text[text.rfind(')')? + 1..];
    // Field 3 (state) is the first.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    Some(Stat {
        cpu_ticks: field(14)?.parse::<u64>().ok()? + field(15)?.parse::<u64>().ok()?,
        threads: field(20)?.parse().ok()?,
        start_ticks: field(22)?.parse().ok()?,
        virtual_bytes: field(23)?.parse().ok()?,
        resident_pages: field(24)?.parse().ok()?,
    })
}

/// The soft limit on open files from `/proc/PID/limits` (`None` when unlimited).
fn parse_max_open_files(text: &str) -> Option<i64> {
    let line = text.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// When the machine booted, in seconds since the epoch (`btime` of `/proc/stat`).
fn parse_boot_time(text: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

fn sysconf(name: libc::c_int, fallback: i64) -> i64 {
    // SAFETY: sysconf reads a system constant; it takes no pointer.
    let value = unsafe { libc::sysconf(name) };
    if value > 0 {
        value as i64
    } else {
        fallback
    }
}

impl ProcessCollector {
    pub fn new() -> Self {
        let int_gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("valid metric");
        let collector = ProcessCollector {
            cpu: Counter::new(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            )
            .expect("valid metric"),
            resident: int_gauge("process_resident_memory_bytes", "Resident memory size in bytes."),
            virtual_memory: int_gauge("process_virtual_memory_bytes", "Virtual memory size in bytes."),
            open_fds: int_gauge("process_open_fds", "Number of open file descriptors."),
            max_fds: int_gauge("process_max_fds", "Maximum number of open file descriptors."),
            threads: int_gauge("process_threads", "Number of OS threads in the process."),
            start_time: Gauge::new(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
            )
            .expect("valid metric"),
            descs: Vec::new(),
            ticks_per_second: sysconf(libc::_SC_CLK_TCK, 100) as f64,
            page_size: sysconf(libc::_SC_PAGESIZE, 4096),
            scraping: Mutex::new(()),
        };
        let start = std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(parse_stat);
        let boot = std::fs::read_to_string("/proc/stat").ok().as_deref().and_then(parse_boot_time);
        if let (Some(stat), Some(boot)) = (start, boot) {
            collector.start_time.set(boot + stat.start_ticks as f64 / collector.ticks_per_second);
        }
        let descs = collector.families().iter().flat_map(|m| m.desc()).cloned().collect();
        ProcessCollector { descs, ..collector }
    }

    fn families(&self) -> [&dyn Collector; 7] {
        [
            &self.cpu,
            &self.open_fds,
            &self.max_fds,
            &self.virtual_memory,
            &self.resident,
            &self.start_time,
            &self.threads,
        ]
    }
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one = self.scraping.lock().unwrap_or_else(|e| e.into_inner());
        // Without /proc (not Linux, or not mounted), nothing is exported rather than zeros.
        let Some(stat) = std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(parse_stat)
        else {
            return Vec::new();
        };
        let cpu = stat.cpu_ticks as f64 / self.ticks_per_second;
        let used = cpu - self.cpu.get();
        if used > 0.0 {
            self.cpu.inc_by(used);
        }
        self.resident.set(stat.resident_pages * self.page_size);
        self.virtual_memory.set(stat.virtual_bytes);
        self.threads.set(stat.threads);
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(fds.count() as i64);
        }
        let limits = std::fs::read_to_string("/proc/self/limits").ok();
        if let Some(max) = limits.as_deref().and_then(parse_max_open_files) {
            self.max_fds.set(max);
        }
        self.families().iter().flat_map(|m| m.collect()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_after_a_command_name_holding_spaces_and_parentheses() {
        let line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 7 0 \
                    12345 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                cpu_ticks: 300,
                threads: 7,
                start_ticks: 12345,
                virtual_bytes: 104_857_600,
                resident_pages: 2560
            })
        );
        assert_eq!(parse_stat("4242 (cut"), None);
        assert_eq!(parse_stat("4242 (short) S 1 2"), None);
    }

    #[test]
    fn limits_and_boot_time_are_read_from_their_lines() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max processes             63432                63432                processes \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_open_files(limits), Some(1024));
        assert_eq!(
            parse_max_open_files(
                "Max open files            unlimited            unlimited            files\n"
            ),
            None
        );
        assert_eq!(parse_boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"), Some(1_700_000_000.0));
    }

    #[test]
    fn this_process_is_measured() {
        let registry = prometheus::Registry::new();
        registry.register(Box::new(ProcessCollector::new())).unwrap();
        let families = registry.gather();
        let value = |name: &str| {
            let family = families.iter().find(|f| f.name() == name).unwrap_or_else(|| panic!("no {name}"));
            let metric = &family.get_metric()[0];
            metric.get_gauge().get_value().max(metric.get_counter().get_value())
        };
        assert!(value("process_resident_memory_bytes") > 1_000_000.0);
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        assert!(value("process_threads") >= 1.0);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(started > now - 24.0 * 3600.0 && started <= now + 1.0, "{started} vs {now}");
        assert!(value("process_cpu_seconds_total") >= 0.0);
    }
}
