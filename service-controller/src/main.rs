//! service-controller binary: parse flags, build the cloud, run under controller-kit.
use std::process::ExitCode;

use clap::Parser;
use controller_kit::CommonArgs;
use service_controller::ServiceArgs;

/// The service controller of cloud-controllers (upstream service-lb-controller).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    service: ServiceArgs,
}

fn main() -> ExitCode {
    let args: Args = controller_kit::cli::parse();
    let service = args.service;
    controller_kit::runtime::main(
        &service_controller::INFO,
        args.common,
        |p| service.validate(p),
        |rt, settings| async move {
            let cloud = controller_kit::cloud::connect(&rt).await?;
            service_controller::start(rt, cloud, settings).await
        },
    )
}
