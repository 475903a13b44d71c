//! node-controller binary: parse flags, build the cloud, run under controller-kit.
use std::process::ExitCode;

use clap::Parser;
use controller_kit::CommonArgs;

/// The node controller of cloud-controllers (upstream cloud-node-controller).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
}

fn main() -> ExitCode {
    let args = Args::parse();
    controller_kit::runtime::main(
        &node_controller::INFO,
        args.common,
        |_| (),
        |rt, ()| async move {
            let cloud = controller_kit::cloud::build(rt.config()).await?;
            node_controller::start(rt, cloud).await
        },
    )
}
