//! tracing setup: text or JSON logs (RUST_LOG filter, else the one `--v`/`--vmodule` give), plus OTLP trace export
//! (http/protobuf, blocking reqwest client in the batch processor's own thread) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set. The returned guard flushes and shuts the exporter down.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogFormat;

/// Flushes and shuts down the OTLP exporter on drop.
#[derive(Debug, Default)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Whether traces are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // The blocking HTTP client must not be driven from an async context: use a plain thread.
            let joined = std::thread::spawn(move || {
                let _ = provider.force_flush();
                provider.shutdown()
            })
            .join();
            if let Ok(Err(e)) = joined {
                eprintln!("OpenTelemetry shutdown failed: {e}");
            }
        }
    }
}

fn otlp_provider(service: &str) -> Result<Option<SdkTracerProvider>, String> {
    let endpoint_set = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .map(|v| !v.is_empty())
        .unwrap_or(false)
        || std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .map(|v| !v.is_empty())
            .unwrap_or(false);
    if !endpoint_set {
        return Ok(None);
    }
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| service.to_string());
    // Building the blocking reqwest client inside a Tokio runtime panics; build it on a plain thread.
    std::thread::spawn(move || {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|e| format!("cannot build the OTLP exporter: {e}"))?;
        Ok(Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(Resource::builder().with_service_name(service).build())
                .build(),
        ))
    })
    .join()
    .map_err(|_| "OTLP exporter setup panicked".to_string())?
}

/// Installs the global subscriber, filtering by RUST_LOG when set, else by `default_filter` (e.g.
/// `info`). Calling it twice is harmless (the second call only returns a guard without exporter),
/// so tests may call it too.
pub fn init(service: &str, format: LogFormat, default_filter: &str) -> TelemetryGuard {
    let filter =
        || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let fmt_layer = match format {
        // Colours only on a terminal: `kubectl logs` and log collectors would show the escapes.
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_target(true)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let (provider, otel_error) = match otlp_provider(service) {
        Ok(p) => (p, None),
        Err(e) => (None, Some(e)),
    };
    let otel_layer = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(service.to_string()))
            .with_filter(filter())
    });
    let installed = tracing_subscriber::registry()
        .with(fmt_layer.with_filter(filter()))
        .with(otel_layer)
        .try_init()
        .is_ok();
    if let Some(e) = otel_error {
        tracing::warn!(error = %e, "OTLP export disabled");
    }
    if !installed {
        // A subscriber already exists (tests); do not keep an exporter nobody feeds.
        return TelemetryGuard::default();
    }
    if provider.is_some() {
        tracing::info!("exporting traces over OTLP");
    }
    TelemetryGuard { provider }
}
