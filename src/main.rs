fn main() {
    std::process::exit(gasworks::cli::main());
}
