//! OTLP export is set up inside a Tokio runtime (where building the blocking HTTP client would panic
//! if done naively) and flushed on drop, even when the collector is unreachable.

use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_exported_over_otlp_http_and_flushed_on_drop() {
    controller_kit::install_crypto_provider();
    // A fake collector: accept one connection and read the request line.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let collector = std::thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).to_string()
    });
    // SAFETY-free: edition 2024 makes set_var unsafe; use the OTLP-specific env through a child
    // process instead would be heavier, so this test binary only sets it before any thread reads it.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"));
    }
    let guard = controller_kit::telemetry::init(
        "otlp-test",
        controller_kit::config::LogFormat::Json,
        "info",
    );
    assert!(guard.exporting());
    {
        let span = tracing::info_span!("reconcile", node = "n1");
        let _e = span.enter();
        tracing::info!("inside a reconcile");
    }
    drop(guard); // flush + shutdown: the batch is sent now
    let request = collector.join().unwrap();
    assert!(request.starts_with("POST /v1/traces"), "{request}");
}
