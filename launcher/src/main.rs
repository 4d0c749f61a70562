//! `rkcm`: the one product binary. Each role is a subcommand, so a static pod runs one
//! image and the launcher re-executes itself for its children.

mod certs;
#[cfg(feature = "dev")]
mod dev;
mod flags;
mod groups;
mod launcher;
mod leader;
mod serve;
mod supervisor;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "rkcm",
    version,
    about = "A Kubernetes controller manager in Rust"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What the static pod runs in place of kube-controller-manager: leader election on
    /// the kube-controller-manager Lease, the informer-server and one worker per
    /// controller group as supervised child processes, and the secure port (10257).
    Launcher(Box<flags::LauncherArgs>),
    /// Lists and watches the API server once per resource, caches, and serves the cache
    /// and its changes over gRPC (rkcm.informer.v1).
    InformerServer(rkcm_informer_server::Args),
    /// Runs a group of KCM's controllers, fed by the informer-server's stream and
    /// writing to the API server.
    Worker(Box<rkcm_controller_workers::worker::Args>),
    /// Writes a CA and certificates for the informer-server (server) and workers
    /// (clients): mutual TLS for the distributed mode.
    Certs(certs::CertsArgs),
    /// Starts a development cluster (kube-sim with simulated nodes) and the launcher on
    /// it, with a demo Deployment.
    #[cfg(feature = "dev")]
    Dev(dev::DevArgs),
}

fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RKCM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    let default_log = match &cli.command {
        Command::Launcher(args) => args.log_filter(),
        _ => "info",
    };
    init_logging(default_log);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("rkcm: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Launcher(args) => {
                let given = matches
                    .subcommand_matches("launcher")
                    .map(flags::LauncherArgs::given_controller_flags)
                    .unwrap_or_default();
                launcher::run(*args, given).await
            }
            Command::InformerServer(args) => rkcm_informer_server::run(args).await,
            Command::Worker(args) => rkcm_controller_workers::worker::run(*args).await,
            #[cfg(feature = "dev")]
            Command::Dev(args) => dev::run(args).await,
            Command::Certs(args) => certs::run(&args).map(|written| {
                for path in written {
                    println!("wrote {}", path.display());
                }
            }),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<rkcm_controller_workers::worker::UsageError>() => {
            eprintln!("rkcm: {error:#}");
            ExitCode::from(2)
        }
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("rkcm: {error:#}");
            ExitCode::FAILURE
        }
    }
}
