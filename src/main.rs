fn main() -> std::process::ExitCode {
    slicectl::cli::main()
}
