//! Who may ask the bot for what: forge permissions mapped onto one order, and the role each
//! command needs (configurable; by default approving and planning need write access, help
//! needs nothing).

use super::ForgeKind;
use serde::{Deserialize, Serialize};

/// What a user may do in a repository, lowest first. GitHub: read/triage, write, maintain,
/// admin. GitLab: Reporter, Developer, Maintainer, Owner. Everyone has at least `Anyone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Anyone,
    Read,
    Write,
    Maintain,
    Admin,
}

impl Role {
    /// The role of a GitHub collaborator (`permission` or the finer `role_name`).
    pub fn from_github(permission: Option<&str>, role_name: Option<&str>) -> Role {
        let of = |name: &str| match name {
            "admin" => Role::Admin,
            "maintain" => Role::Maintain,
            "write" => Role::Write,
            "triage" | "read" => Role::Read,
            _ => Role::Anyone,
        };
        role_name.map(of).into_iter().chain(permission.map(of)).max().unwrap_or(Role::Anyone)
    }

    /// The role of a GitLab member by access level.
    pub fn from_gitlab(access_level: u64) -> Role {
        match access_level {
            50.. => Role::Admin,
            40..=49 => Role::Maintain,
            30..=39 => Role::Write,
            20..=29 => Role::Read,
            _ => Role::Anyone,
        }
    }

    /// The role in the forge's own words.
    pub fn describe(self, forge: ForgeKind) -> &'static str {
        match (forge, self) {
            (_, Role::Anyone) => "no permission",
            (ForgeKind::GitHub, Role::Read) => "read access or above",
            (ForgeKind::GitHub, Role::Write) => "write, maintain or admin access",
            (ForgeKind::GitHub, Role::Maintain) => "maintain or admin access",
            (ForgeKind::GitHub, Role::Admin) => "admin access",
            (ForgeKind::GitLab, Role::Read) => "the Reporter role or above",
            (ForgeKind::GitLab, Role::Write) => "the Developer role or above",
            (ForgeKind::GitLab, Role::Maintain) => "the Maintainer role or above",
            (ForgeKind::GitLab, Role::Admin) => "the Owner role",
        }
    }
}

/// The role each command needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandRoles {
    pub approve: Role,
    pub plan: Role,
    pub help: Role,
}

impl Default for CommandRoles {
    fn default() -> Self {
        CommandRoles { approve: Role::Write, plan: Role::Write, help: Role::Anyone }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forge_permissions_map_onto_one_order() {
        assert_eq!(Role::from_github(Some("write"), Some("maintain")), Role::Maintain);
        assert_eq!(Role::from_github(Some("read"), Some("triage")), Role::Read);
        assert_eq!(Role::from_github(Some("none"), None), Role::Anyone);
        assert_eq!(Role::from_gitlab(30), Role::Write);
        assert_eq!(Role::from_gitlab(10), Role::Anyone);
        assert_eq!(Role::from_gitlab(50), Role::Admin);
        assert!(Role::Write > Role::Read && Role::Read > Role::Anyone);
    }
}
