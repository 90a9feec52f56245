use std::process::ExitCode;

/// mimalloc: renders build and drop millions of small JSON values (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_allow_thp` in mimalloc.h's `mi_option_e` (the crate names no constant for it).
const MI_OPTION_ALLOW_THP: std::ffi::c_int = 43;

/// No transparent huge pages: each first touch of a mimalloc page faulted in and zeroed 2 MiB,
/// half of a warm render's samples, and when the kernel had to compact memory for them a warm
/// render of 500 Kustomizations took 0.6 s instead of 0.3 s. Without them (measured on that
/// fleet): warm 0.34–0.41 s against 0.23–0.65 s, a cold render's peak 112 MiB against 141 MiB
/// and a tenth less CPU. mimalloc reads the option once, when it starts, which is before `main`.
#[used]
#[link_section = ".init_array"]
static MIMALLOC_OPTIONS: extern "C" fn() = {
    extern "C" fn no_huge_pages() {
        // SAFETY: sets one of mimalloc's options before anything has allocated through it.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
    }
    no_huge_pages
};

fn main() -> ExitCode {
    // A kustomize worker (started confined by a planner): nothing but its frames on stdout.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == fluxplan::render::worker::SUBCOMMAND) {
        return ExitCode::from(fluxplan::render::worker::main(&args[2..]) as u8);
    }
    // Helm's post-renderer plugin, started by a confined `helm template`.
    if args.get(1).is_some_and(|a| a == fluxplan::render::helm::post_render::SUBCOMMAND) {
        return ExitCode::from(fluxplan::render::helm::post_render::main() as u8);
    }
    // Workers run from this executable, whatever it is named.
    fluxplan::render::kustomize::library::workers_run_this_executable();
    fluxplan::tls::install_crypto_provider();
    // Nothing this process starts (kustomize included) may read its memory or environment.
    fluxplan::sandbox::harden_process();
    // Usage errors exit 3 ("could not"), never 2, which means "blocked by policy" for `plan`.
    // `--version` names the engines, found only when asked (finding them takes a moment).
    let command = <fluxplan::cli::Cli as clap::CommandFactory>::command();
    let command = command.color(help_color());
    let command = if std::env::args().any(|a| a == "--version") {
        // Printed once, then the process ends: leaking it is what clap wants of a static text.
        command.long_version(&*Box::leak(fluxplan::cli::long_version().into_boxed_str()))
    } else {
        command
    };
    let parsed = command
        .try_get_matches()
        .and_then(|matches| <fluxplan::cli::Cli as clap::FromArgMatches>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                ExitCode::from(fluxplan::cli::EXIT_FAILED)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let settings = cli.global.settings();
    fluxplan::console::init(settings);
    let env = std::env::var("FLUXPLAN_LOG").ok();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(fluxplan::console::log_filter(&settings, env.as_deref()))
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(fluxplan::console::color_stderr())
        .init();
    fluxplan::cli::run(cli)
}

/// `--color` for clap's own help and errors, which are printed before the arguments are read:
/// the last `--color` given, else `FLUXPLAN_COLOR`, else clap's own choice (it honours NO_COLOR).
fn help_color() -> clap::ColorChoice {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut given = std::env::var("FLUXPLAN_COLOR").ok();
    for (i, arg) in args.iter().enumerate() {
        if let Some(value) = arg.strip_prefix("--color=") {
            given = Some(value.to_string());
        } else if arg == "--color" {
            given = args.get(i + 1).cloned();
        }
    }
    match given.as_deref() {
        Some("always") => clap::ColorChoice::Always,
        Some("never") => clap::ColorChoice::Never,
        _ => clap::ColorChoice::Auto,
    }
}
