//! route-controller binary: parse flags, build the cloud, run under controller-kit.
use std::process::ExitCode;

use clap::Parser;
use controller_kit::CommonArgs;
use route_controller::RouteArgs;

/// The route controller of cloud-controllers (upstream node-route-controller).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    route: RouteArgs,
}

fn main() -> ExitCode {
    let args: Args = controller_kit::cli::parse();
    let route = args.route;
    let common = args.common.clone();
    controller_kit::runtime::main(
        &route_controller::INFO,
        args.common,
        |p| route.validate(&common, p),
        |rt, settings| async move {
            let cloud = controller_kit::cloud::connect(&rt).await?;
            route_controller::start(rt, cloud, settings).await
        },
    )
}
