//! Pinned placements: the host (or the floor's parent) and its plugin (or echo child) on one
//! CPU, or on two, chosen with `sched_setaffinity` instead of left to the scheduler.
//!
//! Left alone, the floor's two processes sometimes shared a CPU (a 64 B round trip of ≈ 4 µs:
//! two context switches) and sometimes not (≈ 60 µs: on this VM each wake-up of an idle CPU
//! costs ≈ 25 µs), so one run read the floor as 61 µs and another as 7.7–9.0 µs, and "unary ≤
//! 2.5× the floor" was judged on whichever came up. Each placement is now measured for the
//! floor and for tether side by side, in the same rounds.

use super::measurement::Measurement;

/// Where the two processes of a measurement run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Host and plugin on the same one CPU (the plugin inherits the host's placement).
    OneCpu,
    /// The host on one CPU, the plugin on another.
    TwoCpus,
}

/// The CPUs of a placement: the host's, and the one its plugin is moved to (none: it stays
/// with the host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// The CPU the host process (all its threads, and what it starts) is pinned to.
    pub host: usize,
    /// The CPU the plugin is pinned to once started (`--plugin-cpu`), if not the host's.
    pub plugin: Option<usize>,
}

impl Pinned {
    /// The driver options that pin the plugin (`kv-bench` and `pingpong` both take them).
    #[must_use]
    pub fn args(&self) -> Vec<String> {
        self.plugin
            .map(|cpu| vec!["--plugin-cpu".into(), cpu.to_string()])
            .unwrap_or_default()
    }
}

/// The measurement each placement makes, for the floor and for tether: 64 B sequential calls.
pub const PINNED_MEASUREMENT: Measurement = Measurement::Unary { size: 64 };

impl Placement {
    /// Both, in report order.
    pub const ALL: [Self; 2] = [Self::OneCpu, Self::TwoCpus];

    /// Its CPUs among `allowed` (the harness's own, in increasing order): the first one, and
    /// for two CPUs the second; or why it cannot be made here.
    ///
    /// # Errors
    /// Fewer CPUs allowed than the placement needs.
    pub fn pinned(self, allowed: &[usize]) -> Result<Pinned, String> {
        match (self, allowed) {
            (Self::OneCpu, [host, ..]) => Ok(Pinned {
                host: *host,
                plugin: None,
            }),
            (Self::TwoCpus, [host, plugin, ..]) => Ok(Pinned {
                host: *host,
                plugin: Some(*plugin),
            }),
            _ => Err(format!(
                "{} needs more CPUs than the {} this process may use",
                self.label(),
                allowed.len()
            )),
        }
    }

    /// How the report names it.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::OneCpu => "both on one CPU",
            Self::TwoCpus => "on two CPUs",
        }
    }

    /// The system id of tether's (`floor: false`) or the floor's values in this placement.
    #[must_use]
    pub fn id(self, floor: bool) -> &'static str {
        match (self, floor) {
            (Self::OneCpu, false) => "tether-one-cpu",
            (Self::OneCpu, true) => "floor-one-cpu",
            (Self::TwoCpus, false) => "tether-two-cpus",
            (Self::TwoCpus, true) => "floor-two-cpus",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cpu_keeps_the_plugin_with_the_host_and_two_cpus_moves_it_to_the_second() {
        let one = Placement::OneCpu.pinned(&[2, 5]).unwrap();
        assert_eq!(
            one,
            Pinned {
                host: 2,
                plugin: None
            }
        );
        assert!(one.args().is_empty());
        let two = Placement::TwoCpus.pinned(&[2, 5, 7]).unwrap();
        assert_eq!(two.args(), ["--plugin-cpu", "5"]);
        let err = Placement::TwoCpus.pinned(&[0]).unwrap_err();
        assert!(err.contains("the 1 this process may use"), "{err}");
        assert!(Placement::OneCpu.pinned(&[]).is_err());
    }
}
