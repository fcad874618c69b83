//! The generated section of `bench/BENCHMARKS.md`.

use std::fmt::Write as _;

use super::context::Context;
use super::format::{format_ratio, with_unit};
use super::goals::{GOALS, PENDING, PENDING_GOALS};
use super::results::{BASELINE, FLOOR, Results, Summary, TETHER};
use super::splice::{BEGIN_MARKER, END_MARKER};
use crate::suite::{METRICS, MetricSpec, System};

/// A cell of the table.
fn cell(results: &Results, system: &str, spec: &MetricSpec) -> String {
    match results.summary(system, spec.id) {
        Some(Summary::Median(v)) => with_unit(v, spec.unit),
        Some(Summary::Failed(code))
            if code == "ResourceExhausted" && spec.id == "payload_64mib" =>
        {
            "fails (4 MiB cap)".into()
        }
        Some(Summary::Failed(code)) => format!("fails ({code})"),
        None if system != TETHER && crate::suite::TETHER_ONLY.contains(&spec.id) => "n/a".into(),
        None => "—".into(),
    }
}

/// tether ÷ `other` for `metric`, or `—`.
fn ratio_cell(results: &Results, other: &str, metric: &str) -> String {
    results
        .ratio(TETHER, other, metric)
        .map_or_else(|| "—".into(), |r| format!("{}×", format_ratio(r)))
}

fn load_text(load: Option<[f64; 3]>) -> String {
    load.map_or_else(
        || "unknown".into(),
        |[a, b, c]| format!("{a:.2} / {b:.2} / {c:.2}"),
    )
}

/// The generated section of `bench/BENCHMARKS.md`, markers included.
#[must_use]
pub fn markdown(results: &Results, ctx: &Context) -> String {
    let mut md = String::new();
    let c = &ctx.counts;
    let _ = writeln!(md, "{BEGIN_MARKER}");
    let _ = writeln!(md, "## Results, {}", ctx.date);
    let _ = writeln!(md);
    if ctx.quick {
        let _ = writeln!(
            md,
            "**`--quick` smoke run: tiny counts, the numbers mean nothing.** Run `bash bench/run.sh` for real ones.\n"
        );
    }
    let _ = writeln!(md, "- Machine: {}.", ctx.machine);
    let _ = writeln!(
        md,
        "- Load average (1/5/15 min) before: {}, after: {}. The machine is shared with other \
         engineers' builds, so absolute numbers are noisy: compare the ratios, which come from \
         the same run.",
        load_text(ctx.load_before),
        load_text(ctx.load_after)
    );
    let _ = writeln!(md, "- Tools: {}.", ctx.tools.join("; "));
    let _ = writeln!(
        md,
        "- {} rounds; in each, every measurement runs on every system back to back, the \
         systems' order rotating from round to round. Each cell is the **median round**. Per \
         round: {} launches, {} sequential calls per value size (64 B, 1 KiB, 64 KiB), {} calls \
         per concurrency level and broker mode ({} warm-up calls at that concurrency \
         first), {} × 1 MiB and {} × 64 MiB round trips, {} live plugins, {} (plain \
         call, callback call) pairs ({} warm-up pairs first), {} loads of a {}-manifest catalog \
         using {} plugins.",
        c.rounds,
        c.launches,
        c.unary_calls,
        c.rate_calls,
        c.rate_warmup,
        c.rounds_1mib,
        c.rounds_64mib,
        c.live_plugins,
        c.callback_pairs,
        c.callback_warmup,
        c.catalog_repeat,
        c.catalog_manifests,
        c.catalog_used
    );
    let _ = writeln!(md);

    let columns: Vec<&System> = ordered_columns(&ctx.systems);
    let _ = write!(md, "| metric |");
    for (i, s) in columns.iter().enumerate() {
        let _ = write!(md, " {} |", s.label);
        if i == 1 && s.id == BASELINE {
            let _ = write!(md, " ratio |");
        }
        if s.id == FLOOR {
            let _ = write!(md, " tether ÷ floor |");
        }
    }
    let _ = writeln!(md);
    let _ = write!(md, "|---|");
    for (i, s) in columns.iter().enumerate() {
        let _ = write!(md, "---:|");
        if (i == 1 && s.id == BASELINE) || s.id == FLOOR {
            let _ = write!(md, "---:|");
        }
    }
    let _ = writeln!(md);
    for spec in METRICS {
        let _ = write!(md, "| {} |", spec.label);
        for (i, s) in columns.iter().enumerate() {
            let _ = write!(md, " {} |", cell(results, s.id, spec));
            if i == 1 && s.id == BASELINE {
                let _ = write!(md, " {} |", ratio_cell(results, BASELINE, spec.id));
            }
            if s.id == FLOOR {
                let _ = write!(md, " {} |", ratio_cell(results, FLOOR, spec.id));
            }
        }
        let _ = writeln!(md);
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "ratio = tether ÷ go-plugin (below 1 is better for times and memory, above 1 for rates); \
         tether ÷ floor is the same against the raw socket (for MB/s, the fraction of the \
         floor's rate tether reaches). \
         MB/s counts request and response payload bytes (10⁶ B/s). Memory is VmRSS. The floor \
         is `pingpong`: two processes exchanging the same bytes over a unix socket with \
         blocking reads and writes (launch: spawn → connect → one 64 B exchange); it has no \
         concurrency or host-memory figure. Callbacks use go-plugin's `examples/bidirectional` \
         contract (`counter-bench`, `tests/go/counterhost`): a `Put` whose `AddHelper` the host \
         serves on a fresh broker id for that call (host → plugin → host → plugin → host, \
         listener, dial and TLS handshake included) against a plain `Get`, interleaved; \
         go-plugin 1.0.1 runs it in plaintext (its broker dial-backs fail under AutoMTLS). \
         In the multiplexed mode (`--multiplex`, go-plugin ≥ 1.6 and tether) the same callback \
         is a knock/ack on the broker stream and a new yamux stream with its own TLS handshake \
         on the plugin's one connection. \
         Confinement and the lazy catalog are tether's alone (go-plugin has neither)."
    );
    let _ = writeln!(md);
    if !PENDING.is_empty() {
        let _ = writeln!(
            md,
            "Not measured yet (no numbers until the feature exists):"
        );
        for p in PENDING {
            let _ = writeln!(md, "- {p}");
        }
        let _ = writeln!(md);
    }

    let _ = writeln!(md, "### Goals (ratios from this run)");
    let _ = writeln!(md);
    let _ = writeln!(md, "| goal | measured | status |");
    let _ = writeln!(md, "|---|---:|---|");
    for goal in GOALS {
        let outcome = goal.judge(results);
        let status = match outcome.met {
            Some(true) => "met",
            Some(false) => "**not met**",
            None => "not measured",
        };
        let _ = writeln!(md, "| {} | {} | {status} |", goal.text, outcome.measured);
    }
    for p in PENDING_GOALS {
        let _ = writeln!(md, "| {p} | — | pending |");
    }
    if !results.errors().is_empty() {
        let _ = writeln!(md);
        let _ = writeln!(md, "Runs that failed (their cells show —):");
        for e in results.errors() {
            let _ = writeln!(md, "- `{}`", e.replace('`', "'"));
        }
    }
    let _ = writeln!(md, "{END_MARKER}");
    md
}

/// tether first, then go-plugin v1.8 (so the ratio column sits between them), then the rest.
fn ordered_columns(systems: &[System]) -> Vec<&System> {
    let rank = |id: &str| match id {
        TETHER => 0,
        BASELINE => 1,
        FLOOR => 2,
        _ => 3,
    };
    let mut columns: Vec<&System> = systems.iter().collect();
    columns.sort_by_key(|s| rank(s.id));
    columns
}
