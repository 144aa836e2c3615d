//! The `queuebox` binary: parses the command line and runs one command (operations.md OPS-1).

mod cli;
mod commands;
mod logging;
mod operator;
mod run;
mod settings;
mod signals;
mod startup;
mod supervisor;
mod wiring;

use std::process::ExitCode;

use cli::{Command, ParseOutcome};

fn main() -> ExitCode {
    let invocation = match cli::parse(std::env::args_os()) {
        Ok(invocation) => invocation,
        Err(ParseOutcome::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(ParseOutcome::Usage(text)) => {
            eprintln!("{text}");
            return ExitCode::from(2);
        }
    };
    let code = match invocation.command {
        Command::Version => {
            println!("queuebox {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Command::Check => commands::check(invocation.config),
        Command::Migrate { baseline } => {
            let highest = queuebox_store::HIGHEST_VERSION;
            match baseline
                .map(|text| cli::parse_baseline(&text, highest))
                .transpose()
            {
                Ok(baseline) => commands::migrate(invocation.config, baseline),
                Err(usage) => {
                    eprintln!("{usage}");
                    2
                }
            }
        }
        Command::Run => run::run(invocation.config),
        Command::Outbox(command) => operator::outbox(invocation.config, command),
        Command::Inbox(command) => operator::inbox(invocation.config, command),
    };
    ExitCode::from(code)
}
