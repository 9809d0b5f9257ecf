//! The classic Prometheus text format (0.0.4) of an OpenMetrics exposition, for scrapers
//! that do not ask for OpenMetrics (`curl`, `promtool check metrics`).
//!
//! `prometheus-client` writes OpenMetrics only, where a counter family `m3_x` has samples
//! `m3_x_total`; the classic format names the family after its samples. So this
//! adaptation renames the `# HELP`/`# TYPE` lines of counter families to `..._total` and
//! drops the OpenMetrics-only `# UNIT` and `# EOF` lines. Samples pass through unchanged:
//! every value and label is still encoded by the library.

/// The content type of the classic Prometheus text format (0.0.4), which
/// [`Metrics::render_for`](super::Metrics::render_for) answers to scrapers that do not ask for
/// OpenMetrics.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `openmetrics` in the classic text format.
pub(super) fn to_classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let name = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_owned()
            };
            if let Some(help) = help.take() {
                let text = help.split_once(' ').map_or("", |(_, text)| text);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_families_take_their_samples_name() {
        let openmetrics = "# HELP m3_x Things.\n# TYPE m3_x counter\nm3_x_total 2\n\
            # HELP m3_g A gauge.\n# TYPE m3_g gauge\nm3_g 1\n# EOF\n";
        assert_eq!(
            to_classic(openmetrics),
            "# HELP m3_x_total Things.\n# TYPE m3_x_total counter\nm3_x_total 2\n\
             # HELP m3_g A gauge.\n# TYPE m3_g gauge\nm3_g 1\n"
        );
    }
}
