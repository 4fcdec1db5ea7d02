fn main() -> std::process::ExitCode {
    slicectl::cli::main()
}

/// jemalloc rather than glibc's malloc: on `plan` over 10,000 live slices,
/// less CPU and some 30 MB less peak RSS with the same code
/// (docs/benchmarks.md, "Peak RSS at 10,000 slices (fourth pass)"). Small
/// allocations are most of the plan's (two million live strings and label
/// vectors): jemalloc packs them in size classes with no per-chunk header,
/// where glibc rounds each up to a 32-byte chunk.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at start-up (`_RJEM_MALLOC_CONF` in the
/// environment is applied after them): one arena, as the process works on
/// two cores and frees on other threads what it allocated (the spec files
/// are parsed on every core, the list answers decoded on tokio's blocking
/// threads), and freed pages returned to the system at once instead of
/// after 10 s, so what parsing and decoding drop is not still resident when
/// the plan is built.
#[cfg(target_os = "linux")]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: MallocConf =
    MallocConf(c"narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0".as_ptr());

/// jemalloc's `const char *malloc_conf`.
#[cfg(target_os = "linux")]
#[repr(transparent)]
pub struct MallocConf(*const std::ffi::c_char);

// SAFETY: it points to a 'static C string that nothing writes.
#[cfg(target_os = "linux")]
unsafe impl Sync for MallocConf {}
