//! Whether Argo CD would sync an Application at all, as its AppProject decides: checked before
//! any of its sources is fetched, so that a project's repository credentials are never used for
//! an Application that project does not permit (a pull request can name any project). Only a
//! live cluster's AppProjects count; offline nothing is checked.

use super::Unrendered;
use crate::argocd::project::{self, Permission};
use crate::argocd::Application;
use crate::cluster::SubstitutionSource;
use crate::render::RenderError;

/// `Ok` when the Application may be rendered: its project permits it, or there is no live
/// cluster to ask.
pub(super) fn admit(cluster: &dyn SubstitutionSource, app: &Application) -> Result<(), Unrendered> {
    let projects = match cluster.argocd_projects() {
        None => return Ok(()),
        Some(Ok(projects)) => projects,
        Some(Err(why)) => {
            return Err(Unrendered::External(format!(
                "{why}: whether project {} permits this Application is not known, so it is not planned",
                app.project
            )))
        }
    };
    match project::check(app, &projects) {
        Permission::Permitted => Ok(()),
        Permission::Refused(conditions) => Err(Unrendered::Failed(RenderError::InvalidSpec(format!(
            "Argo CD refuses to sync this Application: {}",
            conditions.join("; ")
        )))),
        Permission::Unknown(why) => Err(Unrendered::External(format!(
            "{why}: whether project {} permits this Application is not known, so it is not planned",
            app.project
        ))),
    }
}
