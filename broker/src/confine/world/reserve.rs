//! Worlds made before the launch that enters them, as `netns` does for network namespaces.
//!
//! Making a world costs 2–4 ms (the base tree's mounts, `pivot_root`, detaching the copy of the
//! host's mount table, the keeper's exec); entering a ready one costs a few dozen system calls.
//! So the host keeps [`WORLD_RESERVE`] worlds ready for the ids of its last launch, made on a
//! thread of its own while the previous plugin starts; a launch takes one (or makes one on the
//! spot when none fits) and starts making the next. Each world is made for exactly one launch
//! and ended with it.
//!
//! When worlds cannot be made on this host at all (no user namespaces, no keeper for this
//! architecture, a `/proc` that may not be mounted), the first failure is remembered and every
//! later launch is told at once ([`take`] returns it), so that falling back costs nothing.

use std::io;
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::confine::DEFAULT_DISK_MIB;
use crate::confine::world::ids::WorldIds;
use crate::confine::world::make::{self, World};
use crate::confine::world::plan::{self, RealFs, Tree};

/// How many worlds the host keeps ready for its next launches: one, the next launch's. A burst
/// of launches beyond it makes the rest on the spot.
pub const WORLD_RESERVE: usize = 1;

struct Reserve {
    /// The ids the ready worlds map.
    ids: Option<WorldIds>,
    ready: Vec<World>,
    /// A thread is making worlds for the reserve.
    filling: bool,
    /// Why worlds cannot be made on this host, once known.
    unavailable: Option<String>,
}

static RESERVE: Mutex<Reserve> = Mutex::new(Reserve {
    ids: None,
    ready: Vec::new(),
    filling: false,
    unavailable: None,
});

fn lock() -> MutexGuard<'static, Reserve> {
    // A list of worlds and flags: a thread that panicked while holding it left it consistent.
    RESERVE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The tree every world starts with, looked up once per host process.
pub(crate) fn base() -> &'static Tree {
    static BASE: OnceLock<Tree> = OnceLock::new();
    BASE.get_or_init(|| plan::base(&RealFs))
}

/// A world mapping `ids`, from the reserve or made now; starts refilling the reserve. `Err`
/// with the reason when worlds cannot be made here.
pub(crate) fn take(ids: WorldIds) -> Result<World, String> {
    let (ready, stale) = {
        let mut reserve = lock();
        if let Some(reason) = &reserve.unavailable {
            return Err(reason.clone());
        }
        if reserve.ids == Some(ids) {
            (reserve.ready.pop(), Vec::new())
        } else {
            reserve.ids = Some(ids);
            (None, std::mem::take(&mut reserve.ready))
        }
    };
    // Worlds of other ids end outside the lock.
    drop(stale);
    let world = match ready {
        Some(world) => Ok(world),
        None => make_one(ids),
    };
    if world.is_ok() {
        refill(ids);
    }
    world
}

/// Makes a world now; a failure that is not a passing shortage marks worlds unavailable here.
fn make_one(ids: WorldIds) -> Result<World, String> {
    make::make(ids, base(), DEFAULT_DISK_MIB).map_err(|e| {
        let reason = e.to_string();
        if !passing(&e) {
            lock().unavailable.get_or_insert_with(|| reason.clone());
        }
        reason
    })
}

/// Whether `e` is a shortage that may pass (memory, descriptors, processes, a slow machine).
fn passing(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOMEM | libc::EAGAIN | libc::EMFILE | libc::ENFILE | libc::ENOSPC)
    ) || e.kind() == io::ErrorKind::TimedOut
}

/// Starts a thread filling the reserve for `ids` unless it is full or being filled.
fn refill(ids: WorldIds) {
    {
        let mut reserve = lock();
        if reserve.filling || reserve.ids != Some(ids) || reserve.ready.len() >= WORLD_RESERVE {
            return;
        }
        reserve.filling = true;
    }
    let filler = std::thread::Builder::new()
        .name("tether-world".into())
        .spawn(move || {
            loop {
                let made = make::make(ids, base(), DEFAULT_DISK_MIB);
                let mut reserve = lock();
                match made {
                    Ok(world) if reserve.ids == Some(ids) => reserve.ready.push(world),
                    Ok(stale) => {
                        reserve.filling = false;
                        drop(reserve);
                        drop(stale);
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot make a world ahead");
                        reserve.filling = false;
                        return;
                    }
                }
                if reserve.ready.len() >= WORLD_RESERVE {
                    reserve.filling = false;
                    return;
                }
            }
        });
    if filler.is_err() {
        lock().filling = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::confine::world::ids::DEFAULT_PLUGIN_IDS;

    #[test]
    fn each_launch_gets_a_world_of_its_own_made_ahead_when_it_can() {
        let host = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        let ids = WorldIds::new(host, None, false, DEFAULT_PLUGIN_IDS).unwrap();
        let mut keepers = std::collections::HashSet::new();
        // Kept, so that no keeper's pid is reused while the test looks.
        let mut held = Vec::new();
        for _ in 0..4 {
            let world = take(ids).unwrap();
            assert!(
                keepers.insert(world.keeper()),
                "a world is handed out twice"
            );
            held.push(world);
        }
    }
}
