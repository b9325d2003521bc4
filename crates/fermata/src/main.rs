//! The `fermata` binary.

fn main() -> std::process::ExitCode {
    fermata::cli::main_with(std::env::args_os())
}
