//! What a dynamically linked program needs to run in an empty root file system: its ELF
//! interpreter (`PT_INTERP`) and the shared libraries it and they name (`DT_NEEDED`),
//! resolved the way the dynamic loader does (`DT_RPATH`/`DT_RUNPATH` with `$ORIGIN`, then the
//! system's library directories) — without running `ldd`, which executes the program's loader.
//!
//! [`parse`] is pure (bytes in, facts out, for any reader of file ranges); [`closure`] does the
//! file-system lookups. Only 64-bit little-endian ELF (x86-64, aarch64) is understood.

use std::collections::{BTreeSet, VecDeque};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

/// At most this many shared objects are resolved for one program (a bound on a malicious or
/// broken dependency graph; real programs need a few dozen).
pub(crate) const MAX_LIBRARIES: usize = 512;

/// At most this many files are inspected when scanning directories for shared objects whose
/// dependencies are needed (e.g. an interpreter's extension modules).
pub(crate) const MAX_SCANNED_FILES: usize = 200_000;

/// The largest dynamic section or string table read from one object.
const MAX_TABLE_BYTES: u64 = 4 << 20;

/// Library directories the loader searches without `ld.so.cache` (glibc's trusted
/// directories on multiarch Debian, then the generic ones).
pub(crate) const TRUSTED_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_LOAD: u32 = 1;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_STRSZ: u64 = 10;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// The dynamic-linking facts of one ELF object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Dynamic {
    /// `PT_INTERP`: the program's loader, for executables.
    pub(crate) interpreter: Option<String>,
    /// `DT_NEEDED`, in order.
    pub(crate) needed: Vec<String>,
    /// `DT_RPATH` entries (searched only when there is no `DT_RUNPATH`).
    pub(crate) rpath: Vec<String>,
    /// `DT_RUNPATH` entries.
    pub(crate) runpath: Vec<String>,
}

/// Parses the dynamic-linking facts of the ELF object readable through `read_at(offset, len)`.
/// A statically linked program yields an empty [`Dynamic`].
///
/// # Errors
/// Not ELF, not 64-bit little-endian, or truncated.
pub(crate) fn parse(read_at: impl Fn(u64, usize) -> io::Result<Vec<u8>>) -> io::Result<Dynamic> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let header = read_at(0, 64)?;
    if header.len() < 64 || header[..4] != *b"\x7fELF" {
        return Err(bad("not an ELF file"));
    }
    if header[4] != 2 || header[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF file"));
    }
    let phoff = u64_at(&header, 32);
    let phentsize = usize::from(u16_at(&header, 54));
    let phnum = usize::from(u16_at(&header, 56));
    if phentsize < 56 {
        return Err(bad("program headers too small"));
    }
    let table = read_at(phoff, phentsize * phnum)?;
    let mut loads = Vec::new();
    let (mut dynamic, mut facts) = (None, Dynamic::default());
    for entry in table.chunks_exact(phentsize) {
        let (kind, offset, vaddr) = (u32_at(entry, 0), u64_at(entry, 8), u64_at(entry, 16));
        let filesz = u64_at(entry, 32);
        match kind {
            PT_LOAD => loads.push((vaddr, offset, filesz)),
            PT_DYNAMIC => dynamic = Some((offset, filesz)),
            PT_INTERP => {
                let raw = read_at(offset, bounded(filesz)?)?;
                facts.interpreter = Some(c_string(&raw, 0));
            }
            _ => {}
        }
    }
    let Some((offset, size)) = dynamic else {
        return Ok(facts);
    };
    let entries = read_at(offset, bounded(size)?)?;
    let (mut strtab, mut strsz) = (None, 0);
    let mut names = Vec::new();
    for entry in entries.chunks_exact(16) {
        let (tag, value) = (u64_at(entry, 0), u64_at(entry, 8));
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(value),
            DT_STRSZ => strsz = value,
            DT_NEEDED | DT_RPATH | DT_RUNPATH => names.push((tag, value)),
            _ => {}
        }
    }
    let Some(strtab) = strtab else {
        return Ok(facts);
    };
    // DT_STRTAB is an address: find the file offset of the segment that maps it.
    let file_offset = loads
        .iter()
        .find(|(vaddr, _, filesz)| strtab >= *vaddr && strtab < vaddr + filesz)
        .map_or(strtab, |(vaddr, offset, _)| strtab - vaddr + offset);
    let strings = read_at(file_offset, bounded(strsz)?)?;
    for (tag, index) in names {
        let text = c_string(&strings, usize::try_from(index).unwrap_or(usize::MAX));
        match tag {
            DT_NEEDED => facts.needed.push(text),
            DT_RPATH => facts.rpath.extend(text.split(':').map(str::to_owned)),
            _ => facts.runpath.extend(text.split(':').map(str::to_owned)),
        }
    }
    Ok(facts)
}

/// A file the program needs: where the loader looks for it (inside the sandbox, the same path
/// as on the host) and the file itself (symbolic links resolved).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Needed {
    /// The path the loader opens.
    pub(crate) lookup: PathBuf,
    /// The real file on the host.
    pub(crate) source: PathBuf,
}

/// What [`closure`] found.
#[derive(Debug, Clone, Default)]
pub(crate) struct Closure {
    /// Every interpreter and library, the program excluded.
    pub(crate) files: BTreeSet<Needed>,
    /// Library directories used that the loader does not search without `ld.so.cache`
    /// (`LD_LIBRARY_PATH` inside the sandbox).
    pub(crate) extra_dirs: BTreeSet<PathBuf>,
}

/// The interpreter and libraries of `program` and of every shared object under `scan` (e.g.
/// an interpreter's extension modules), searched in `system_dirs` after their own run paths.
///
/// # Errors
/// `program` cannot be read or parsed; a library that cannot be found is an error too, naming
/// it and who needs it.
pub(crate) fn closure(
    program: &Path,
    scan: &[PathBuf],
    system_dirs: &[PathBuf],
) -> io::Result<Closure> {
    let mut out = Closure::default();
    let mut queue = VecDeque::from([(program.to_owned(), true)]);
    for dir in scan {
        for object in shared_objects(dir)? {
            queue.push_back((object, false));
        }
    }
    let mut seen = BTreeSet::new();
    while let Some((object, required)) = queue.pop_front() {
        if !seen.insert(object.clone()) {
            continue;
        }
        let file = File::open(&object)?;
        let facts = match parse(|offset, len| read_range(&file, offset, len)) {
            Ok(facts) => facts,
            Err(_) if !required => continue,
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", object.display()),
                ));
            }
        };
        let origin = object.parent().unwrap_or(Path::new("/")).to_owned();
        if let Some(interpreter) = facts.interpreter.as_deref().map(PathBuf::from) {
            out.files.insert(needed(&interpreter)?);
        }
        let own: Vec<&String> = if facts.runpath.is_empty() {
            facts.rpath.iter().collect()
        } else {
            facts.runpath.iter().collect()
        };
        let own: Vec<PathBuf> = own
            .into_iter()
            .map(|dir| expand_origin(dir, &origin))
            .collect();
        for name in &facts.needed {
            let found = if name.contains('/') {
                Some(PathBuf::from(name))
            } else {
                own.iter()
                    .chain(system_dirs)
                    .map(|dir| dir.join(name))
                    .find(|candidate| candidate.is_file())
            };
            let Some(found) = found else {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "library {name} (needed by {}) is in none of {}",
                        object.display(),
                        own.iter()
                            .chain(system_dirs)
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(":")
                    ),
                ));
            };
            let dir = found.parent().unwrap_or(Path::new("/"));
            if !own.iter().any(|d| d == dir) && !TRUSTED_DIRS.iter().any(|d| Path::new(d) == dir) {
                out.extra_dirs.insert(dir.to_owned());
            }
            let entry = needed(&found)?;
            if out.files.len() >= MAX_LIBRARIES {
                return Err(io::Error::other(format!(
                    "more than {MAX_LIBRARIES} libraries"
                )));
            }
            queue.push_back((entry.source.clone(), true));
            out.files.insert(entry);
        }
    }
    Ok(out)
}

/// The system's library directories: those of `/etc/ld.so.conf` (with its `include`s) and the
/// loader's trusted ones.
pub(crate) fn system_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    read_ld_so_conf(Path::new("/etc/ld.so.conf"), &mut dirs, 0);
    for dir in TRUSTED_DIRS {
        let dir = PathBuf::from(dir);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

fn needed(lookup: &Path) -> io::Result<Needed> {
    Ok(Needed {
        lookup: lookup.to_owned(),
        source: lookup.canonicalize()?,
    })
}

fn read_ld_so_conf(file: &Path, dirs: &mut Vec<PathBuf>, depth: u32) {
    let Ok(text) = std::fs::read_to_string(file) else {
        return;
    };
    for line in text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
    {
        if let Some(pattern) = line.strip_prefix("include ") {
            if depth > 4 {
                continue;
            }
            let pattern = Path::new(pattern.trim());
            let (Some(parent), Some(suffix)) = (
                pattern.parent(),
                pattern
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix('*')),
            ) else {
                continue;
            };
            let mut files: Vec<PathBuf> = std::fs::read_dir(parent)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(suffix))
                .collect();
            files.sort();
            for included in files {
                read_ld_so_conf(&included, dirs, depth + 1);
            }
        } else if line.starts_with('/') && !dirs.iter().any(|d| d == Path::new(line)) {
            dirs.push(PathBuf::from(line));
        }
    }
}

/// Files under `dir` whose name says they are shared objects (`*.so`, `*.so.N`).
fn shared_objects(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    let mut inspected = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            inspected += 1;
            if inspected > MAX_SCANNED_FILES {
                return Err(io::Error::other(format!(
                    "more than {MAX_SCANNED_FILES} files below {}",
                    dir.display()
                )));
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && is_shared_object_name(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn is_shared_object_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.ends_with(".so") || name.contains(".so.")
}

fn expand_origin(dir: &str, origin: &Path) -> PathBuf {
    let origin = origin.to_string_lossy();
    PathBuf::from(
        dir.replace("${ORIGIN}", &origin)
            .replace("$ORIGIN", &origin),
    )
}

fn bounded(size: u64) -> io::Result<usize> {
    if size > MAX_TABLE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "ELF table too large",
        ));
    }
    usize::try_from(size)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "ELF table too large"))
}

fn read_range(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], offset + filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

fn c_string(bytes: &[u8], start: usize) -> String {
    let rest = bytes.get(start..).unwrap_or_default();
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8).map_or(0, |s| {
        let mut a = [0; 8];
        a.copy_from_slice(s);
        u64::from_le_bytes(a)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_of(path: &str) -> io::Result<Dynamic> {
        let file = File::open(path)?;
        parse(|offset, len| read_range(&file, offset, len))
    }

    #[test]
    fn a_dynamic_programs_loader_and_libraries_are_read_from_its_headers() {
        let facts = facts_of("/bin/sh").unwrap();
        assert!(
            facts
                .interpreter
                .as_deref()
                .is_some_and(|i| i.contains("ld-linux")),
            "{facts:?}"
        );
        assert!(
            facts.needed.iter().any(|n| n.starts_with("libc.so")),
            "{facts:?}"
        );
    }

    #[test]
    fn the_closure_holds_the_loader_and_libc_at_the_paths_the_loader_opens() {
        let closure = closure(Path::new("/bin/sh"), &[], &system_dirs()).unwrap();
        let lookups: Vec<_> = closure
            .files
            .iter()
            .map(|n| n.lookup.display().to_string())
            .collect();
        assert!(
            lookups.iter().any(|l| l.contains("ld-linux")),
            "{lookups:?}"
        );
        assert!(
            lookups.iter().any(|l| l.ends_with("/libc.so.6")),
            "{lookups:?}"
        );
        assert!(
            closure
                .files
                .iter()
                .all(|n| n.source.is_absolute() && n.source.is_file())
        );
    }

    #[test]
    fn a_file_that_is_not_elf_is_refused_and_truncated_headers_too() {
        let text = b"#!/bin/sh\necho hi\n".to_vec();
        let read = |data: Vec<u8>| {
            move |offset: u64, len: usize| {
                let start = usize::try_from(offset).unwrap().min(data.len());
                Ok(data[start..(start + len).min(data.len())].to_vec())
            }
        };
        assert!(parse(read(text)).is_err());
        assert!(parse(read(b"\x7fELF\x02\x01".to_vec())).is_err());
        let mut elf32 = vec![0; 64];
        elf32[..6].copy_from_slice(b"\x7fELF\x01\x01");
        assert!(parse(read(elf32)).is_err());
    }

    #[test]
    fn origin_in_a_run_path_is_the_objects_own_directory() {
        assert_eq!(
            expand_origin("$ORIGIN/../lib", Path::new("/opt/py/bin")),
            PathBuf::from("/opt/py/bin/../lib")
        );
        assert_eq!(
            expand_origin("${ORIGIN}", Path::new("/x")),
            PathBuf::from("/x")
        );
    }

    #[test]
    fn only_shared_object_names_are_scanned() {
        assert!(is_shared_object_name(Path::new(
            "/a/_ssl.cpython-311-x86_64-linux-gnu.so"
        )));
        assert!(is_shared_object_name(Path::new("/a/libz.so.1")));
        assert!(!is_shared_object_name(Path::new("/a/socket.py")));
    }
}
