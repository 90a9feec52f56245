//! What fluxplan says on stderr besides its output, and how: the global `--quiet`, `--verbose`
//! and `--color` flags, set once when the command line is read, and the plain-text notes that
//! respect them. Nothing here writes to stdout.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// When to colour: `--color`, else `FLUXPLAN_COLOR`, else `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether a stream that is (or is not) a terminal gets colour, `NO_COLOR` set or not.
    pub fn colors(self, terminal: bool, no_color: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => terminal && !no_color,
        }
    }
}

/// How much to say on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settings {
    /// `-q`: no progress, notes, warnings or hints; errors only.
    pub quiet: bool,
    /// `-v` repeated: more detail (1: notes say why, and fluxplan's info logs; 2: debug; 3: trace).
    pub verbose: u8,
    pub color: ColorChoice,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Sets what the command line asked for; the first call wins (the bot and tests never call it).
pub fn init(settings: Settings) {
    let _ = SETTINGS.set(settings);
}

fn settings() -> Settings {
    SETTINGS.get().copied().unwrap_or_default()
}

pub fn quiet() -> bool {
    settings().quiet
}

pub fn verbose() -> u8 {
    settings().verbose
}

/// Colour for standard output (the plan's text).
pub fn color_stdout() -> bool {
    settings().color.colors(std::io::stdout().is_terminal(), no_color())
}

/// Colour for standard error (logs).
pub fn color_stderr() -> bool {
    settings().color.colors(std::io::stderr().is_terminal(), no_color())
}

/// `NO_COLOR` set to anything but the empty string (no-color.org).
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// A line for people on stderr, `fluxplan: ` first, no timestamp; nothing under `--quiet`.
pub fn note(line: &str) {
    if !quiet() {
        eprintln!("fluxplan: {line}");
    }
}

/// A line of detail, said only with `-v`.
pub fn detail(line: &str) {
    if verbose() > 0 && !quiet() {
        eprintln!("fluxplan: {line}");
    }
}

/// A warning about the output (`warning: …` on stderr); nothing under `--quiet`.
pub fn warning(line: &str) {
    if !quiet() {
        eprintln!("warning: {line}");
    }
}

/// The log filter: `--quiet` shows errors only; otherwise `FLUXPLAN_LOG` (`env`), else warnings,
/// with each `-v` showing more of fluxplan's own logs.
pub fn log_filter(settings: &Settings, env: Option<&str>) -> String {
    const DEFAULT: &str = "warn,kube_client=off";
    if settings.quiet {
        return "error,kube_client=off".into();
    }
    let base = env.filter(|e| !e.trim().is_empty()).unwrap_or(DEFAULT);
    match settings.verbose {
        0 => base.to_string(),
        1 => format!("{base},fluxplan=info"),
        2 => format!("{base},fluxplan=debug"),
        _ => format!("{base},fluxplan=trace"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_colours_a_terminal_unless_no_color_and_the_others_are_what_they_say() {
        assert!(ColorChoice::Auto.colors(true, false));
        assert!(!ColorChoice::Auto.colors(true, true));
        assert!(!ColorChoice::Auto.colors(false, false));
        assert!(ColorChoice::Always.colors(false, true));
        assert!(!ColorChoice::Never.colors(true, false));
    }

    #[test]
    fn quiet_wins_over_the_environment_and_each_v_adds_detail_to_it() {
        let quiet = Settings { quiet: true, ..Default::default() };
        assert_eq!(log_filter(&quiet, Some("debug")), "error,kube_client=off");
        let plain = Settings::default();
        assert_eq!(log_filter(&plain, None), "warn,kube_client=off");
        assert_eq!(log_filter(&plain, Some("info")), "info");
        let v = |verbose| Settings { verbose, ..Default::default() };
        assert_eq!(log_filter(&v(1), None), "warn,kube_client=off,fluxplan=info");
        assert_eq!(log_filter(&v(2), Some("info")), "info,fluxplan=debug");
        assert_eq!(log_filter(&v(5), None), "warn,kube_client=off,fluxplan=trace");
    }
}
