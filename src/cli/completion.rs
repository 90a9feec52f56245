//! `fluxplan completion SHELL`: the shell's completion script for every command and flag.

use anyhow::Result;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Where each shell looks for the script.
pub const INSTALL_HELP: &str = "\
Installing the script:
  bash        fluxplan completion bash > ~/.local/share/bash-completion/completions/fluxplan
  zsh         fluxplan completion zsh > \"${fpath[1]}/_fluxplan\"   (a directory on $fpath)
  fish        fluxplan completion fish > ~/.config/fish/completions/fluxplan.fish
  elvish      in ~/.config/elvish/rc.elv: eval (fluxplan completion elvish | slurp)
  powershell  in $PROFILE: fluxplan completion powershell | Out-String | Invoke-Expression";

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the script to standard output.
pub fn run(args: CompletionArgs) -> Result<u8> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut super::Cli::command(), "fluxplan", &mut script);
    super::write_out(&String::from_utf8_lossy(&script))?;
    Ok(0)
}
