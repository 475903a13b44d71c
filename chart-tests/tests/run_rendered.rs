//! Run what the chart renders, each rendered Deployment's container as a local process of the
//! binary its image holds (see `chart_tests::scenario`; `run_images.rs` runs the images themselves).

use chart_tests::run::Fleet;
use chart_tests::scenario::rendered_controllers_do_their_jobs;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_rendered_controllers_do_their_jobs_with_only_the_rendered_rbac() {
    rendered_controllers_do_their_jobs(Fleet::new("chart-run-")).await;
}
