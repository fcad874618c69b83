//! The plugin's system-call filter (seccomp): which mode is asked for.
//!
//! Enforcement (the filter itself, built in the parent and loaded between fork and exec)
//! follows; this module holds the knob that builders and manifests set.

use serde::Deserialize;

/// Whether a seccomp filter confines the plugin's system calls.
///
/// Written in manifests as `seccomp = "default" | "off"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SeccompMode {
    /// tether's default filter: calls that reach beyond the plugin's own process tree
    /// (`ptrace`, `prlimit64` on other pids, …), kernel-wide state (`mount`, `bpf`, `kexec_*`,
    /// modules, clocks, keyrings, …), new namespaces and terminal input injection are refused.
    #[default]
    Default,
    /// No system-call filter. An explicit opt-out for plugins that need a refused call.
    Off,
}

impl std::fmt::Display for SeccompMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Off => "off",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct T {
        m: SeccompMode,
    }

    #[test]
    fn modes_are_written_as_manifests_spell_them_and_default_to_the_safe_one() {
        for (text, mode) in [("default", SeccompMode::Default), ("off", SeccompMode::Off)] {
            let t: T = toml::from_str(&format!("m = \"{text}\"")).unwrap();
            assert_eq!(t.m, mode);
            assert_eq!(mode.to_string(), text);
        }
        assert_eq!(SeccompMode::default(), SeccompMode::Default);
        assert!(toml::from_str::<T>("m = \"loose\"").is_err());
    }
}
