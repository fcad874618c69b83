//! The janitor's side of the lifeline: its shell program, and the protocol lines the host
//! sends it (see the parent module's "Protocol"), with every path checked and encoded.

use std::fmt::Write as _;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use crate::confine::container::Container;

/// The janitor's program (`sh -c`, POSIX shell, `$1` = [`RM_BATCH`](super::RM_BATCH), `$2` =
/// [`CGROUP_KILL_ROUNDS`](super::CGROUP_KILL_ROUNDS)). Registrations live in the variables `p_ID` (process group), `c_ID`
/// (encoded cgroup or `-`) and `d_ID` (encoded directories); `ids` lists the live ones as
/// ` ID ID … `. Pathname expansion is off, so encoded directories are only split at spaces.
/// Only shell built-ins read and signal (`read`, `kill`); `rm`, `rmdir`, `cat` (the mount
/// table, once) and `umount` (a capped directory's tmpfs, detached first) are the only
/// programs run.
pub(super) const SCRIPT: &str = r#"set -f
batch=$1
rounds=$2
ids=' '
gone() {
  case $1 in ''|*[!0-9]*) return;; esac
  [ "$1" -gt 1 ] && kill -s KILL -- "-$1" 2>/dev/null
}
decode() {
  case $1 in
    *\\*) d=$(printf "$1/"); d=${d%/};;
    *) d=$1;;
  esac
}
cgkill() {
  [ "$1" = - ] && return
  decode "$1"
  [ -d "$d" ] || return
  [ -f "$d/cgroup.kill" ] && echo 1 > "$d/cgroup.kill" 2>/dev/null
  n=0
  while [ "$n" -lt "$rounds" ]; do
    [ -f "$d/cgroup.procs" ] || return
    left=
    while read -r pid; do
      case $pid in ''|*[!0-9]*) continue;; esac
      left=1; kill -s KILL "$pid" 2>/dev/null
    done < "$d/cgroup.procs"
    [ -z "$left" ] && rmdir -- "$d" 2>/dev/null && return
    n=$((n + 1))
  done
}
unmount() {
  case $mounts in *" $d "*) umount -l -- "$d" 2>/dev/null;; esac
}
container() {
  [ -n "$1" ] || return 0
  set -- $1
  decode "$1"; r=$d; decode "$2"; root=$d; decode "$3"
  "$r" --root "$root" delete --force "$d" >/dev/null 2>&1
}
while read -r op id pgid cg dirs; do
  case $id in ''|*[!0-9]*) continue;; esac
  case $op in
    r) unset "g_$id"; eval "p_$id=\$pgid c_$id=\$cg d_$id=\$dirs"
       case $ids in *" $id "*) ;; *) ids="$ids$id ";; esac;;
    u) unset "p_$id" "c_$id" "d_$id" "g_$id"
       case $ids in *" $id "*) ids="${ids%% $id *} ${ids#* $id }";; esac;;
    g) eval "g_$id=\"\$pgid \$cg \$dirs\"";;
    k) gone "$pgid"; cgkill "$cg"; eval "container \"\$g_$id\""; mounts=$(cat /proc/self/mounts); for e in $dirs; do decode "$e"; unmount; rm -rf -- "$d"; done;;
  esac
done
for id in $ids; do eval "gone \"\$p_$id\""; done
for id in $ids; do eval "cgkill \"\$c_$id\""; done
for id in $ids; do eval "container \"\$g_$id\""; done
mounts=$(cat /proc/self/mounts)
set --
for id in $ids; do
  eval "x=\$d_$id"
  for e in $x; do decode "$e"; unmount; set -- "$@" "$d"; done
  if [ $# -ge "$batch" ]; then rm -rf -- "$@"; set --; fi
done
[ $# -gt 0 ] && rm -rf -- "$@"
exit 0
"#;

/// The process group of a registration whose plugin does not run yet: never signalled.
pub(super) const NO_GROUP: u32 = 0;

/// `pgid` if it can be a plugin's process group (above 1, a valid id).
pub(super) fn checked_group(pgid: u32) -> io::Result<u32> {
    if pgid <= 1 || i32::try_from(pgid).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pgid} is not a plugin's process group id"),
        ));
    }
    Ok(pgid)
}

/// `cgroup` (or `-`) and `dirs` (space-separated), checked and encoded for the protocol.
pub(super) fn encoded(cgroup: Option<&Path>, dirs: &[&Path]) -> io::Result<(String, String)> {
    let mut encoded = String::new();
    for dir in dirs {
        let dir = checked(dir)?;
        if !encoded.is_empty() {
            encoded.push(' ');
        }
        encode(&dir, &mut encoded);
    }
    let cgroup = match cgroup {
        Some(dir) => {
            let mut out = String::new();
            encode(&checked(dir)?, &mut out);
            out
        }
        None => "-".to_owned(),
    };
    Ok((cgroup, encoded))
}

/// `dir` made absolute (against the host's working directory), refusing `..` and `/`.
pub(super) fn checked(dir: &Path) -> io::Result<PathBuf> {
    let dir = std::path::absolute(dir)?;
    if dir.parent().is_none() || dir.components().any(|c| c == Component::ParentDir) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a directory the janitor may remove",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// The protocol line registering plugin `id`: process group `pgid`, its `cgroup` (encoded, or
/// `-`) and its `dirs` (encoded, space-separated), as `SCRIPT` parses it.
pub(super) fn register_line(id: u64, pgid: u32, cgroup: &str, dirs: &str) -> String {
    format!("r {id} {pgid} {cgroup} {dirs}\n")
}

/// The protocol line adding `container` to registration `id`.
pub(super) fn container_line(container: &Container, id: u64) -> io::Result<String> {
    let name_ok = !container.id.is_empty()
        && container
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !name_ok || !container.runsc.is_absolute() || !container.root.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{container:?} is not a container the janitor may delete"),
        ));
    }
    let mut line = format!("g {id} ");
    encode(&container.runsc, &mut line);
    line.push(' ');
    encode(&container.root, &mut line);
    line.push(' ');
    line.push_str(&container.id);
    line.push('\n');
    Ok(line)
}

/// Appends `path` with every byte outside `[A-Za-z0-9/._-]` as an octal escape `\ooo`.
fn encode(path: &Path, out: &mut String) {
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "\\{b:03o}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    use super::*;

    #[test]
    fn paths_are_encoded_so_that_only_safe_bytes_remain() {
        let mut out = String::new();
        encode(
            Path::new(OsStr::from_bytes(b"/a b/c\n%\\\xff/x-y_z.1")),
            &mut out,
        );
        assert_eq!(out, r"/a\040b/c\012\045\134\377/x-y_z.1");
    }
}
