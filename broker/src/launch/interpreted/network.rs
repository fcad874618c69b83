//! Telling a refused network use from a refused file: a plugin under `network = "none"` that
//! exits before its handshake because a socket, `bind` or `connect` failed was refused by its
//! network setting, not by Landlock's file rules, and the remedy is the network setting, never
//! `--allow-read`. Pure: the stderr tail in, the line that shows it out.

use std::fmt;

use crate::confine::network::NetworkMechanism;

/// A confined plugin's early exit that its network setting caused: a socket, `bind` or
/// `connect` refused under `network = "none"`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkRefusal {
    /// The stderr line that shows it.
    pub evidence: String,
    /// How `network = "none"` was enforced.
    pub mechanism: NetworkMechanism,
    /// Whether the plugin had a loopback of its own (its world's network namespace): a server
    /// on its own 127.0.0.1 then works, and what it cannot reach is the host's network — the
    /// host's own 127.0.0.1 services included.
    pub own_loopback: bool,
}

impl fmt::Display for NetworkRefusal {
    /// `: "EVIDENCE"; WHAT NONE MEANS HERE; REMEDY`, meant to follow a sentence about the exit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let evidence = tether_proto::text::escape(&self.evidence).to_string();
        let what = match (self.mechanism, self.own_loopback) {
            (NetworkMechanism::Namespace, true) => {
                "a network namespace of its own: a loopback of its own (a server on its own 127.0.0.1 works) and nothing of the host's network, the host's 127.0.0.1 services and name resolution included"
            }
            (NetworkMechanism::Namespace, false) => {
                "an empty network namespace: no interface is up, so no TCP, UDP or name resolution, not even on 127.0.0.1"
            }
            (NetworkMechanism::Seccomp, _) => {
                "a system-call filter: no socket but unix sockets, so no TCP, UDP or name resolution, not even on 127.0.0.1"
            }
        };
        write!(
            f,
            ": {evidence:?}; its network is `none`, enforced here by {what}. This is its network setting, not a file the sandbox refused, and allowing directories does not help: if the plugin must use the host's network, give it `network = \"host\"` in its manifest (granted by the same line under `[plugins.NAME]` in the grants file), `--network host` (tether call/inspect) or `.network(NetworkMode::Host)` on the builder"
        )
    }
}

/// Errors only the network gives, as C, Python and Go word them (lower-cased) and the
/// resolver's.
const NETWORK_ONLY_MESSAGES: &[&str] = &[
    "network is unreachable",
    "connection refused",
    "no route to host",
    "address family not supported",
    "cannot assign requested address",
    "temporary failure in name resolution",
    "name or service not known",
    "no address associated with hostname",
    "getaddrinfo",
];

/// The same as errno names (Node's words), matched as whole words.
const NETWORK_ONLY_ERRNOS: &[&str] = &[
    "ENETUNREACH",
    "ECONNREFUSED",
    "EHOSTUNREACH",
    "EAFNOSUPPORT",
    "EADDRNOTAVAIL",
    "EAI_AGAIN",
    "ENOTFOUND",
];

/// Permission errors (lower-cased messages), which are the network's when a network call is
/// named beside them.
const PERMISSION_MESSAGES: &[&str] = &["permission denied", "operation not permitted"];

/// The same as errno names, matched as whole words.
const PERMISSION_ERRNOS: &[&str] = &["EACCES", "EPERM"];

/// What names a network call: on the error's own line (Go's `listen tcp …: bind:`, Node's
/// `listen EACCES`, C's `bind: …`) or the line before it (the failing statement in a Python
/// traceback).
const NETWORK_CALLS: &[&str] = &[
    "bind",
    "connect",
    "listen",
    "socket",
    "dial",
    "sendto",
    "create_connection",
    "create_server",
];

/// The last stderr line showing that a network call was refused; `None` when no line does. A unix socket's refusal (its line or the statement before
/// it names `unix` or an absolute path) is a file's, not the network's.
pub(crate) fn refusal(stderr: &str) -> Option<&str> {
    let lines: Vec<&str> = stderr.lines().collect();
    lines.iter().enumerate().rev().find_map(|(i, line)| {
        let lower = line.to_ascii_lowercase();
        let says = |messages: &[&str], errnos: &[&str]| {
            messages.iter().any(|m| lower.contains(m)) || has_word(line, errnos)
        };
        if says(NETWORK_ONLY_MESSAGES, NETWORK_ONLY_ERRNOS) {
            return Some(line.trim());
        }
        if !says(PERMISSION_MESSAGES, PERMISSION_ERRNOS) {
            return None;
        }
        let before = i
            .checked_sub(1)
            .map_or("", |j| lines[j])
            .to_ascii_lowercase();
        let names_call = |text: &str| NETWORK_CALLS.iter().any(|c| text.contains(c));
        let names_file = |text: &str| text.contains("unix") || has_absolute_path(text);
        let own_line = names_call(&lower) && !names_file(&lower);
        let statement = names_call(&before) && !names_file(&before) && !names_file(&lower);
        (own_line || statement).then(|| line.trim())
    })
}

/// Whether one of `words` stands in `line` as a word of its own (not inside a longer name).
fn has_word(line: &str, words: &[&str]) -> bool {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|token| words.contains(&token))
}

/// Whether `text` holds an absolute path (a `/` followed by a letter at the start, after a
/// space or a quote), as a unix socket's path or a denied file's.
fn has_absolute_path(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.windows(2).enumerate().any(|(i, w)| {
        w[0] == b'/'
            && w[1].is_ascii_alphanumeric()
            && (i == 0 || matches!(bytes[i - 1], b' ' | b'\'' | b'"' | b'(' | b'='))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_binds_and_connects_are_read_in_each_languages_words() {
        for (stderr, line) in [
            (
                "Traceback (most recent call last):\n  File \"/p/plugin.py\", line 9, in <module>\n    s.bind((\"127.0.0.1\", 1234))\nPermissionError: [Errno 13] Permission denied\n",
                "PermissionError: [Errno 13] Permission denied",
            ),
            (
                "  File \"/usr/lib/python3.11/socket.py\", line 232, in __init__\n    _socket.socket.__init__(self, family, type, proto, fileno)\nPermissionError: [Errno 1] Operation not permitted\n",
                "PermissionError: [Errno 1] Operation not permitted",
            ),
            (
                "ConnectionRefusedError: [Errno 111] Connection refused\n",
                "ConnectionRefusedError: [Errno 111] Connection refused",
            ),
            (
                "OSError: [Errno 101] Network is unreachable",
                "OSError: [Errno 101] Network is unreachable",
            ),
            (
                "panic: listen tcp 127.0.0.1:1234: bind: permission denied",
                "panic: listen tcp 127.0.0.1:1234: bind: permission denied",
            ),
            (
                "Error: connect ECONNREFUSED 127.0.0.1:5432\n    at TCPConnectWrap.afterConnect",
                "Error: connect ECONNREFUSED 127.0.0.1:5432",
            ),
            (
                "Error: listen EACCES: permission denied 0.0.0.0:8080",
                "Error: listen EACCES: permission denied 0.0.0.0:8080",
            ),
            (
                "socket.gaierror: [Errno -3] Temporary failure in name resolution",
                "socket.gaierror: [Errno -3] Temporary failure in name resolution",
            ),
        ] {
            assert_eq!(refusal(stderr), Some(line), "{stderr}");
        }
    }

    #[test]
    fn a_refused_file_or_unix_socket_is_not_the_networks() {
        for stderr in [
            "PermissionError: [Errno 13] Permission denied: '/srv/data/table.csv'",
            "panic: listen unix /run/x.sock: bind: permission denied",
            "    s.bind(\"/run/plugin/x.sock\")\nPermissionError: [Errno 13] Permission denied",
            "    open(path)\nPermissionError: [Errno 13] Permission denied",
            "ModuleNotFoundError: No module named 'socketserver_ext'",
            "This binary is a plugin. These are not meant to be executed directly.",
        ] {
            assert_eq!(refusal(stderr), None, "{stderr}");
        }
    }
}
