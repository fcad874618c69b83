//! `bench-results.json`.

use serde_json::{Value as Json, json};

use super::context::Context;
use super::goals::{GOALS, PENDING, PENDING_GOALS};
use super::results::{BASELINE, FLOOR, Results, Summary, TETHER};
use crate::suite::{METRICS, MetricSpec, Value};

/// `bench-results.json`.
#[must_use]
pub fn json(results: &Results, ctx: &Context) -> Json {
    let metric_json = |spec: &MetricSpec| {
        let mut values = serde_json::Map::new();
        for s in &ctx.systems {
            let rounds: Vec<Json> = results
                .rounds(s.id, spec.id)
                .iter()
                .map(|v| match v {
                    Value::Number(n) => json!(n),
                    Value::Failed(code) => json!({ "failed": code }),
                })
                .collect();
            if rounds.is_empty() {
                continue;
            }
            let summary = match results.summary(s.id, spec.id) {
                Some(Summary::Median(m)) => json!({ "median": m }),
                Some(Summary::Failed(code)) => json!({ "failed": code }),
                None => Json::Null,
            };
            values.insert(
                s.id.to_owned(),
                json!({ "summary": summary, "rounds": rounds }),
            );
        }
        json!({
            "id": spec.id,
            "label": spec.label,
            "unit": spec.unit,
            "better": format!("{:?}", spec.better).to_lowercase(),
            "ratio_tether_to_go18": results.ratio(TETHER, BASELINE, spec.id),
            "ratio_tether_to_floor": results.ratio(TETHER, FLOOR, spec.id),
            "values": values,
        })
    };
    let c = &ctx.counts;
    json!({
        "generated_by": "tether-bench (bash bench/run.sh)",
        "date": ctx.date,
        "quick": ctx.quick,
        "machine": ctx.machine,
        "load_average_before": ctx.load_before,
        "load_average_after": ctx.load_after,
        "tools": ctx.tools,
        "counts": {
            "rounds": c.rounds, "launches": c.launches, "unary_calls": c.unary_calls,
            "rate_calls": c.rate_calls, "warmup": c.warmup,
            "rate_warmup": c.rate_warmup, "rounds_1mib": c.rounds_1mib,
            "rounds_64mib": c.rounds_64mib, "live_plugins": c.live_plugins,
            "callback_pairs": c.callback_pairs, "callback_warmup": c.callback_warmup,
            "catalog_manifests": c.catalog_manifests, "catalog_used": c.catalog_used,
            "catalog_repeat": c.catalog_repeat,
        },
        "systems": ctx.systems.iter().map(|s| json!({ "id": s.id, "label": s.label })).collect::<Vec<_>>(),
        "metrics": METRICS.iter().map(metric_json).collect::<Vec<_>>(),
        "goals": GOALS.iter().map(|g| {
            let o = g.judge(results);
            json!({ "goal": g.text, "metric": g.metric, "met": o.met, "measured": o.measured })
        }).collect::<Vec<_>>(),
        "pending": PENDING.iter().chain(PENDING_GOALS).collect::<Vec<_>>(),
        "errors": results.errors(),
    })
}
