//! node-controller binary: parse flags, build the cloud, run under controller-kit.
use std::process::ExitCode;

use clap::Parser;
use controller_kit::CommonArgs;
use node_controller::NodeArgs;

/// The node controller of cloud-controllers (upstream cloud-node-controller).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    node: NodeArgs,
}

fn main() -> ExitCode {
    let args: Args = controller_kit::cli::parse();
    let node = args.node;
    controller_kit::runtime::main(
        &node_controller::INFO,
        args.common,
        |p| node.validate(p),
        |rt, settings| async move {
            let cloud = controller_kit::cloud::connect(&rt).await?;
            node_controller::start(rt, cloud, settings).await
        },
    )
}
