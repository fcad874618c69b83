//! Numbers as the report shows them.

/// A ratio with two decimals below 10 (`0.21`, `1.48`: enough to tell `1.48` from a `1.5`
/// goal), whole above (`12`).
#[must_use]
pub fn format_ratio(r: f64) -> String {
    if r < 10.0 {
        format!("{r:.2}")
    } else {
        format!("{r:.0}")
    }
}

/// A value in `unit`, rounded for reading.
#[must_use]
pub fn format_value(v: f64, unit: &str) -> String {
    match unit {
        "calls/s" | "MB/s" | "kB" => thousands(v.round()),
        "ms" | "µs" | "MB" if v < 10.0 => format!("{v:.2}"),
        "ms" | "µs" | "MB" if v < 100.0 => format!("{v:.1}"),
        _ => thousands(v.round()),
    }
}

/// A value and its unit, rounded for reading (`12.3 µs`, `1.23×`).
#[must_use]
pub fn with_unit(v: f64, unit: &str) -> String {
    if unit == "×" {
        format!("{}×", format_ratio(v))
    } else {
        format!("{} {unit}", format_value(v, unit))
    }
}

/// An integral value with `,` between thousands.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 { format!("-{out}") } else { out }
}
