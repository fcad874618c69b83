//! What machine the numbers come from: CPU, cores, kernel, memory, load.

use std::fs;

/// A description of the machine, read from `/proc`.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// CPU model name (`model name` in `/proc/cpuinfo`), or `unknown CPU`.
    pub cpu: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: String,
    /// Total memory in kB (`MemTotal` in `/proc/meminfo`).
    pub mem_total_kb: Option<u64>,
}

impl Machine {
    /// Reads the description; missing files give `unknown` fields, not errors.
    #[must_use]
    pub fn read() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self {
            cpu: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown CPU".into()),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "unknown".into(), |k| k.trim().to_owned()),
            mem_total_kb: meminfo_kb(&meminfo, "MemTotal"),
        }
    }

    /// One line for the report, e.g. `AMD EPYC 7B13, 2 CPUs, 23.5 GiB, Linux 6.18.0`.
    #[must_use]
    pub fn summary(&self) -> String {
        let mem = self.mem_total_kb.map_or_else(String::new, |kb| {
            format!(", {:.1} GiB", kb as f64 / (1024.0 * 1024.0))
        });
        format!(
            "{}, {} CPUs{mem}, Linux {}",
            self.cpu, self.cpus, self.kernel
        )
    }
}

/// The first `model name` of a `/proc/cpuinfo` text.
#[must_use]
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_owned())
    })
}

/// A `kB` field of a `/proc/meminfo` (or `/proc/<pid>/status`) text.
#[must_use]
pub fn meminfo_kb(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        if key != field {
            return None;
        }
        value.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// The 1-, 5- and 15-minute load averages, from a `/proc/loadavg` text.
#[must_use]
pub fn load_average(loadavg: &str) -> Option<[f64; 3]> {
    let mut fields = loadavg.split_whitespace().map(str::parse::<f64>);
    Some([
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    ])
}

/// The load averages now, if `/proc/loadavg` is readable.
#[must_use]
pub fn current_load() -> Option<[f64; 3]> {
    load_average(&fs::read_to_string("/proc/loadavg").ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_model_name_of_cpuinfo_is_the_cpu() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn meminfo_fields_are_read_in_kilobytes() {
        let meminfo = "MemTotal:       24684084 kB\nMemFree:         1000 kB\n";
        assert_eq!(meminfo_kb(meminfo, "MemTotal"), Some(24_684_084));
        assert_eq!(meminfo_kb(meminfo, "MemAvailable"), None);
        assert_eq!(meminfo_kb("VmRSS:\t    7728 kB\n", "VmRSS"), Some(7728));
    }

    #[test]
    fn loadavg_gives_three_averages() {
        assert_eq!(
            load_average("4.06 4.76 4.32 3/512 12345\n"),
            Some([4.06, 4.76, 4.32])
        );
        assert_eq!(load_average("4.06\n"), None);
    }
}
