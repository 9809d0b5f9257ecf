//! Comparing two subjects on a noisy machine: each pair (m3-rs, bare sqlx) is measured
//! several times, alternating which runs first, and judged by the median of the
//! per-repetition ratios (a burst of load from elsewhere then hits one repetition, not the
//! verdict).

/// One subject measured as interleaved pairs.
pub(crate) struct Pair {
    /// What was measured (`single execution (sequential)`, `64 concurrent executions`).
    pub(crate) name: String,
    /// m3-rs and bare sqlx rounds/s of each repetition, in the order run.
    pub(crate) runs: Vec<(f64, f64)>,
}

impl Pair {
    /// m3-rs / bare sqlx of each repetition.
    pub(crate) fn ratios(&self) -> Vec<f64> {
        self.runs.iter().map(|(ours, bare)| ours / bare).collect()
    }

    /// The median of [`ratios`](Self::ratios).
    pub(crate) fn median_ratio(&self) -> f64 {
        median(&self.ratios())
    }

    /// The median m3-rs rate.
    pub(crate) fn median_ours(&self) -> f64 {
        median(&self.runs.iter().map(|(ours, _)| *ours).collect::<Vec<_>>())
    }

    /// The median bare sqlx rate.
    pub(crate) fn median_bare(&self) -> f64 {
        median(&self.runs.iter().map(|(_, bare)| *bare).collect::<Vec<_>>())
    }
}

/// Whether repetition `index` runs m3-rs first (even) or bare sqlx first (odd).
pub(crate) fn ours_first(index: usize) -> bool {
    index.is_multiple_of(2)
}

/// The median of `values` (the mean of the middle two for an even count; 0 for none).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    match (sorted.len(), sorted.get(mid)) {
        (_, None) => 0.0,
        (n, Some(upper)) if n.is_multiple_of(2) => {
            (sorted.get(mid - 1).copied().unwrap_or(*upper) + upper) / 2.0
        }
        (_, Some(middle)) => *middle,
    }
}

fn joined(values: impl Iterator<Item = String>) -> String {
    values.collect::<Vec<_>>().join(" ")
}

/// A pair's summary cells: m3-rs and bare sqlx rates, ratios, median ratio.
fn cells(pair: &Pair) -> [String; 4] {
    [
        joined(pair.runs.iter().map(|(ours, _)| format!("{ours:.1}"))),
        joined(pair.runs.iter().map(|(_, bare)| format!("{bare:.1}"))),
        joined(pair.ratios().iter().map(|r| format!("{:.0}%", 100.0 * r))),
        format!("{:.0}%", 100.0 * pair.median_ratio()),
    ]
}

/// Prints the summary: every repetition of every pair, the median ratio, and the two
/// target ratios (single / bare sqlx; most concurrent / single, on medians, beside bare
/// sqlx's own most concurrent / single).
pub(crate) fn print_summary(title: &str, single: &Pair, concurrent: &[(usize, Pair)]) {
    println!();
    println!("== summary: {title}");
    let pairs: Vec<&Pair> = std::iter::once(single)
        .chain(concurrent.iter().map(|(_, pair)| pair))
        .collect();
    let cells: Vec<[String; 4]> = pairs.iter().map(|pair| cells(pair)).collect();
    let header = ["m3-rs each", "bare sqlx each", "ratio each", "median"];
    // Each column as wide as its widest cell, so any number of repetitions lines up.
    let widths: Vec<usize> = (0..4)
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].len())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |name: &str, row: &[&str]| {
        let mut text = format!("{name:<32}");
        for (cell, width) in row.iter().zip(&widths) {
            text.push_str(&format!("  {cell:>width$}"));
        }
        println!("{text}");
    };
    line("subject (rounds/s)", &header);
    for (pair, row) in pairs.iter().zip(&cells) {
        line(&pair.name, &row.each_ref().map(String::as_str));
    }
    if let Some((executions, pair)) = concurrent.iter().max_by_key(|(e, _)| *e) {
        println!(
            "m3-rs postgres {executions} concurrent / single: {:.1}x (medians {:.1} / {:.1}; target >= 4x)",
            pair.median_ours() / single.median_ours(),
            pair.median_ours(),
            single.median_ours()
        );
        // What this machine and server allow: the same ratio of the bare floor, same run.
        println!(
            "bare sqlx {executions} concurrent / single: {:.1}x (medians {:.1} / {:.1}; the machine's bound on the ratio above)",
            pair.median_bare() / single.median_bare(),
            pair.median_bare(),
            single.median_bare()
        );
    }
    println!(
        "m3-rs postgres single / bare sqlx: {:.0}% (median of {} interleaved repetitions; target >= 80%)",
        100.0 * single.median_ratio(),
        single.runs.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_even_and_empty_sets() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-9);
        assert!((median(&[4.0, 1.0, 3.0, 2.0]) - 2.5).abs() < 1e-9);
        assert!(median(&[]).abs() < 1e-9);
    }

    #[test]
    fn repetitions_alternate_the_order_and_ratios_pair_up() {
        assert!(ours_first(0) && !ours_first(1) && ours_first(2));
        let pair = Pair {
            name: "x".into(),
            runs: vec![(50.0, 100.0), (90.0, 100.0), (10.0, 100.0)],
        };
        assert!((pair.median_ratio() - 0.5).abs() < 1e-9);
        assert!((pair.median_ours() - 50.0).abs() < 1e-9);
        assert!((pair.median_bare() - 100.0).abs() < 1e-9);
        let [ours, bare, ratios, median] = cells(&pair);
        assert_eq!(ours, "50.0 90.0 10.0");
        assert_eq!(bare, "100.0 100.0 100.0");
        assert_eq!(ratios, "50% 90% 10%");
        assert_eq!(median, "50%");
    }
}
