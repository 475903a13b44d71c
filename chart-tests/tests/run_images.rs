//! Run what the chart renders from the images themselves: each rendered Deployment's container
//! started by podman from `localhost/<image>:$CHART_TESTS_IMAGE_TAG`, with the rendered
//! securityContext, its ServiceAccount token at the in-cluster path and the apiserver named by
//! `KUBERNETES_SERVICE_HOST`/`PORT` (see `chart_tests::pod`). Then two broken images must fail.
//!
//! These need the images, so they are ignored by a plain `cargo test`: `cargo xtask test` builds
//! the images (`cargo xtask images`) and runs them with `--ignored`.

use std::path::Path;

use chart_tests::run::Fleet;
use chart_tests::scenario::{lifecycle_controller_image_runs, rendered_controllers_do_their_jobs};

fn tag() -> String {
    std::env::var("CHART_TESTS_IMAGE_TAG").unwrap_or_else(|_| "dev".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs the images: `cargo xtask images`, then `--ignored` (cargo xtask test does both)"]
async fn the_rendered_images_do_their_jobs_with_only_the_rendered_rbac() {
    rendered_controllers_do_their_jobs(Fleet::in_containers("chart-images-", &tag())).await;
}

/// Builds `localhost/lifecycle-controller:<new_tag>` from `containerfile` in `context`.
fn build_variant(new_tag: &str, containerfile: &str, context: &Path) {
    let podman = testenv::ensure_podman().expect("podman");
    std::fs::write(context.join("Containerfile"), containerfile).unwrap();
    let out = podman
        .command()
        .args(["build", "--pull=never", "--quiet", "--tag"])
        .arg(format!("localhost/lifecycle-controller:{new_tag}"))
        .arg(context)
        .output()
        .expect("podman build");
    assert!(
        out.status.success(),
        "building the variant {new_tag}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The check the broken images must fail passes on the image as built, so what fails below is the
/// breakage, not the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the images: `cargo xtask images`, then `--ignored` (cargo xtask test does both)"]
async fn broken_images_fail_and_the_image_as_built_does_not() {
    let tag = tag();
    lifecycle_controller_image_runs("image-as-built", &tag)
        .await
        .unwrap_or_else(|e| panic!("the image as built: {e}"));

    let context = tempfile::tempdir().unwrap();
    // A final stage that copies the wrong binary.
    build_variant(
        "wrong-binary",
        &format!(
            "FROM localhost/lifecycle-controller:{tag}\n\
             COPY --from=localhost/node-controller:{tag} /usr/local/bin/node-controller \
             /usr/local/bin/lifecycle-controller\n"
        ),
        context.path(),
    );
    let wrong = lifecycle_controller_image_runs("image-wrong-binary", "wrong-binary").await;
    let err =
        wrong.expect_err("an image holding node-controller must not pass as lifecycle-controller");
    eprintln!("wrong binary, as expected: {err}");

    // A binary that needs a library the runtime base lacks: the dynamically linked build of the
    // tests, on the libc-less base.
    std::fs::copy(
        chart_tests::binary("lifecycle-controller"),
        context.path().join("lifecycle-controller"),
    )
    .unwrap();
    build_variant(
        "needs-libc",
        &format!(
            "FROM localhost/lifecycle-controller:{tag}\n\
             COPY lifecycle-controller /usr/local/bin/lifecycle-controller\n"
        ),
        context.path(),
    );
    let dynamic = lifecycle_controller_image_runs("image-needs-libc", "needs-libc").await;
    let err = dynamic.expect_err("a dynamically linked binary cannot start on the static base");
    eprintln!("missing library, as expected: {err}");
    let podman = testenv::ensure_podman().expect("podman");
    for variant in ["wrong-binary", "needs-libc"] {
        let _ = podman
            .command()
            .args(["rmi", &format!("localhost/lifecycle-controller:{variant}")])
            .output();
    }
}
