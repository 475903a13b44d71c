//! lifecycle-controller binary: parse flags, build the cloud, run under controller-kit.
use std::process::ExitCode;

use clap::Parser;
use controller_kit::CommonArgs;
use lifecycle_controller::LifecycleArgs;

/// The lifecycle controller of cloud-controllers (upstream cloud-node-lifecycle-controller).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    lifecycle: LifecycleArgs,
}

fn main() -> ExitCode {
    let args: Args = controller_kit::cli::parse();
    let lifecycle = args.lifecycle;
    let common = args.common.clone();
    controller_kit::runtime::main(
        &lifecycle_controller::INFO,
        args.common,
        |p| lifecycle.validate(&common, p),
        |rt, settings| async move {
            let cloud = controller_kit::cloud::connect(&rt).await?;
            lifecycle_controller::start(rt, cloud, settings).await
        },
    )
}
