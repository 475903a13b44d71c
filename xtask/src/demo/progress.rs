//! One line per story step, with the elapsed time ticking while it waits (on a terminal), or a
//! plain line when it is done (in CI logs and pipes).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Shows steps as they run.
#[derive(Debug)]
pub struct Progress {
    started: Instant,
    live: bool,
}

impl Progress {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            live: std::io::stdout().is_terminal(),
        }
    }

    /// Seconds since the story started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Runs `wait` (which polls until what `what` describes is true) and prints the result.
    pub async fn step<T>(
        &self,
        what: &str,
        wait: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        let begun = Instant::now();
        let line = |mark: &str, note: &str| {
            format!(
                "{mark} [{:>5.1}s] {what} {note}",
                self.elapsed().as_secs_f64()
            )
        };
        let result = if self.live {
            let ticker = async {
                loop {
                    print!(
                        "\r\x1b[2K{}",
                        line("…", &format!("({:.1}s)", begun.elapsed().as_secs_f64()))
                    );
                    let _ = std::io::stdout().flush();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            };
            tokio::select! {
                r = wait => r,
                _ = ticker => unreachable!("the ticker never ends"),
            }
        } else {
            wait.await
        };
        let took = format!("({:.1}s)", begun.elapsed().as_secs_f64());
        let clear = if self.live { "\r\x1b[2K" } else { "" };
        match &result {
            Ok(_) => println!("{clear}{}", line("✔", &took)),
            Err(e) => println!("{clear}{}: {e:#}", line("✘", &took)),
        }
        result
    }
}
