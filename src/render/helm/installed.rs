//! Whether a HelmRelease renders as an upgrade (`.Release.IsUpgrade`) or an install, as
//! helm-controller chooses: an upgrade when Helm's storage holds the release. With the cluster's
//! storage read, it says. Offline, a plan takes its base revision for what is installed: every
//! release the base renders is installed, and the head renders those as upgrades and the others
//! as installs (it waits for the base's walk to know which).

use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex};

/// A release: cluster, storage namespace, name.
pub type ReleaseKey = (String, String, String);

#[derive(Clone, Default)]
pub enum Installed {
    /// Nothing is known (a `build`): every release renders as an install.
    #[default]
    Unknown,
    /// The cluster's Helm storage was read: these (storage namespace, name) are installed.
    Stored(Arc<BTreeSet<(String, String)>>),
    /// A plan's base, offline: every release it renders is installed; which they are is
    /// published for the head.
    Base(Arc<BaseReleases>),
    /// A plan's head, offline: the releases the base renders are installed.
    Head(Arc<BaseReleases>),
}

impl Installed {
    /// True when the release renders as an upgrade.
    pub fn is_installed(&self, release: &ReleaseKey) -> bool {
        match self {
            Installed::Unknown => false,
            Installed::Stored(stored) => stored.contains(&(release.1.clone(), release.2.clone())),
            Installed::Base(_) => true,
            Installed::Head(base) => base.has(release),
        }
    }

    /// What a base render publishes once its walk is done; `None` for any other render.
    pub fn publisher(&self) -> Option<Publisher> {
        match self {
            Installed::Base(base) => Some(Publisher(base.clone())),
            _ => None,
        }
    }
}

/// The releases a plan's base renders, once known. A base render that ends before it knows
/// publishes nothing, and the head renders every release as an install.
#[derive(Default)]
pub struct BaseReleases {
    releases: Mutex<Option<Option<BTreeSet<ReleaseKey>>>>,
    published: Condvar,
}

impl BaseReleases {
    fn publish(&self, releases: Option<BTreeSet<ReleaseKey>>) {
        let mut slot = self.releases.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(releases);
            self.published.notify_all();
        }
    }

    /// True when the base renders `release`, once the base says (false when it knew nothing).
    fn has(&self, release: &ReleaseKey) -> bool {
        let mut slot = self.releases.lock().unwrap_or_else(|e| e.into_inner());
        while slot.is_none() {
            slot = self.published.wait(slot).unwrap_or_else(|e| e.into_inner());
        }
        slot.as_ref().and_then(Option::as_ref).is_some_and(|releases| releases.contains(release))
    }
}

/// Publishes a base render's releases; dropped unpublished (the render failed or stopped), it
/// publishes that nothing is known, so the head never waits for ever.
pub struct Publisher(Arc<BaseReleases>);

impl Publisher {
    pub fn publish(self, releases: BTreeSet<ReleaseKey>) {
        self.0.publish(Some(releases));
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.0.publish(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ReleaseKey {
        ("clusters/prod".into(), "apps".into(), name.into())
    }

    #[test]
    fn the_head_upgrades_what_the_base_installed() {
        let base = Arc::new(BaseReleases::default());
        let head = Installed::Head(base.clone());
        let publisher = Installed::Base(base.clone()).publisher().unwrap();
        let waiting =
            std::thread::spawn(move || (head.is_installed(&key("web")), head.is_installed(&key("new"))));
        publisher.publish([key("web")].into());
        assert_eq!(waiting.join().unwrap(), (true, false));
        assert!(Installed::Base(base).is_installed(&key("anything")));
    }

    #[test]
    fn a_base_that_ends_early_leaves_the_head_installing() {
        let base = Arc::new(BaseReleases::default());
        drop(Installed::Base(base.clone()).publisher());
        assert!(!Installed::Head(base).is_installed(&key("web")));
    }

    #[test]
    fn storage_and_nothing_known() {
        let stored = Installed::Stored(Arc::new([("apps".to_string(), "web".to_string())].into()));
        assert!(stored.is_installed(&key("web")));
        assert!(!stored.is_installed(&key("db")));
        assert!(!Installed::Unknown.is_installed(&key("web")));
    }
}
