//! The command line (operations.md OPS-1): subcommands, `--config`, and the usage-error text.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand};

pub const USAGE: &str = "Usage: queuebox [run | check | migrate [--baseline VERSION] | version | outbox list|show|replay|delete | inbox list|show|requeue|delete] [--config PATH]";
pub const MIGRATE_USAGE: &str = "Usage: queuebox migrate [--config PATH] [--baseline VERSION]";

#[derive(Debug, Parser)]
#[command(
    name = "queuebox",
    about = "QueueBox: a transactional outbox and idempotent inbox relay.",
    disable_help_subcommand = true,
    disable_version_flag = true
)]
struct Args {
    /// The configuration file (default: $QUEUEBOX_CONFIG_FILE, ./queuebox.yml, /etc/queuebox/queuebox.yml).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<CommandArgs>,
}

#[derive(Debug, Subcommand)]
enum CommandArgs {
    /// Run the service until SIGTERM or SIGINT (the default).
    Run,
    /// Load and validate the configuration; open no connection.
    Check,
    /// Apply the bundled database migrations and exit.
    Migrate {
        /// Record versions 1..=VERSION as applied by hand, then apply the later ones.
        #[arg(long, value_name = "VERSION")]
        baseline: Option<String>,
    },
    /// Print the version.
    Version,
    /// List, show, replay or delete outbox rows (docs/commands.md).
    #[command(subcommand)]
    Outbox(crate::operator::OutboxCommand),
    /// List, show, requeue or delete inbox rows (docs/commands.md).
    #[command(subcommand)]
    Inbox(crate::operator::InboxCommand),
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run,
    Check,
    /// `baseline` is still text: its range depends on the bundled migrations (SCH-56).
    Migrate {
        baseline: Option<String>,
    },
    Version,
    Outbox(crate::operator::OutboxCommand),
    Inbox(crate::operator::InboxCommand),
}

#[derive(Debug, PartialEq, Eq)]
pub struct Invocation {
    pub config: Option<PathBuf>,
    pub command: Command,
}

/// The outcome of parsing that is not an invocation.
#[derive(Debug, PartialEq, Eq)]
pub enum ParseOutcome {
    /// `--help`: print this on standard output, exit 0.
    Help(String),
    /// A usage error: print this on standard error, exit 2.
    Usage(String),
}

pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Invocation, ParseOutcome> {
    let argv: Vec<OsString> = argv.into_iter().collect();
    match Args::try_parse_from(&argv) {
        Ok(args) => Ok(Invocation {
            config: args.config,
            command: match args.command {
                None | Some(CommandArgs::Run) => Command::Run,
                Some(CommandArgs::Check) => Command::Check,
                Some(CommandArgs::Migrate { baseline }) => Command::Migrate { baseline },
                Some(CommandArgs::Version) => Command::Version,
                Some(CommandArgs::Outbox(c)) => Command::Outbox(c),
                Some(CommandArgs::Inbox(c)) => Command::Inbox(c),
            },
        }),
        Err(err) if err.kind() == ErrorKind::DisplayHelp => {
            Err(ParseOutcome::Help(err.to_string()))
        }
        Err(err) => {
            let usage = if argv.iter().any(|a| a == "migrate") {
                MIGRATE_USAGE
            } else {
                USAGE
            };
            Err(ParseOutcome::Usage(format!(
                "Unknown arguments: {}\n{usage}",
                offending_arguments(&err, &argv)
            )))
        }
    }
}

/// The arguments clap objected to; all of them when it does not say.
fn offending_arguments(err: &clap::Error, argv: &[OsString]) -> String {
    for kind in [ContextKind::InvalidArg, ContextKind::InvalidSubcommand] {
        if let Some(ContextValue::String(arg)) = err.get(kind) {
            return arg.clone();
        }
    }
    argv.iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// SCH-56: `--baseline` takes a whole number from 1 to the highest bundled version.
pub fn parse_baseline(text: &str, highest: u32) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(version) if (1..=highest).contains(&version) && !text.starts_with('+') => Ok(version),
        _ => Err(format!(
            "--baseline needs a whole number from 1 to {highest}, got \"{text}\".\n{MIGRATE_USAGE}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        std::iter::once("queuebox")
            .chain(list.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn ops_1_no_subcommand_means_run() {
        let invocation = parse(args(&[])).unwrap();
        assert_eq!(invocation.command, Command::Run);
        assert_eq!(invocation.config, None);
    }

    #[test]
    fn cfg_1_config_flag_before_or_after_the_subcommand() {
        for list in [
            &["--config", "a.yml", "check"][..],
            &["check", "--config", "a.yml"][..],
        ] {
            let invocation = parse(args(list)).unwrap();
            assert_eq!(invocation.command, Command::Check);
            assert_eq!(invocation.config, Some(PathBuf::from("a.yml")));
        }
    }

    #[test]
    fn sch_57_migrate_takes_a_baseline() {
        let invocation = parse(args(&["migrate", "--baseline", "1"])).unwrap();
        assert_eq!(
            invocation.command,
            Command::Migrate {
                baseline: Some("1".into())
            }
        );
    }

    #[test]
    fn ops_1_unknown_arguments_are_named_with_the_usage() {
        let Err(ParseOutcome::Usage(text)) = parse(args(&["check", "--frobnicate"])) else {
            panic!("expected a usage error");
        };
        assert_eq!(text, format!("Unknown arguments: --frobnicate\n{USAGE}"));
        let Err(ParseOutcome::Usage(text)) = parse(args(&["launch"])) else {
            panic!("expected a usage error");
        };
        assert!(text.starts_with("Unknown arguments: launch\n"), "{text}");
        let Err(ParseOutcome::Usage(text)) = parse(args(&["migrate", "--force"])) else {
            panic!("expected a usage error");
        };
        assert_eq!(text, format!("Unknown arguments: --force\n{MIGRATE_USAGE}"));
    }

    #[test]
    fn sch_56_baseline_range() {
        assert_eq!(parse_baseline("1", 2), Ok(1));
        assert_eq!(parse_baseline("2", 2), Ok(2));
        for bad in ["0", "3", "-1", "x", "1.5", "+1", ""] {
            let err = parse_baseline(bad, 2).unwrap_err();
            assert_eq!(
                err,
                format!(
                    "--baseline needs a whole number from 1 to 2, got \"{bad}\".\n{MIGRATE_USAGE}"
                )
            );
        }
    }
}
