//! `cargo xtask release` refuses bad input before it builds or pushes anything, and says why: a
//! version that is not SemVer, a platform we do not build, a registry that refuses the push. (A
//! dirty work tree for a release version: `release.rs`'s unit test, on a repository of its own.)
//! Fast: nothing is built.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

fn release(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("release")
        .args(args)
        .output()
        .expect("xtask runs")
}

fn refused(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "accepted: {stderr}");
    for built in [
        "release: cross builder",
        "release: localhost/release/",
        "release: pushed",
    ] {
        assert!(
            !stderr.contains(built),
            "something was built or pushed before the refusal: {stderr}"
        );
    }
    stderr
}

#[test]
fn a_version_that_is_not_semver_is_refused() {
    for bad in ["v1.2.3", "1.2", "latest", "01.2.3"] {
        let e = refused(&release(&[
            "--registry",
            "localhost:5001",
            "--version",
            bad,
        ]));
        assert!(
            e.contains(&format!("--version {bad:?} is not SemVer")),
            "{e}"
        );
    }
}

#[test]
fn an_unknown_platform_is_refused() {
    let e = refused(&release(&[
        "--registry",
        "localhost:5001",
        "--version",
        "0.0.0-test",
        "--platform",
        "linux/amd64,linux/arm/v6",
    ]));
    assert!(e.contains("unknown platform \"linux/arm/v6\""), "{e}");
    assert!(e.contains("linux/amd64 and linux/arm64"), "{e}");
}

/// A registry that answers every request with 403 denied, as one does for a repository the
/// credentials may not write: the release asks it once per repository and stops at the first no.
#[test]
fn a_registry_that_refuses_the_push_is_named_before_anything_is_pushed() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut line = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            // The rest of the head.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            seen.lock().unwrap().push(line.trim().to_owned());
            let body = r#"{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let registry = format!("localhost:{port}");
    let e = refused(&release(&[
        "--registry",
        &registry,
        "--version",
        "0.0.0-test",
    ]));
    assert!(
        e.contains(&format!(
            "the registry localhost:{port} refuses a push to node-controller (HTTP 403"
        )),
        "{e}"
    );
    assert!(
        e.contains("requested access to the resource is denied"),
        "the registry's words: {e}"
    );
    assert!(e.contains("nothing was built or pushed"), "{e}");
    let requests = requests.lock().unwrap().clone();
    assert_eq!(
        requests,
        ["POST /v2/node-controller/blobs/uploads/ HTTP/1.1"],
        "only the probe reached the registry"
    );
}

#[test]
fn a_registry_nobody_listens_on_is_refused_saying_so() {
    // A port just closed: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = refused(&release(&[
        "--registry",
        &format!("127.0.0.1:{port}"),
        "--version",
        "0.0.0-test",
    ]));
    assert!(
        e.contains(&format!(
            "the registry 127.0.0.1:{port} refuses a push to node-controller"
        )),
        "{e}"
    );
    assert!(
        e.to_lowercase().contains("connect"),
        "the reason is curl's: {e}"
    );
}
