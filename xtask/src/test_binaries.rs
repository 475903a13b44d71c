//! `cargo xtask test`'s workspace tests: the test binaries of `cargo test --workspace
//! --all-targets`, run a few at a time instead of one after another.
//!
//! Most of them spend their time waiting (for a kube-apiserver to start, cloud-sim's actions to
//! finish, a controller to reconcile), so on two cores three at once take about a third of the
//! time, and every test still runs as `cargo test` would run it: the same binary, the same working
//! directory (its package's), the same arguments. Each binary's output is printed whole when it
//! ends, so outputs never interleave, and every binary runs even when one fails (as with
//! `--no-fail-fast`). The slowest binaries of the last run start first; their durations are kept in
//! `target/xtask-test-durations.tsv`.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// One test binary as cargo built it.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// `package kind target`, e.g. `service-controller test shared`: what the output calls it.
    name: String,
    executable: PathBuf,
    package: String,
    package_dir: PathBuf,
}

/// How one binary ended.
struct Outcome {
    binary: TestBinary,
    passed: bool,
    took: Duration,
    output: String,
}

/// Builds the test binaries (`cargo test --workspace --all-targets --no-run` with the cargo
/// arguments before `--`); `None` when the build failed.
pub fn build_all(args: &[String]) -> anyhow::Result<Option<Vec<TestBinary>>> {
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    build(&args[..split])
}

/// Runs `binaries` a few at a time with the arguments after `--`, and prints each one's output as
/// it ends. True when every binary passed.
pub fn run_built(binaries: Vec<TestBinary>, args: &[String]) -> anyhow::Result<bool> {
    let split = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let binary_args = args.get(split + 1..).unwrap_or_default();
    let durations_file = crate::images::repo().join("target/xtask-test-durations.tsv");
    let previous = read_durations(&durations_file);
    let mut queue: Vec<TestBinary> = binaries;
    // Longest first (unknown ones count as long), so the last to start is a short one.
    queue.sort_by_key(|b| {
        std::cmp::Reverse(previous.get(&b.name).copied().unwrap_or(Duration::MAX))
    });
    let jobs = parallel_jobs();
    eprintln!(
        "workspace tests: {} test binaries, {jobs} at a time, slowest of the last run first",
        queue.len()
    );

    let started = Instant::now();
    let queue = Mutex::new(VecDeque::from(queue));
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().expect("queue").pop_front();
                    let Some(binary) = next else { break };
                    let outcome = run_one(binary, binary_args);
                    print_outcome(&outcome);
                    outcomes.lock().expect("outcomes").push(outcome);
                }
            });
        }
    });
    let outcomes = outcomes.into_inner().expect("outcomes");

    write_durations(&durations_file, &outcomes);
    let serial: Duration = outcomes.iter().map(|o| o.took).sum();
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| o.binary.name.as_str())
        .collect();
    eprintln!(
        "workspace tests: {} binaries in {:.0} s ({:.0} s one after another), {} failed{}",
        outcomes.len(),
        started.elapsed().as_secs_f64(),
        serial.as_secs_f64(),
        failed.len(),
        if failed.is_empty() {
            String::new()
        } else {
            format!(": {}", failed.join(", "))
        }
    );
    Ok(failed.is_empty())
}

/// Two cores run three binaries: while one waits for its apiserver, the others compute.
fn parallel_jobs() -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    (cores + 1).min(8)
}

/// `cargo test --no-run`: the compiler's messages go to the terminal as usual, the executables
/// are read from cargo's JSON. None when the build failed.
fn build(cargo_args: &[String]) -> anyhow::Result<Option<Vec<TestBinary>>> {
    let output = super::cargo()
        .args(["test", "--workspace", "--all-targets", "--no-run"])
        .arg("--message-format=json-render-diagnostics")
        .args(cargo_args)
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Rendered diagnostics arrive on stdout as JSON too; print them as cargo would have.
    for line in stdout.lines() {
        if let Ok(message) = serde_json::from_str::<serde_json::Value>(line)
            && message["reason"] == "compiler-message"
            && let Some(rendered) = message["message"]["rendered"].as_str()
        {
            eprint!("{rendered}");
        }
    }
    if !output.status.success() {
        return Ok(None);
    }
    Ok(Some(stdout.lines().filter_map(test_binary).collect()))
}

/// The test binary a line of cargo's JSON names, if it names one.
fn test_binary(line: &str) -> Option<TestBinary> {
    let message: serde_json::Value = serde_json::from_str(line).ok()?;
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let manifest = Path::new(message["manifest_path"].as_str()?);
    let package_dir = manifest.parent()?.to_path_buf();
    // `path+file:///…/dir#0.1.0` (the package is named as its directory) or `…#name@0.1.0`.
    let (_, version) = message["package_id"].as_str()?.rsplit_once('#')?;
    let package = match version.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => package_dir.file_name()?.to_string_lossy().into_owned(),
    };
    let kind = message["target"]["kind"][0].as_str().unwrap_or("lib");
    let target = message["target"]["name"].as_str().unwrap_or_default();
    Some(TestBinary {
        name: format!("{package} {kind} {target}"),
        executable,
        package,
        package_dir,
    })
}

/// Runs one binary as `cargo test` does (in its package's directory, with cargo's variables),
/// its stdout and stderr into one file so that their lines keep their order.
fn run_one(binary: TestBinary, binary_args: &[String]) -> Outcome {
    let started = Instant::now();
    let result = (|| -> anyhow::Result<(bool, String)> {
        let mut log = tempfile::tempfile()?;
        let status = Command::new(&binary.executable)
            .args(binary_args)
            .current_dir(&binary.package_dir)
            .env("CARGO_MANIFEST_DIR", &binary.package_dir)
            .env("CARGO_PKG_NAME", &binary.package)
            .env(
                "CARGO",
                std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log.try_clone()?)
            .status()
            .with_context(|| format!("running {}", binary.executable.display()))?;
        use std::io::{Read as _, Seek as _};
        log.rewind()?;
        let mut output = String::new();
        log.read_to_string(&mut output)?;
        Ok((status.success(), output))
    })();
    let (passed, output) = result.unwrap_or_else(|e| (false, format!("{e:#}\n")));
    Outcome {
        binary,
        passed,
        took: started.elapsed(),
        output,
    }
}

fn print_outcome(outcome: &Outcome) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\n--- {} ({}): {} in {:.1} s",
        outcome.binary.name,
        outcome.binary.executable.display(),
        if outcome.passed { "ok" } else { "FAILED" },
        outcome.took.as_secs_f64()
    );
    let _ = err.write_all(outcome.output.as_bytes());
}

fn read_durations(path: &Path) -> HashMap<String, Duration> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (seconds, name) = line.split_once('\t')?;
            Some((
                name.to_owned(),
                Duration::from_secs_f64(seconds.parse().ok()?),
            ))
        })
        .collect()
}

fn write_durations(path: &Path, outcomes: &[Outcome]) {
    let text: String = outcomes
        .iter()
        .map(|o| format!("{:.1}\t{}\n", o.took.as_secs_f64(), o.binary.name))
        .collect();
    // Only an ordering hint: a cache that cannot be written costs the next run its order.
    let _ = std::fs::write(path, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_binaries_are_read_from_cargo_json() {
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let line = serde_json::json!({
            "reason": "compiler-artifact",
            "package_id": format!("path+file://{}#0.1.0", env!("CARGO_MANIFEST_DIR")),
            "manifest_path": manifest,
            "target": {"kind": ["test"], "name": "cluster_chart"},
            "profile": {"test": true},
            "executable": "/t/debug/deps/cluster_chart-0123",
        })
        .to_string();
        let binary = test_binary(&line).expect("a test binary");
        assert_eq!(binary.name, "xtask test cluster_chart");
        assert_eq!(binary.package, "xtask");
        assert_eq!(binary.package_dir, Path::new(env!("CARGO_MANIFEST_DIR")));

        // A package named otherwise than its directory says so in its id.
        let renamed = line.replace("#0.1.0", "#other-name@0.1.0");
        assert_eq!(test_binary(&renamed).unwrap().package, "other-name");

        // The binaries `cargo xtask test` builds for the chart tests are not test binaries.
        let bin = line.replace(r#""test":true"#, r#""test":false"#);
        assert!(test_binary(&bin).is_none());
        assert!(test_binary(r#"{"reason":"build-finished","success":true}"#).is_none());
    }

    #[test]
    fn durations_survive_a_round_trip_and_bad_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.tsv");
        std::fs::write(&path, "12.5\ta test x\nnot a line\nx\tb lib y\n").unwrap();
        let read = read_durations(&path);
        assert_eq!(read.len(), 1);
        assert_eq!(read["a test x"], Duration::from_millis(12_500));
    }
}
