fn main() -> std::process::ExitCode {
    one_malloc_arena();
    slicectl::cli::main()
}

/// glibc gives each thread that allocates its own malloc arena (up to 8 per
/// core): the spec files are parsed on every core and the list answers
/// decoded on tokio's blocking threads, so what those threads free stays
/// resident in arenas the planner never allocates from. One arena lets the
/// plan reuse it: peak RSS of `plan` at 10,000 slices 177–182 → 156–157 MB,
/// CPU unchanged at that size (docs/benchmarks.md, "Planning at scale"). Set before any
/// thread starts; a `MALLOC_ARENA_MAX` set in the environment is left to win.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn one_malloc_arena() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: mallopt only sets a parameter of glibc's allocator; called
    // first thing in main, before this process starts any thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn one_malloc_arena() {}
