use std::process::ExitCode;

fn main() -> ExitCode {
    crucible::cli::main()
}
