//! Where `cargo xtask test`'s time went: each section's heading as it starts, and a table of every
//! section (and every real-cluster test) with its seconds at the end, passed or failed, so a slow
//! CI log says where at a glance. A run past [`WARM_BUDGET`] says so plainly.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a warm run may take (CI stops a run at 90 minutes; a cold one is allowed 45).
pub const WARM_BUDGET: Duration = Duration::from_secs(60 * 60);

struct Timeline {
    started: Instant,
    sections: Vec<Section>,
}

/// A section: its title, when it started, and the steps timed inside it.
struct Section {
    title: String,
    started: Instant,
    steps: Vec<(String, Duration)>,
}

static TIMELINE: Mutex<Option<Timeline>> = Mutex::new(None);

fn with<T>(f: impl FnOnce(&mut Timeline) -> T) -> T {
    let mut guard = TIMELINE.lock().unwrap_or_else(|e| e.into_inner());
    let timeline = guard.get_or_insert_with(|| Timeline {
        started: Instant::now(),
        sections: Vec::new(),
    });
    f(timeline)
}

/// Starts a section: prints its heading with the time since the run began.
pub fn section(title: &str) {
    let at = with(|t| {
        t.sections.push(Section {
            title: title.to_owned(),
            started: Instant::now(),
            steps: Vec::new(),
        });
        t.started.elapsed()
    });
    eprintln!("\n=== {title} (at {:.0} s)", at.as_secs_f64());
}

/// A step of the current section that took `took` (a real-cluster test), for the table.
pub fn step(name: &str, took: Duration) {
    with(|t| {
        if let Some(section) = t.sections.last_mut() {
            section.steps.push((name.to_owned(), took));
        }
    });
}

/// Every section and step with its seconds, in order.
fn rows() -> (Vec<(String, Duration)>, Duration) {
    with(|t| {
        let now = Instant::now();
        let mut rows = Vec::new();
        for (i, s) in t.sections.iter().enumerate() {
            let ended = t.sections.get(i + 1).map_or(now, |next| next.started);
            rows.push((s.title.clone(), ended.duration_since(s.started)));
            for (name, took) in &s.steps {
                rows.push((format!("  {name}"), *took));
            }
        }
        (rows, t.started.elapsed())
    })
}

/// Writes the rows to `path` (`<seconds>\t<name>` per line), for the process that ran this one
/// beside its own sections ([`load`]).
pub fn save(path: &std::path::Path) -> std::io::Result<()> {
    let text: String = rows()
        .0
        .iter()
        .map(|(name, took)| format!("{:.3}\t{name}\n", took.as_secs_f64()))
        .collect();
    std::fs::write(path, text)
}

/// The rows [`save`] wrote; none when the file is missing or unreadable (the process failed
/// before it wrote them).
pub fn load(path: &std::path::Path) -> Vec<(String, Duration)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (secs, name) = line.split_once('\t')?;
            Some((name.to_owned(), Duration::from_secs_f64(secs.parse().ok()?)))
        })
        .collect()
}

/// The table: every section and step with its seconds, the total, and the budget's word.
/// `cold` says whether this run built the tools it uses (then the budget does not apply).
pub fn print(cold: bool) {
    let (rows, total) = rows();
    eprintln!("\n=== where the time went");
    for (name, took) in &rows {
        eprintln!("{:>7.0} s  {name}", took.as_secs_f64());
    }
    eprintln!(
        "{:>7.0} s  total ({:.1} min)",
        total.as_secs_f64(),
        total.as_secs_f64() / 60.0
    );
    if let Some(warning) = over_budget(total, cold) {
        eprintln!("\n{warning}");
    }
}

/// The plain warning for a warm run past [`WARM_BUDGET`].
fn over_budget(total: Duration, cold: bool) -> Option<String> {
    (!cold && total > WARM_BUDGET).then(|| {
        format!(
            "WARNING: this warm run took {:.0} min, past the {} minutes a warm `cargo xtask test` \
             may take (CI stops a run at 90). The table above says which section grew: make it \
             faster before adding more.",
            total.as_secs_f64() / 60.0,
            WARM_BUDGET.as_secs() / 60
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_rows_load_as_written() {
        section("one");
        step("a step", Duration::from_millis(1500));
        let path = std::env::temp_dir().join(format!("timeline-test-{}", std::process::id()));
        save(&path).unwrap();
        let loaded = load(&path);
        let _ = std::fs::remove_file(&path);
        assert_eq!(loaded[0].0, "one");
        assert_eq!(
            loaded[1],
            ("  a step".to_owned(), Duration::from_millis(1500))
        );
        assert!(load(&path).is_empty(), "a missing file: no rows");
    }

    #[test]
    fn a_warm_run_past_the_budget_says_so_and_a_cold_one_does_not() {
        let over = WARM_BUDGET + Duration::from_secs(60);
        let said = over_budget(over, false).expect("a warning");
        assert!(
            said.contains("61 min") && said.contains("60 minutes"),
            "{said}"
        );
        assert!(
            over_budget(over, true).is_none(),
            "cold runs are judged apart"
        );
        assert!(over_budget(WARM_BUDGET, false).is_none());
    }
}
