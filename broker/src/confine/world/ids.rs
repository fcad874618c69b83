//! Which user and group ids a world maps, and which one its plugin runs as. Pure.
//!
//! - A **root host** maps a range of unprivileged ids into each world, inside = outside
//!   ([`PluginIds`], default [`DEFAULT_PLUGIN_IDS`]); uid 0 is not mapped, so a plugin holds
//!   host root over no inode (files of host root show as `nobody` and cannot be changed). Its
//!   first id is the keeper's; each plugin runs as one of the others, the same for the same
//!   plugin name (so a supervisor's state directory stays its own across restarts), another one
//!   than this host's other live plugins when the range allows.
//! - A **non-root host** maps itself to itself (the only map an unprivileged process may
//!   write), with `setgroups` denied as the kernel requires.
//! - **`run_as`** maps exactly that uid and gid; uid 0 only where the caller allowed it.

use std::collections::HashSet;

/// The user and group ids the plugins of a root host run as (a non-root host's run as the
/// host's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PluginIds {
    /// `count` ids from `first` (uids and gids alike): the first is the worlds' keeper's, each
    /// plugin runs as one of the others.
    Range {
        /// The first id.
        first: u32,
        /// How many ids (at least 2).
        count: u32,
    },
    /// Every plugin (and keeper) runs as this one id.
    One(u32),
}

/// The default ids of a root host's plugins: 65,536 ids from `0x7F00_0000` (2130706432), in
/// the block systemd's `UIDS-GIDS.md` lists as unused (1879048192…2147483647), below the
/// 31-bit boundary and clear of its container and foreign ranges.
pub const DEFAULT_PLUGIN_IDS: PluginIds = PluginIds::Range {
    first: 0x7F00_0000,
    count: 65_536,
};

/// One line of a `uid_map`/`gid_map`: `count` ids from `first`, the same inside and outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct IdRange {
    pub(crate) first: u32,
    pub(crate) count: u32,
}

impl IdRange {
    /// The map line the kernel takes.
    pub(crate) fn map_line(self) -> String {
        format!("{} {} {}", self.first, self.first, self.count)
    }

    fn contains(self, id: u32) -> bool {
        id >= self.first && id - self.first < self.count
    }
}

/// What a world's user namespace maps and who its keeper is: worlds with equal values are
/// interchangeable (the reserve keeps them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct WorldIds {
    pub(crate) uids: IdRange,
    pub(crate) gids: IdRange,
    /// The keeper's uid and gid.
    pub(crate) keeper: (u32, u32),
    /// Whether the map is written by a host that may allow `setgroups` (root): then the world's
    /// processes drop their supplementary groups.
    pub(crate) setgroups: bool,
}

/// Why a launch's ids cannot be mapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdError {
    /// `run_as` uid or gid 0 without the operator's explicit permission.
    #[error(
        "the plugin would run as the host's root (uid 0 or gid 0); allow it explicitly (grants: `allow_root = true`) or choose another user"
    )]
    RootNotAllowed,
    /// A range with fewer than two ids, or one that would include 0 or overflow.
    #[error(
        "the plugin id range {first}+{count} is not usable: it needs at least 2 ids, none of them 0, all below 2^32-1"
    )]
    BadRange {
        /// Its first id.
        first: u32,
        /// Its length.
        count: u32,
    },
}

impl WorldIds {
    /// The world of a host with effective ids `host` (uid, gid) for a plugin configured with
    /// `run_as`, `root_allowed` and the root host's `ids`.
    pub(crate) fn new(
        host: (u32, u32),
        run_as: Option<(u32, u32)>,
        root_allowed: bool,
        ids: PluginIds,
    ) -> Result<Self, IdError> {
        if host.0 != 0 {
            // A non-root host may only map itself (`run_as` is refused earlier for it).
            return Ok(Self::one(host, false));
        }
        if let Some((uid, gid)) = run_as {
            if (uid == 0 || gid == 0) && !root_allowed {
                return Err(IdError::RootNotAllowed);
            }
            return Ok(Self::one((uid, gid), true));
        }
        match ids {
            PluginIds::One(id) if id != 0 => Ok(Self::one((id, id), true)),
            PluginIds::One(_) => Err(IdError::BadRange { first: 0, count: 1 }),
            PluginIds::Range { first, count }
                if first != 0 && count >= 2 && first.checked_add(count).is_some() =>
            {
                let range = IdRange { first, count };
                Ok(Self {
                    uids: range,
                    gids: range,
                    keeper: (first, first),
                    setgroups: true,
                })
            }
            PluginIds::Range { first, count } => Err(IdError::BadRange { first, count }),
        }
    }

    fn one((uid, gid): (u32, u32), setgroups: bool) -> Self {
        Self {
            uids: IdRange {
                first: uid,
                count: 1,
            },
            gids: IdRange {
                first: gid,
                count: 1,
            },
            keeper: (uid, gid),
            setgroups,
        }
    }

    /// The uid and gid plugin `name` runs as, avoiding the ids in `taken` (this host's other
    /// live plugins) while the range has others.
    pub(crate) fn plugin(&self, name: &str, taken: &HashSet<u32>) -> (u32, u32) {
        if self.uids.count == 1 {
            return (self.uids.first, self.gids.first);
        }
        // The keeper's id (the first) is never a plugin's.
        let slots = self.uids.count - 1;
        let start = fnv1a(name.as_bytes()) % slots;
        let id = (0..slots)
            .map(|k| self.uids.first + 1 + (start + k) % slots)
            .find(|id| !taken.contains(id))
            .unwrap_or(self.uids.first + 1 + start);
        debug_assert!(self.uids.contains(id) && self.gids.contains(id));
        (id, id)
    }
}

/// 32-bit FNV-1a: a stable hash across hosts and releases (std's is neither).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_hosts_plugins_never_get_uid_zero_and_keep_their_id_across_restarts() {
        let world = WorldIds::new((0, 0), None, false, DEFAULT_PLUGIN_IDS).unwrap();
        assert!(!world.uids.contains(0) && !world.gids.contains(0));
        assert_eq!(world.uids.map_line(), "2130706432 2130706432 65536");
        let none = HashSet::new();
        let kv = world.plugin("kv", &none);
        assert_eq!(world.plugin("kv", &none), kv, "stable per name");
        assert_ne!(kv.0, world.keeper.0, "never the keeper's");
        assert!(world.uids.contains(kv.0));
        assert_eq!(kv.0, kv.1);
    }

    #[test]
    fn live_plugins_ids_are_skipped_while_the_range_has_others() {
        let world = WorldIds::new(
            (0, 0),
            None,
            false,
            PluginIds::Range {
                first: 1000,
                count: 3,
            },
        )
        .unwrap();
        let first = world.plugin("a", &HashSet::new());
        let second = world.plugin("a", &HashSet::from([first.0]));
        assert_ne!(first, second);
        assert!([1001, 1002].contains(&first.0) && [1001, 1002].contains(&second.0));
        // Both taken: shared rather than refused.
        let third = world.plugin("a", &HashSet::from([1001, 1002]));
        assert!([1001, 1002].contains(&third.0));
    }

    #[test]
    fn a_non_root_host_maps_only_itself_and_run_as_maps_exactly_its_ids() {
        let world = WorldIds::new((1000, 100), None, false, DEFAULT_PLUGIN_IDS).unwrap();
        assert_eq!(world.uids.map_line(), "1000 1000 1");
        assert_eq!(world.gids.map_line(), "100 100 1");
        assert!(!world.setgroups);
        assert_eq!(world.plugin("kv", &HashSet::new()), (1000, 100));
        let run_as = WorldIds::new((0, 0), Some((65534, 65534)), false, DEFAULT_PLUGIN_IDS);
        assert_eq!(
            run_as.unwrap().plugin("kv", &HashSet::new()),
            (65534, 65534)
        );
    }

    #[test]
    fn root_as_the_plugins_user_needs_explicit_permission() {
        let refused = WorldIds::new((0, 0), Some((0, 0)), false, DEFAULT_PLUGIN_IDS);
        assert_eq!(refused, Err(IdError::RootNotAllowed));
        assert!(refused.unwrap_err().to_string().contains("allow_root"));
        let allowed = WorldIds::new((0, 0), Some((0, 0)), true, DEFAULT_PLUGIN_IDS).unwrap();
        assert_eq!(allowed.uids.map_line(), "0 0 1");
    }

    #[test]
    fn unusable_ranges_are_refused() {
        for ids in [
            PluginIds::One(0),
            PluginIds::Range {
                first: 0,
                count: 10,
            },
            PluginIds::Range { first: 5, count: 1 },
            PluginIds::Range {
                first: u32::MAX - 1,
                count: 5,
            },
        ] {
            assert!(WorldIds::new((0, 0), None, false, ids).is_err(), "{ids:?}");
        }
    }
}
