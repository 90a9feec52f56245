//! Cascades beyond Flux's own: controllers that create or delete objects because of an object a
//! Kustomization applies or deletes (OpenKruise ResourceDistributions, helm-controller's
//! uninstall of a deleted HelmRelease).

use super::compute::ClusterView;
use super::KustomizationPlan;

impl ClusterView<'_> {
    /// Runs after the Kustomization cascades, so that a HelmRelease or ResourceDistribution
    /// deleted with a removed Kustomization cascades too.
    pub(super) fn cascade_fan_out(&self, plans: &mut [KustomizationPlan]) {
        self.cascade_distributions(plans);
        self.cascade_helm_uninstalls(plans);
    }
}
