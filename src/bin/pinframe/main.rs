//! The `pinframe` command-line tool: convert image files, capture from cameras and
//! benchmark conversions through the library (see DESIGN.md's CLI contract). One module
//! per subcommand; `args` holds the option parsers they share.

mod args;
mod bench;
#[cfg(feature = "camera")]
mod capture;
mod convert;
mod info;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pinframe",
    version,
    about = "Camera frames to inference-ready tensors"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands (each in its own module).
#[derive(Subcommand)]
enum Command {
    /// Print the backends (and which one `auto` picks), the EGL/GL driver, its extensions
    /// and importable dma-buf formats, and the DMA memory routes.
    Info,
    /// Convert an image file (raw, PNG or JPEG) into another format, size and dtype.
    Convert(convert::ConvertArgs),
    /// Time conversions of a synthetic frame and print time per frame and frames per second.
    Bench(bench::BenchArgs),
    /// Capture frames from a V4L2 camera and write the last one (PNG by extension, else
    /// the raw frame, tightly packed).
    #[cfg(feature = "camera")]
    Capture(capture::CaptureArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                print!("{e}");
                return ExitCode::SUCCESS;
            }
            // One line: clap's message without its usage block.
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let line = message.join(" ");
            eprintln!("pinframe: {}", line.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    let result = match &cli.command {
        Command::Info => info::run(),
        Command::Convert(args) => convert::run(args),
        Command::Bench(args) => bench::run(args),
        #[cfg(feature = "camera")]
        Command::Capture(args) => capture::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pinframe: {e}");
            ExitCode::FAILURE
        }
    }
}
