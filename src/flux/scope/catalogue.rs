//! The scopes of widely used CRDs, as their projects define them (`spec.scope` of the
//! CustomResourceDefinition, or the kubebuilder marker of the Go type). Used only when neither
//! the cluster, the render nor the repository's `crdScopes` says: a kustomization's `namespace:`
//! stamps a namespace on kinds kustomize does not know, while the API server gives a cluster-
//! scoped object none, and its inventory id none.

use super::Scope::{self, Cluster, Namespaced};

/// (group, kind, scope), each with the upstream repository and file it was read from (2026).
#[rustfmt::skip]
pub const CATALOGUE: &[(&str, &str, Scope)] = &[
    // cert-manager
    ("acme.cert-manager.io", "Challenge", Namespaced), // cert-manager/cert-manager deploy/crds/acme.cert-manager.io_challenges.yaml
    ("acme.cert-manager.io", "Order", Namespaced), // cert-manager/cert-manager deploy/crds/acme.cert-manager.io_orders.yaml
    ("cert-manager.io", "Certificate", Namespaced), // cert-manager/cert-manager deploy/crds/cert-manager.io_certificates.yaml
    ("cert-manager.io", "CertificateRequest", Namespaced), // cert-manager/cert-manager deploy/crds/cert-manager.io_certificaterequests.yaml
    ("cert-manager.io", "ClusterIssuer", Cluster), // cert-manager/cert-manager deploy/crds/cert-manager.io_clusterissuers.yaml
    ("cert-manager.io", "Issuer", Namespaced), // cert-manager/cert-manager deploy/crds/cert-manager.io_issuers.yaml
    // trust-manager
    ("trust-manager.io", "ClusterBundle", Cluster), // cert-manager/trust-manager deploy/crds/trust-manager.io_clusterbundles.yaml
    ("trust.cert-manager.io", "Bundle", Cluster), // cert-manager/trust-manager deploy/crds/trust.cert-manager.io_bundles.yaml
    // External Secrets Operator
    ("external-secrets.io", "ClusterExternalSecret", Cluster), // external-secrets/external-secrets config/crds/bases/external-secrets.io_clusterexternalsecrets.yaml
    ("external-secrets.io", "ClusterPushSecret", Cluster), // external-secrets/external-secrets config/crds/bases/external-secrets.io_clusterpushsecrets.yaml
    ("external-secrets.io", "ClusterSecretStore", Cluster), // external-secrets/external-secrets config/crds/bases/external-secrets.io_clustersecretstores.yaml
    ("external-secrets.io", "ExternalSecret", Namespaced), // external-secrets/external-secrets config/crds/bases/external-secrets.io_externalsecrets.yaml
    ("external-secrets.io", "PushSecret", Namespaced), // external-secrets/external-secrets config/crds/bases/external-secrets.io_pushsecrets.yaml
    ("external-secrets.io", "SecretStore", Namespaced), // external-secrets/external-secrets config/crds/bases/external-secrets.io_secretstores.yaml
    ("generators.external-secrets.io", "ACRAccessToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_acraccesstokens.yaml
    ("generators.external-secrets.io", "BeyondtrustWorkloadCredentialsDynamicSecret", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_beyondtrustworkloadcredentialsdynamicsecrets.yaml
    ("generators.external-secrets.io", "CloudsmithAccessToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_cloudsmithaccesstokens.yaml
    ("generators.external-secrets.io", "ClusterGenerator", Cluster), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_clustergenerators.yaml
    ("generators.external-secrets.io", "ECRAuthorizationToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_ecrauthorizationtokens.yaml
    ("generators.external-secrets.io", "Fake", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_fakes.yaml
    ("generators.external-secrets.io", "GCRAccessToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_gcraccesstokens.yaml
    ("generators.external-secrets.io", "GeneratorState", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_generatorstates.yaml
    ("generators.external-secrets.io", "GithubAccessToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_githubaccesstokens.yaml
    ("generators.external-secrets.io", "GitlabDeployToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_gitlabdeploytokens.yaml
    ("generators.external-secrets.io", "Grafana", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_grafanas.yaml
    ("generators.external-secrets.io", "MFA", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_mfas.yaml
    ("generators.external-secrets.io", "Password", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_passwords.yaml
    ("generators.external-secrets.io", "QuayAccessToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_quayaccesstokens.yaml
    ("generators.external-secrets.io", "SSHKey", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_sshkeys.yaml
    ("generators.external-secrets.io", "STSSessionToken", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_stssessiontokens.yaml
    ("generators.external-secrets.io", "UUID", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_uuids.yaml
    ("generators.external-secrets.io", "VaultDynamicSecret", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_vaultdynamicsecrets.yaml
    ("generators.external-secrets.io", "Webhook", Namespaced), // external-secrets/external-secrets config/crds/bases/generators.external-secrets.io_webhooks.yaml
    // Gateway API
    ("gateway.networking.k8s.io", "BackendTLSPolicy", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_backendtlspolicies.yaml
    ("gateway.networking.k8s.io", "GRPCRoute", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_grpcroutes.yaml
    ("gateway.networking.k8s.io", "Gateway", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_gateways.yaml
    ("gateway.networking.k8s.io", "GatewayClass", Cluster), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_gatewayclasses.yaml
    ("gateway.networking.k8s.io", "HTTPRoute", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_httproutes.yaml
    ("gateway.networking.k8s.io", "ListenerSet", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_listenersets.yaml
    ("gateway.networking.k8s.io", "ReferenceGrant", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_referencegrants.yaml
    ("gateway.networking.k8s.io", "TCPRoute", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_tcproutes.yaml
    ("gateway.networking.k8s.io", "TLSRoute", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_tlsroutes.yaml
    ("gateway.networking.k8s.io", "UDPRoute", Namespaced), // kubernetes-sigs/gateway-api config/crd/standard/gateway.networking.k8s.io_udproutes.yaml
    ("gateway.networking.x-k8s.io", "XBackend", Namespaced), // kubernetes-sigs/gateway-api config/crd/experimental/gateway.networking.x-k8s.io_xbackends.yaml
    ("gateway.networking.x-k8s.io", "XBackendTrafficPolicy", Namespaced), // kubernetes-sigs/gateway-api config/crd/experimental/gateway.networking.x-k8s.io_xbackendtrafficpolicies.yaml
    ("gateway.networking.x-k8s.io", "XMesh", Cluster), // kubernetes-sigs/gateway-api config/crd/experimental/gateway.networking.x-k8s.io_xmeshes.yaml
    // external-snapshotter (CSI snapshots)
    ("groupsnapshot.storage.k8s.io", "VolumeGroupSnapshot", Namespaced), // kubernetes-csi/external-snapshotter client/config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshots.yaml
    ("groupsnapshot.storage.k8s.io", "VolumeGroupSnapshotClass", Cluster), // kubernetes-csi/external-snapshotter client/config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses.yaml
    ("groupsnapshot.storage.k8s.io", "VolumeGroupSnapshotContent", Cluster), // kubernetes-csi/external-snapshotter client/config/crd/groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents.yaml
    ("snapshot.storage.k8s.io", "VolumeSnapshot", Namespaced), // kubernetes-csi/external-snapshotter client/config/crd/snapshot.storage.k8s.io_volumesnapshots.yaml
    ("snapshot.storage.k8s.io", "VolumeSnapshotClass", Cluster), // kubernetes-csi/external-snapshotter client/config/crd/snapshot.storage.k8s.io_volumesnapshotclasses.yaml
    ("snapshot.storage.k8s.io", "VolumeSnapshotContent", Cluster), // kubernetes-csi/external-snapshotter client/config/crd/snapshot.storage.k8s.io_volumesnapshotcontents.yaml
    // Cilium (CRDs read via the search index; stored versions, not necessarily HEAD)
    ("cilium.io", "CiliumNetworkPolicy", Namespaced), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml
    ("cilium.io", "CiliumClusterwideNetworkPolicy", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumclusterwidenetworkpolicies.yaml
    ("cilium.io", "CiliumLoadBalancerIPPool", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumloadbalancerippools.yaml
    ("cilium.io", "CiliumL2AnnouncementPolicy", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2alpha1/ciliuml2announcementpolicies.yaml
    ("cilium.io", "CiliumBGPPeeringPolicy", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2alpha1/ciliumbgppeeringpolicies.yaml
    ("cilium.io", "CiliumBGPClusterConfig", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumbgpclusterconfigs.yaml
    ("cilium.io", "CiliumBGPPeerConfig", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumbgppeerconfigs.yaml
    ("cilium.io", "CiliumBGPAdvertisement", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumbgpadvertisements.yaml
    ("cilium.io", "CiliumBGPNodeConfig", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumbgpnodeconfigs.yaml
    ("cilium.io", "CiliumBGPNodeConfigOverride", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumbgpnodeconfigoverrides.yaml
    ("cilium.io", "CiliumEgressGatewayPolicy", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumegressgatewaypolicies.yaml
    ("cilium.io", "CiliumCIDRGroup", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumcidrgroups.yaml
    ("cilium.io", "CiliumNode", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnodes.yaml
    ("cilium.io", "CiliumNodeConfig", Namespaced), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnodeconfigs.yaml
    ("cilium.io", "CiliumIdentity", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumidentities.yaml
    ("cilium.io", "CiliumEndpoint", Namespaced), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumendpoints.yaml
    ("cilium.io", "CiliumEnvoyConfig", Namespaced), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumenvoyconfigs.yaml
    ("cilium.io", "CiliumClusterwideEnvoyConfig", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumclusterwideenvoyconfigs.yaml
    ("cilium.io", "CiliumPodIPPool", Cluster), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumpodippools.yaml
    ("cilium.io", "CiliumLocalRedirectPolicy", Namespaced), // cilium/cilium pkg/k8s/apis/cilium.io/client/crds/v2/ciliumlocalredirectpolicies.yaml
    // Prometheus Operator
    ("monitoring.coreos.com", "Alertmanager", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_alertmanagers.yaml
    ("monitoring.coreos.com", "AlertmanagerConfig", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_alertmanagerconfigs.yaml
    ("monitoring.coreos.com", "PodMonitor", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml
    ("monitoring.coreos.com", "Probe", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_probes.yaml
    ("monitoring.coreos.com", "Prometheus", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_prometheuses.yaml
    ("monitoring.coreos.com", "PrometheusAgent", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_prometheusagents.yaml
    ("monitoring.coreos.com", "PrometheusRule", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml
    ("monitoring.coreos.com", "ScrapeConfig", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_scrapeconfigs.yaml
    ("monitoring.coreos.com", "ServiceMonitor", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml
    ("monitoring.coreos.com", "ThanosRuler", Namespaced), // prometheus-operator/prometheus-operator example/prometheus-operator-crd/monitoring.coreos.com_thanosrulers.yaml
    // Kyverno
    ("kyverno.io", "CleanupPolicy", Namespaced), // kyverno/kyverno config/crds/kyverno/kyverno.io_cleanuppolicies.yaml
    ("kyverno.io", "ClusterCleanupPolicy", Cluster), // kyverno/kyverno config/crds/kyverno/kyverno.io_clustercleanuppolicies.yaml
    ("kyverno.io", "ClusterPolicy", Cluster), // kyverno/kyverno config/crds/kyverno/kyverno.io_clusterpolicies.yaml
    ("kyverno.io", "GlobalContextEntry", Cluster), // kyverno/kyverno config/crds/kyverno/kyverno.io_globalcontextentries.yaml
    ("kyverno.io", "Policy", Namespaced), // kyverno/kyverno config/crds/kyverno/kyverno.io_policies.yaml
    ("kyverno.io", "PolicyException", Namespaced), // kyverno/kyverno config/crds/kyverno/kyverno.io_policyexceptions.yaml
    ("kyverno.io", "UpdateRequest", Namespaced), // kyverno/kyverno config/crds/kyverno/kyverno.io_updaterequests.yaml
    ("policies.kyverno.io", "DeletingPolicy", Cluster), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_deletingpolicies.yaml
    ("policies.kyverno.io", "GeneratingPolicy", Cluster), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_generatingpolicies.yaml
    ("policies.kyverno.io", "ImageValidatingPolicy", Cluster), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_imagevalidatingpolicies.yaml
    ("policies.kyverno.io", "MutatingPolicy", Cluster), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_mutatingpolicies.yaml
    ("policies.kyverno.io", "NamespacedDeletingPolicy", Namespaced), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_namespaceddeletingpolicies.yaml
    ("policies.kyverno.io", "NamespacedGeneratingPolicy", Namespaced), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_namespacedgeneratingpolicies.yaml
    ("policies.kyverno.io", "NamespacedImageValidatingPolicy", Namespaced), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_namespacedimagevalidatingpolicies.yaml
    ("policies.kyverno.io", "NamespacedMutatingPolicy", Namespaced), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_namespacedmutatingpolicies.yaml
    ("policies.kyverno.io", "NamespacedValidatingPolicy", Namespaced), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_namespacedvalidatingpolicies.yaml
    ("policies.kyverno.io", "PolicyException", Namespaced), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_policyexceptions.yaml
    ("policies.kyverno.io", "ValidatingPolicy", Cluster), // kyverno/kyverno config/crds/policies.kyverno.io/policies.kyverno.io_validatingpolicies.yaml
    ("reports.kyverno.io", "ClusterEphemeralReport", Cluster), // kyverno/kyverno config/crds/reports/reports.kyverno.io_clusterephemeralreports.yaml
    ("reports.kyverno.io", "EphemeralReport", Namespaced), // kyverno/kyverno config/crds/reports/reports.kyverno.io_ephemeralreports.yaml
    ("wgpolicyk8s.io", "ClusterPolicyReport", Cluster), // kyverno/kyverno config/crds/policyreport/wgpolicyk8s.io_clusterpolicyreports.yaml
    ("wgpolicyk8s.io", "PolicyReport", Namespaced), // kyverno/kyverno config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml
    // MetalLB
    ("frrk8s.metallb.io", "BGPSessionState", Namespaced), // metallb/metallb config/manifests/metallb-frr-k8s.yaml
    ("frrk8s.metallb.io", "FRRConfiguration", Namespaced), // metallb/metallb config/manifests/metallb-frr-k8s.yaml
    ("frrk8s.metallb.io", "FRRK8sConfiguration", Namespaced), // metallb/metallb config/manifests/metallb-frr-k8s.yaml
    ("frrk8s.metallb.io", "FRRNodeState", Cluster), // metallb/metallb config/manifests/metallb-frr-k8s.yaml
    ("metallb.io", "BFDProfile", Namespaced), // metallb/metallb config/crd/bases/metallb.io_bfdprofiles.yaml
    ("metallb.io", "BGPAdvertisement", Namespaced), // metallb/metallb config/crd/bases/metallb.io_bgpadvertisements.yaml
    ("metallb.io", "BGPPeer", Namespaced), // metallb/metallb config/crd/bases/metallb.io_bgppeers.yaml
    ("metallb.io", "Community", Namespaced), // metallb/metallb config/crd/bases/metallb.io_communities.yaml
    ("metallb.io", "ConfigurationState", Namespaced), // metallb/metallb config/crd/bases/metallb.io_configurationstates.yaml
    ("metallb.io", "IPAddressPool", Namespaced), // metallb/metallb config/crd/bases/metallb.io_ipaddresspools.yaml
    ("metallb.io", "L2Advertisement", Namespaced), // metallb/metallb config/crd/bases/metallb.io_l2advertisements.yaml
    ("metallb.io", "ServiceBGPStatus", Namespaced), // metallb/metallb config/crd/bases/metallb.io_servicebgpstatuses.yaml
    ("metallb.io", "ServiceL2Status", Namespaced), // metallb/metallb config/crd/bases/metallb.io_servicel2statuses.yaml
    // Traefik
    ("traefik.io", "IngressRoute", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_ingressroutes.yaml
    ("traefik.io", "IngressRouteTCP", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_ingressroutetcps.yaml
    ("traefik.io", "IngressRouteUDP", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_ingressrouteudps.yaml
    ("traefik.io", "Middleware", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_middlewares.yaml
    ("traefik.io", "MiddlewareTCP", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_middlewaretcps.yaml
    ("traefik.io", "ServersTransport", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_serverstransports.yaml
    ("traefik.io", "ServersTransportTCP", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_serverstransporttcps.yaml
    ("traefik.io", "TLSOption", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_tlsoptions.yaml
    ("traefik.io", "TLSStore", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_tlsstores.yaml
    ("traefik.io", "TraefikService", Namespaced), // traefik/traefik docs/content/reference/dynamic-configuration/traefik.io_traefikservices.yaml
    // Karpenter (core)
    ("karpenter.sh", "NodeClaim", Cluster), // kubernetes-sigs/karpenter pkg/apis/crds/karpenter.sh_nodeclaims.yaml
    ("karpenter.sh", "NodeOverlay", Cluster), // kubernetes-sigs/karpenter pkg/apis/crds/karpenter.sh_nodeoverlays.yaml
    ("karpenter.sh", "NodePool", Cluster), // kubernetes-sigs/karpenter pkg/apis/crds/karpenter.sh_nodepools.yaml
    // Karpenter (AWS provider)
    ("karpenter.k8s.aws", "EC2NodeClass", Cluster), // aws/karpenter-provider-aws pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml
    // OPA Gatekeeper
    ("config.gatekeeper.sh", "Config", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/config.gatekeeper.sh_configs.yaml
    ("connection.gatekeeper.sh", "Connection", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/connection.gatekeeper.sh_connections.yaml
    ("expansion.gatekeeper.sh", "ExpansionTemplate", Cluster), // open-policy-agent/gatekeeper config/crd/bases/expansion.gatekeeper.sh_expansiontemplate.yaml
    ("externaldata.gatekeeper.sh", "Provider", Cluster), // open-policy-agent/gatekeeper charts/gatekeeper/crds/provider-customresourcedefinition.yaml
    ("mutations.gatekeeper.sh", "Assign", Cluster), // open-policy-agent/gatekeeper config/crd/bases/mutations.gatekeeper.sh_assign.yaml
    ("mutations.gatekeeper.sh", "AssignImage", Cluster), // open-policy-agent/gatekeeper config/crd/bases/mutations.gatekeeper.sh_assignimage.yaml
    ("mutations.gatekeeper.sh", "AssignMetadata", Cluster), // open-policy-agent/gatekeeper config/crd/bases/mutations.gatekeeper.sh_assignmetadata.yaml
    ("mutations.gatekeeper.sh", "ModifySet", Cluster), // open-policy-agent/gatekeeper config/crd/bases/mutations.gatekeeper.sh_modifyset.yaml
    ("status.gatekeeper.sh", "ConfigPodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_configpodstatuses.yaml
    ("status.gatekeeper.sh", "ConnectionPodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_connectionpodstatuses.yaml
    ("status.gatekeeper.sh", "ConstraintPodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_constraintpodstatuses.yaml
    ("status.gatekeeper.sh", "ConstraintTemplatePodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_constrainttemplatepodstatuses.yaml
    ("status.gatekeeper.sh", "ExpansionTemplatePodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_expansiontemplatepodstatuses.yaml
    ("status.gatekeeper.sh", "MutatorPodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_mutatorpodstatuses.yaml
    ("status.gatekeeper.sh", "ProviderPodStatus", Namespaced), // open-policy-agent/gatekeeper config/crd/bases/status.gatekeeper.sh_providerpodstatuses.yaml
    ("syncset.gatekeeper.sh", "SyncSet", Cluster), // open-policy-agent/gatekeeper config/crd/bases/syncset.gatekeeper.sh_syncsets.yaml
    ("templates.gatekeeper.sh", "ConstraintTemplate", Cluster), // open-policy-agent/gatekeeper config/crd/bases/constrainttemplate-customresourcedefinition.yaml
    // constraints.gatekeeper.sh/<any Kind generated from a ConstraintTemplate> is always Cluster-scoped: open-policy-agent/frameworks constraint/pkg/client/crds/crds.go (Scope: apiextensions.ClusterScoped)
    // Istio
    ("extensions.istio.io", "TrafficExtension", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("extensions.istio.io", "WasmPlugin", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "DestinationRule", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "EnvoyFilter", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "Gateway", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "ProxyConfig", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "ServiceEntry", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "Sidecar", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "VirtualService", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "WorkloadEntry", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("networking.istio.io", "WorkloadGroup", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("security.istio.io", "AuthorizationPolicy", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("security.istio.io", "PeerAuthentication", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("security.istio.io", "RequestAuthentication", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    ("telemetry.istio.io", "Telemetry", Namespaced), // istio/api kubernetes/customresourcedefinitions.gen.yaml
    // Longhorn
    ("longhorn.io", "BackingImage", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "BackingImageDataSource", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "BackingImageManager", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Backup", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "BackupBackingImage", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "BackupTarget", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "BackupVolume", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Engine", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "EngineFrontend", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "EngineImage", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "InstanceManager", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Node", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Orphan", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "RecurringJob", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Replica", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Setting", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Shard", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "ShardGroup", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "ShareManager", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Snapshot", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "SupportBundle", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "SystemBackup", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "SystemRestore", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "Volume", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    ("longhorn.io", "VolumeAttachment", Namespaced), // longhorn/longhorn-manager k8s/crds.yaml
    // Rook Ceph
    ("ceph.rook.io", "CephBlockPool", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephBlockPoolRadosNamespace", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephBucketNotification", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephBucketTopic", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephCOSIDriver", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephClient", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephCluster", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephFilesystem", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephFilesystemMirror", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephFilesystemSubVolumeGroup", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephNFS", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephNVMeOFGateway", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephObjectRealm", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephObjectStore", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephObjectStoreAccount", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephObjectStoreUser", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephObjectZone", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephObjectZoneGroup", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("ceph.rook.io", "CephRBDMirror", Namespaced), // rook/rook deploy/examples/crds.yaml
    ("csi.ceph.io", "CephConnection", Namespaced), // rook/rook deploy/examples/csi-operator.yaml
    ("csi.ceph.io", "ClientProfile", Namespaced), // rook/rook deploy/examples/csi-operator.yaml
    ("csi.ceph.io", "ClientProfileMapping", Namespaced), // rook/rook deploy/examples/csi-operator.yaml
    ("csi.ceph.io", "Driver", Namespaced), // rook/rook deploy/examples/csi-operator.yaml
    ("csi.ceph.io", "OperatorConfig", Namespaced), // rook/rook deploy/examples/csi-operator.yaml
    ("objectbucket.io", "ObjectBucket", Cluster), // rook/rook deploy/examples/crds.yaml
    ("objectbucket.io", "ObjectBucketClaim", Namespaced), // rook/rook deploy/examples/crds.yaml
    // VolSync
    ("volsync.backube", "ReplicationDestination", Namespaced), // backube/volsync config/crd/bases/volsync.backube_replicationdestinations.yaml
    ("volsync.backube", "ReplicationSource", Namespaced), // backube/volsync config/crd/bases/volsync.backube_replicationsources.yaml
    // Velero
    ("velero.io", "Backup", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_backups.yaml
    ("velero.io", "BackupRepository", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_backuprepositories.yaml
    ("velero.io", "BackupStorageLocation", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_backupstoragelocations.yaml
    ("velero.io", "DataDownload", Namespaced), // vmware-tanzu/velero config/crd/v2alpha1/bases/velero.io_datadownloads.yaml
    ("velero.io", "DataUpload", Namespaced), // vmware-tanzu/velero config/crd/v2alpha1/bases/velero.io_datauploads.yaml
    ("velero.io", "DeleteBackupRequest", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_deletebackuprequests.yaml
    ("velero.io", "DownloadRequest", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_downloadrequests.yaml
    ("velero.io", "PodVolumeBackup", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_podvolumebackups.yaml
    ("velero.io", "PodVolumeRestore", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_podvolumerestores.yaml
    ("velero.io", "Restore", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_restores.yaml
    ("velero.io", "Schedule", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_schedules.yaml
    ("velero.io", "ServerStatusRequest", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_serverstatusrequests.yaml
    ("velero.io", "VolumeSnapshotLocation", Namespaced), // vmware-tanzu/velero config/crd/v1/bases/velero.io_volumesnapshotlocations.yaml
    // OpenKruise
    ("apps.kruise.io", "AdvancedCronJob", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_advancedcronjobs.yaml
    ("apps.kruise.io", "BroadcastJob", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_broadcastjobs.yaml
    ("apps.kruise.io", "CloneSet", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_clonesets.yaml
    ("apps.kruise.io", "ContainerRecreateRequest", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_containerrecreaterequests.yaml
    ("apps.kruise.io", "DaemonSet", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_daemonsets.yaml
    ("apps.kruise.io", "EphemeralJob", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_ephemeraljobs.yaml
    ("apps.kruise.io", "ImageListPullJob", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_imagelistpulljobs.yaml
    ("apps.kruise.io", "ImagePullJob", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_imagepulljobs.yaml
    ("apps.kruise.io", "NodeImage", Cluster), // openkruise/kruise config/crd/bases/apps.kruise.io_nodeimages.yaml
    ("apps.kruise.io", "NodePodProbe", Cluster), // openkruise/kruise config/crd/bases/apps.kruise.io_nodepodprobes.yaml
    ("apps.kruise.io", "PersistentPodState", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_persistentpodstates.yaml
    ("apps.kruise.io", "PodProbeMarker", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_podprobemarkers.yaml
    ("apps.kruise.io", "ResourceDistribution", Cluster), // openkruise/kruise config/crd/bases/apps.kruise.io_resourcedistributions.yaml
    ("apps.kruise.io", "SidecarSet", Cluster), // openkruise/kruise config/crd/bases/apps.kruise.io_sidecarsets.yaml
    ("apps.kruise.io", "StatefulSet", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_statefulsets.yaml
    ("apps.kruise.io", "UnitedDeployment", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_uniteddeployments.yaml
    ("apps.kruise.io", "WorkloadSpread", Namespaced), // openkruise/kruise config/crd/bases/apps.kruise.io_workloadspreads.yaml
    ("policy.kruise.io", "PodUnavailableBudget", Namespaced), // openkruise/kruise config/crd/bases/policy.kruise.io_podunavailablebudgets.yaml
    // Node Feature Discovery
    ("nfd.k8s-sigs.io", "NodeFeature", Namespaced), // kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery/crds/nfd-api-crds.yaml
    ("nfd.k8s-sigs.io", "NodeFeatureGroup", Namespaced), // kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery/crds/nfd-api-crds.yaml
    ("nfd.k8s-sigs.io", "NodeFeatureRule", Cluster), // kubernetes-sigs/node-feature-discovery deployment/helm/node-feature-discovery/crds/nfd-api-crds.yaml
    ("topology.node.k8s.io", "NodeResourceTopology", Cluster), // kubernetes-sigs/node-feature-discovery deployment/base/noderesourcetopologies-crd/noderesourcetopologies.yaml
    // Multus / NetworkAttachmentDefinition
    ("k8s.cni.cncf.io", "NetworkAttachmentDefinition", Namespaced), // k8snetworkplumbingwg/network-attachment-definition-client artifacts/networks-crd.yaml
    // Crossplane
    ("apiextensions.crossplane.io", "CompositeResourceDefinition", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_compositeresourcedefinitions.yaml
    ("apiextensions.crossplane.io", "Composition", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_compositions.yaml
    ("apiextensions.crossplane.io", "CompositionRevision", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_compositionrevisions.yaml
    ("apiextensions.crossplane.io", "EnvironmentConfig", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_environmentconfigs.yaml
    ("apiextensions.crossplane.io", "ManagedResourceActivationPolicy", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_managedresourceactivationpolicies.yaml
    ("apiextensions.crossplane.io", "ManagedResourceDefinition", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_managedresourcedefinitions.yaml
    ("apiextensions.crossplane.io", "Usage", Cluster), // crossplane/crossplane cluster/crds/apiextensions.crossplane.io_usages.yaml
    ("ops.crossplane.io", "CronOperation", Cluster), // crossplane/crossplane cluster/crds/ops.crossplane.io_cronoperations.yaml
    ("ops.crossplane.io", "Operation", Cluster), // crossplane/crossplane cluster/crds/ops.crossplane.io_operations.yaml
    ("ops.crossplane.io", "WatchOperation", Cluster), // crossplane/crossplane cluster/crds/ops.crossplane.io_watchoperations.yaml
    ("pkg.crossplane.io", "Configuration", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_configurations.yaml
    ("pkg.crossplane.io", "ConfigurationRevision", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_configurationrevisions.yaml
    ("pkg.crossplane.io", "DeploymentRuntimeConfig", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_deploymentruntimeconfigs.yaml
    ("pkg.crossplane.io", "Function", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_functions.yaml
    ("pkg.crossplane.io", "FunctionRevision", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_functionrevisions.yaml
    ("pkg.crossplane.io", "ImageConfig", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_imageconfigs.yaml
    ("pkg.crossplane.io", "Lock", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_locks.yaml
    ("pkg.crossplane.io", "Provider", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_providers.yaml
    ("pkg.crossplane.io", "ProviderRevision", Cluster), // crossplane/crossplane cluster/crds/pkg.crossplane.io_providerrevisions.yaml
    ("protection.crossplane.io", "ClusterUsage", Cluster), // crossplane/crossplane cluster/crds/protection.crossplane.io_clusterusages.yaml
    ("protection.crossplane.io", "Usage", Namespaced), // crossplane/crossplane cluster/crds/protection.crossplane.io_usages.yaml
    // Capsule
    ("capsule.clastix.io", "CapsuleConfiguration", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_capsuleconfigurations.yaml
    ("capsule.clastix.io", "CustomQuota", Namespaced), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_customquotas.yaml
    ("capsule.clastix.io", "GlobalCustomQuota", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_globalcustomquotas.yaml
    ("capsule.clastix.io", "GlobalResourceQuota", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_globalresourcequotas.yaml
    ("capsule.clastix.io", "GlobalTenantResource", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_globaltenantresources.yaml
    ("capsule.clastix.io", "QuantityLedger", Namespaced), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_quantityledgers.yaml
    ("capsule.clastix.io", "ResourcePool", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_resourcepools.yaml
    ("capsule.clastix.io", "ResourcePoolClaim", Namespaced), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_resourcepoolclaims.yaml
    ("capsule.clastix.io", "RuleStatus", Namespaced), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_rulestatuses.yaml
    ("capsule.clastix.io", "Tenant", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_tenants.yaml
    ("capsule.clastix.io", "TenantOwner", Cluster), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_tenantowners.yaml
    ("capsule.clastix.io", "TenantResource", Namespaced), // projectcapsule/capsule charts/capsule/crds/capsule.clastix.io_tenantresources.yaml
    // KEDA
    ("eventing.keda.sh", "CloudEventSource", Namespaced), // kedacore/keda config/crd/bases/eventing.keda.sh_cloudeventsources.yaml
    ("eventing.keda.sh", "ClusterCloudEventSource", Cluster), // kedacore/keda config/crd/bases/eventing.keda.sh_clustercloudeventsources.yaml
    ("keda.sh", "ClusterTriggerAuthentication", Cluster), // kedacore/keda config/crd/bases/keda.sh_clustertriggerauthentications.yaml
    ("keda.sh", "ScaledJob", Namespaced), // kedacore/keda config/crd/bases/keda.sh_scaledjobs.yaml
    ("keda.sh", "ScaledObject", Namespaced), // kedacore/keda config/crd/bases/keda.sh_scaledobjects.yaml
    ("keda.sh", "TriggerAuthentication", Namespaced), // kedacore/keda config/crd/bases/keda.sh_triggerauthentications.yaml
    // Flux Operator
    ("fluxcd.controlplane.io", "FluxInstance", Namespaced), // controlplaneio-fluxcd/flux-operator config/crd/bases/fluxcd.controlplane.io_fluxinstances.yaml
    ("fluxcd.controlplane.io", "FluxReport", Namespaced), // controlplaneio-fluxcd/flux-operator config/crd/bases/fluxcd.controlplane.io_fluxreports.yaml
    ("fluxcd.controlplane.io", "ResourceSet", Namespaced), // controlplaneio-fluxcd/flux-operator config/crd/bases/fluxcd.controlplane.io_resourcesets.yaml
    ("fluxcd.controlplane.io", "ResourceSetInputProvider", Namespaced), // controlplaneio-fluxcd/flux-operator config/crd/bases/fluxcd.controlplane.io_resourcesetinputproviders.yaml
    // Flux source-watcher
    ("source.extensions.fluxcd.io", "ArtifactGenerator", Namespaced), // fluxcd/source-watcher config/crd/bases/source.extensions.fluxcd.io_artifactgenerators.yaml
    // Flux source-controller
    ("source.toolkit.fluxcd.io", "Bucket", Namespaced), // fluxcd/source-controller config/crd/bases/source.toolkit.fluxcd.io_buckets.yaml
    ("source.toolkit.fluxcd.io", "ExternalArtifact", Namespaced), // fluxcd/source-controller config/crd/bases/source.toolkit.fluxcd.io_externalartifacts.yaml
    ("source.toolkit.fluxcd.io", "GitRepository", Namespaced), // fluxcd/source-controller config/crd/bases/source.toolkit.fluxcd.io_gitrepositories.yaml
    ("source.toolkit.fluxcd.io", "HelmChart", Namespaced), // fluxcd/source-controller config/crd/bases/source.toolkit.fluxcd.io_helmcharts.yaml
    ("source.toolkit.fluxcd.io", "HelmRepository", Namespaced), // fluxcd/source-controller config/crd/bases/source.toolkit.fluxcd.io_helmrepositories.yaml
    ("source.toolkit.fluxcd.io", "OCIRepository", Namespaced), // fluxcd/source-controller config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml
    // Flux kustomize-controller
    ("kustomize.toolkit.fluxcd.io", "Kustomization", Namespaced), // fluxcd/kustomize-controller config/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml
    // Flux helm-controller
    ("helm.toolkit.fluxcd.io", "HelmRelease", Namespaced), // fluxcd/helm-controller config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml
    // Flux notification-controller
    ("notification.toolkit.fluxcd.io", "Alert", Namespaced), // fluxcd/notification-controller config/crd/bases/notification.toolkit.fluxcd.io_alerts.yaml
    ("notification.toolkit.fluxcd.io", "Provider", Namespaced), // fluxcd/notification-controller config/crd/bases/notification.toolkit.fluxcd.io_providers.yaml
    ("notification.toolkit.fluxcd.io", "Receiver", Namespaced), // fluxcd/notification-controller config/crd/bases/notification.toolkit.fluxcd.io_receivers.yaml
    // Flux image-reflector-controller
    ("image.toolkit.fluxcd.io", "ImagePolicy", Namespaced), // fluxcd/image-reflector-controller config/crd/bases/image.toolkit.fluxcd.io_imagepolicies.yaml
    ("image.toolkit.fluxcd.io", "ImageRepository", Namespaced), // fluxcd/image-reflector-controller config/crd/bases/image.toolkit.fluxcd.io_imagerepositories.yaml
    // Flux image-automation-controller
    ("image.toolkit.fluxcd.io", "ImageUpdateAutomation", Namespaced), // fluxcd/image-automation-controller config/crd/bases/image.toolkit.fluxcd.io_imageupdateautomations.yaml
    // Argo CD
    ("argoproj.io", "AppProject", Namespaced), // argoproj/argo-cd manifests/crds/appproject-crd.yaml
    ("argoproj.io", "Application", Namespaced), // argoproj/argo-cd manifests/crds/application-crd.yaml
    ("argoproj.io", "ApplicationSet", Namespaced), // argoproj/argo-cd manifests/crds/applicationset-crd.yaml
    // CloudNativePG
    ("postgresql.cnpg.io", "Backup", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_backups.yaml
    ("postgresql.cnpg.io", "Cluster", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_clusters.yaml
    ("postgresql.cnpg.io", "ClusterImageCatalog", Cluster), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_clusterimagecatalogs.yaml
    ("postgresql.cnpg.io", "Database", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_databases.yaml
    ("postgresql.cnpg.io", "DatabaseRole", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_databaseroles.yaml
    ("postgresql.cnpg.io", "FailoverQuorum", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_failoverquorums.yaml
    ("postgresql.cnpg.io", "ImageCatalog", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_imagecatalogs.yaml
    ("postgresql.cnpg.io", "Pooler", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_poolers.yaml
    ("postgresql.cnpg.io", "Publication", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_publications.yaml
    ("postgresql.cnpg.io", "ScheduledBackup", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_scheduledbackups.yaml
    ("postgresql.cnpg.io", "Subscription", Namespaced), // cloudnative-pg/cloudnative-pg config/crd/bases/postgresql.cnpg.io_subscriptions.yaml
    // NVIDIA GPU Operator
    ("nvidia.com", "ClusterPolicy", Cluster), // NVIDIA/gpu-operator config/crd/bases/nvidia.com_clusterpolicies.yaml
    ("nvidia.com", "GPUCluster", Cluster), // NVIDIA/gpu-operator config/crd/bases/nvidia.com_gpuclusters.yaml
    ("nvidia.com", "NVIDIADriver", Cluster), // NVIDIA/gpu-operator config/crd/bases/nvidia.com_nvidiadrivers.yaml
    ("resource.nvidia.com", "ComputeDomain", Namespaced), // NVIDIA/gpu-operator deployments/gpu-operator/crds/resource.nvidia.com_computedomains.yaml
    ("resource.nvidia.com", "ComputeDomainClique", Namespaced), // NVIDIA/gpu-operator deployments/gpu-operator/crds/resource.nvidia.com_computedomaincliques.yaml
    // Tailscale operator
    ("tailscale.com", "Connector", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_connectors.yaml
    ("tailscale.com", "DNSConfig", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_dnsconfigs.yaml
    ("tailscale.com", "PeerRelay", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_peerrelays.yaml
    ("tailscale.com", "ProxyClass", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_proxyclasses.yaml
    ("tailscale.com", "ProxyGroup", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_proxygroups.yaml
    ("tailscale.com", "ProxyGroupPolicy", Namespaced), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_proxygrouppolicies.yaml
    ("tailscale.com", "Recorder", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_recorders.yaml
    ("tailscale.com", "Tailnet", Cluster), // tailscale/tailscale cmd/k8s-operator/deploy/crds/tailscale.com_tailnets.yaml
    // Kubernetes autoscaler (VPA, cluster-autoscaler)
    ("autoscaling.k8s.io", "VerticalPodAutoscaler", Namespaced), // kubernetes/autoscaler vertical-pod-autoscaler/charts/vertical-pod-autoscaler/crds/vpa-v1-crd-gen.yaml
    ("autoscaling.k8s.io", "VerticalPodAutoscalerCheckpoint", Namespaced), // kubernetes/autoscaler vertical-pod-autoscaler/charts/vertical-pod-autoscaler/crds/vpa-v1-crd-gen.yaml
    ("autoscaling.x-k8s.io", "CapacityBuffer", Namespaced), // kubernetes/autoscaler cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacitybuffers.yaml
    ("autoscaling.x-k8s.io", "CapacityQuota", Cluster), // kubernetes/autoscaler cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_capacityquotas.yaml
    ("autoscaling.x-k8s.io", "ProvisioningRequest", Namespaced), // kubernetes/autoscaler cluster-autoscaler/apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml
    ("balancer.x-k8s.io", "Balancer", Namespaced), // kubernetes/autoscaler balancer/deploy/crd.yaml
    // Grafana Operator
    ("grafana.integreatly.org", "Grafana", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanas.yaml
    ("grafana.integreatly.org", "GrafanaAlertRuleGroup", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanaalertrulegroups.yaml
    ("grafana.integreatly.org", "GrafanaContactPoint", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanacontactpoints.yaml
    ("grafana.integreatly.org", "GrafanaDashboard", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanadashboards.yaml
    ("grafana.integreatly.org", "GrafanaDatasource", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanadatasources.yaml
    ("grafana.integreatly.org", "GrafanaFolder", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanafolders.yaml
    ("grafana.integreatly.org", "GrafanaLibraryPanel", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanalibrarypanels.yaml
    ("grafana.integreatly.org", "GrafanaManifest", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanamanifests.yaml
    ("grafana.integreatly.org", "GrafanaMuteTiming", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanamutetimings.yaml
    ("grafana.integreatly.org", "GrafanaNotificationPolicy", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafananotificationpolicies.yaml
    ("grafana.integreatly.org", "GrafanaNotificationPolicyRoute", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafananotificationpolicyroutes.yaml
    ("grafana.integreatly.org", "GrafanaNotificationTemplate", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafananotificationtemplates.yaml
    ("grafana.integreatly.org", "GrafanaServiceAccount", Namespaced), // grafana/grafana-operator config/crd/bases/grafana.integreatly.org_grafanaserviceaccounts.yaml
    // VictoriaMetrics Operator
    ("operator.victoriametrics.com", "VLAgent", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VLCluster", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VLDistributed", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VLSingle", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VLogs", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAgent", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAlert", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAlertmanager", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAlertmanagerConfig", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAnomaly", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAnomalyConfig", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMAuth", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMCluster", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMDistributed", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMNodeScrape", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMPodScrape", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMProbe", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMRule", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMScrapeConfig", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMServiceScrape", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMSingle", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMStaticScrape", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VMUser", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VTCluster", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    ("operator.victoriametrics.com", "VTSingle", Namespaced), // VictoriaMetrics/operator config/crd/overlay/crd.specless.yaml
    // Secrets Store CSI Driver
    ("secrets-store.csi.x-k8s.io", "SecretProviderClass", Namespaced), // kubernetes-sigs/secrets-store-csi-driver config/crd/bases/secrets-store.csi.x-k8s.io_secretproviderclasses.yaml
    ("secrets-store.csi.x-k8s.io", "SecretProviderClassPodStatus", Namespaced), // kubernetes-sigs/secrets-store-csi-driver config/crd/bases/secrets-store.csi.x-k8s.io_secretproviderclasspodstatuses.yaml
    // Sealed Secrets
    ("bitnami.com", "SealedSecret", Namespaced), // bitnami-labs/sealed-secrets helm/sealed-secrets/crds/bitnami.com_sealedsecrets.yaml
    // 1Password Connect operator
    ("onepassword.com", "OnePasswordItem", Namespaced), // 1Password/onepassword-operator config/crd/bases/onepassword.com_onepassworditems.yaml
    // Cluster API
    ("addons.cluster.x-k8s.io", "ClusterResourceSet", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/addons.cluster.x-k8s.io_clusterresourcesets.yaml
    ("addons.cluster.x-k8s.io", "ClusterResourceSetBinding", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/addons.cluster.x-k8s.io_clusterresourcesetbindings.yaml
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfig", Namespaced), // kubernetes-sigs/cluster-api bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigs.yaml
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate", Namespaced), // kubernetes-sigs/cluster-api bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml
    ("cluster.x-k8s.io", "Cluster", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_clusters.yaml
    ("cluster.x-k8s.io", "ClusterClass", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml
    ("cluster.x-k8s.io", "Machine", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_machines.yaml
    ("cluster.x-k8s.io", "MachineDeployment", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml
    ("cluster.x-k8s.io", "MachineDrainRule", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_machinedrainrules.yaml
    ("cluster.x-k8s.io", "MachineHealthCheck", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_machinehealthchecks.yaml
    ("cluster.x-k8s.io", "MachinePool", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_machinepools.yaml
    ("cluster.x-k8s.io", "MachineSet", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/cluster.x-k8s.io_machinesets.yaml
    ("clusterctl.cluster.x-k8s.io", "Provider", Namespaced), // kubernetes-sigs/cluster-api cmd/clusterctl/config/crd/bases/clusterctl.cluster.x-k8s.io_providers.yaml
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane", Namespaced), // kubernetes-sigs/cluster-api controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlaneTemplate", Namespaced), // kubernetes-sigs/cluster-api controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanetemplates.yaml
    ("ipam.cluster.x-k8s.io", "IPAddress", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddresses.yaml
    ("ipam.cluster.x-k8s.io", "IPAddressClaim", Namespaced), // kubernetes-sigs/cluster-api core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddressclaims.yaml
    ("runtime.cluster.x-k8s.io", "ExtensionConfig", Cluster), // kubernetes-sigs/cluster-api core/config/crd/bases/runtime.cluster.x-k8s.io_extensionconfigs.yaml
    // Strimzi
    ("access.strimzi.io", "KafkaAccess", Namespaced), // strimzi/strimzi-kafka-operator install/access-operator/040-Crd-kafkaaccess.yaml
    ("core.strimzi.io", "StrimziPodSet", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/042-Crd-strimzipodset.yaml
    ("kafka.strimzi.io", "Kafka", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/040-Crd-kafka.yaml
    ("kafka.strimzi.io", "KafkaBridge", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/046-Crd-kafkabridge.yaml
    ("kafka.strimzi.io", "KafkaConnect", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/041-Crd-kafkaconnect.yaml
    ("kafka.strimzi.io", "KafkaConnector", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/047-Crd-kafkaconnector.yaml
    ("kafka.strimzi.io", "KafkaMirrorMaker2", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/048-Crd-kafkamirrormaker2.yaml
    ("kafka.strimzi.io", "KafkaNodePool", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/045-Crd-kafkanodepool.yaml
    ("kafka.strimzi.io", "KafkaRebalance", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/049-Crd-kafkarebalance.yaml
    ("kafka.strimzi.io", "KafkaTopic", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/043-Crd-kafkatopic.yaml
    ("kafka.strimzi.io", "KafkaUser", Namespaced), // strimzi/strimzi-kafka-operator helm-charts/helm3/strimzi-kafka-operator/crds/044-Crd-kafkauser.yaml
    // K8up
    ("k8up.io", "Archive", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_archives.yaml
    ("k8up.io", "Backup", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_backups.yaml
    ("k8up.io", "Check", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_checks.yaml
    ("k8up.io", "PodConfig", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_podconfigs.yaml
    ("k8up.io", "PreBackupPod", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_prebackuppods.yaml
    ("k8up.io", "Prune", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_prunes.yaml
    ("k8up.io", "Restore", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_restores.yaml
    ("k8up.io", "Schedule", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_schedules.yaml
    ("k8up.io", "Snapshot", Namespaced), // k8up-io/k8up config/crd/apiextensions.k8s.io/v1/k8up.io_snapshots.yaml
    // Elastic ECK
    ("agent.k8s.elastic.co", "Agent", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/agent.k8s.elastic.co_agents.yaml
    ("apm.k8s.elastic.co", "ApmServer", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/apm.k8s.elastic.co_apmservers.yaml
    ("autoops.k8s.elastic.co", "AutoOpsAgentPolicy", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/autoops.k8s.elastic.co_autoopsagentpolicies.yaml
    ("autoscaling.k8s.elastic.co", "ElasticsearchAutoscaler", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/autoscaling.k8s.elastic.co_elasticsearchautoscalers.yaml
    ("beat.k8s.elastic.co", "Beat", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/beat.k8s.elastic.co_beats.yaml
    ("elasticsearch.k8s.elastic.co", "Elasticsearch", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/elasticsearch.k8s.elastic.co_elasticsearches.yaml
    ("enterprisesearch.k8s.elastic.co", "EnterpriseSearch", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/enterprisesearch.k8s.elastic.co_enterprisesearches.yaml
    ("kibana.k8s.elastic.co", "Kibana", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/kibana.k8s.elastic.co_kibanas.yaml
    ("logstash.k8s.elastic.co", "Logstash", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/logstash.k8s.elastic.co_logstashes.yaml
    ("maps.k8s.elastic.co", "ElasticMapsServer", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/maps.k8s.elastic.co_elasticmapsservers.yaml
    ("packageregistry.k8s.elastic.co", "PackageRegistry", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/packageregistry.k8s.elastic.co_packageregistries.yaml
    ("stackconfigpolicy.k8s.elastic.co", "StackConfigPolicy", Namespaced), // elastic/cloud-on-k8s config/crds/v1/resources/stackconfigpolicy.k8s.elastic.co_stackconfigpolicies.yaml
    // Emissary-ingress
    ("getambassador.io", "AuthService", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/authservices.yaml
    ("getambassador.io", "ConsulResolver", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/consulresolvers.yaml
    ("getambassador.io", "DevPortal", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/devportals.yaml
    ("getambassador.io", "Host", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/hosts.yaml
    ("getambassador.io", "KubernetesEndpointResolver", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/kubernetesendpointresolvers.yaml
    ("getambassador.io", "KubernetesServiceResolver", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/kubernetesserviceresolvers.yaml
    ("getambassador.io", "Listener", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/listeners.yaml
    ("getambassador.io", "LogService", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/logservices.yaml
    ("getambassador.io", "Mapping", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/mappings.yaml
    ("getambassador.io", "Module", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/modules.yaml
    ("getambassador.io", "RateLimitService", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/ratelimitservices.yaml
    ("getambassador.io", "TCPMapping", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/tcpmappings.yaml
    ("getambassador.io", "TLSContext", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/tlscontexts.yaml
    ("getambassador.io", "TracingService", Namespaced), // emissary-ingress/emissary charts/emissary-crds/templates/tracingservices.yaml
    // Dragonfly operator
    ("dragonflydb.io", "Dragonfly", Namespaced), // dragonflydb/dragonfly-operator config/crd/bases/dragonflydb.io_dragonflies.yaml
    // Intel device plugins operator
    ("deviceplugin.intel.com", "DlbDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_dlbdeviceplugins.yaml
    ("deviceplugin.intel.com", "DsaDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_dsadeviceplugins.yaml
    ("deviceplugin.intel.com", "FpgaDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_fpgadeviceplugins.yaml
    ("deviceplugin.intel.com", "GpuDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_gpudeviceplugins.yaml
    ("deviceplugin.intel.com", "IaaDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_iaadeviceplugins.yaml
    ("deviceplugin.intel.com", "NpuDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_npudeviceplugins.yaml
    ("deviceplugin.intel.com", "QatDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_qatdeviceplugins.yaml
    ("deviceplugin.intel.com", "SgxDevicePlugin", Cluster), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/deviceplugin.intel.com_sgxdeviceplugins.yaml
    ("fpga.intel.com", "AcceleratorFunction", Namespaced), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/fpga.intel.com_acceleratorfunctions.yaml
    ("fpga.intel.com", "FpgaRegion", Namespaced), // intel/intel-device-plugins-for-kubernetes deployments/operator/crd/bases/fpga.intel.com_fpgaregions.yaml
    // EMQX operator
    ("apps.emqx.io", "EMQX", Namespaced), // emqx/emqx-operator config/crd/bases/apps.emqx.io_emqxes.yaml
    ("apps.emqx.io", "EmqxBroker", Namespaced), // emqx/emqx-operator config/crd/bases/apps.emqx.io_emqxbrokers.yaml
    ("apps.emqx.io", "EmqxEnterprise", Namespaced), // emqx/emqx-operator config/crd/bases/apps.emqx.io_emqxenterprises.yaml
    ("apps.emqx.io", "EmqxPlugin", Namespaced), // emqx/emqx-operator config/crd/bases/apps.emqx.io_emqxplugins.yaml
    ("apps.emqx.io", "Rebalance", Namespaced), // emqx/emqx-operator config/crd/bases/apps.emqx.io_rebalances.yaml
    // KubeVirt
    ("kubevirt.io", "KubeVirt", Namespaced), // kubevirt/kubevirt manifests/generated/kv-resource.yaml
    ("template.kubevirt.io", "VirtualMachineTemplate", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/data/virt-template/install-virt-operator.yaml
    ("template.kubevirt.io", "VirtualMachineTemplateRequest", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/data/virt-template/install-virt-operator.yaml
    ("kubevirt.io", "VirtualMachine", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("kubevirt.io", "VirtualMachineInstance", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("kubevirt.io", "VirtualMachineInstancePreset", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("kubevirt.io", "VirtualMachineInstanceReplicaSet", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("kubevirt.io", "VirtualMachineInstanceMigration", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("pool.kubevirt.io", "VirtualMachinePool", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("snapshot.kubevirt.io", "VirtualMachineSnapshot", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("snapshot.kubevirt.io", "VirtualMachineSnapshotContent", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("snapshot.kubevirt.io", "VirtualMachineRestore", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("export.kubevirt.io", "VirtualMachineExport", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("backup.kubevirt.io", "VirtualMachineBackup", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("backup.kubevirt.io", "VirtualMachineBackupTracker", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("instancetype.kubevirt.io", "VirtualMachineInstancetype", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("instancetype.kubevirt.io", "VirtualMachineClusterInstancetype", Cluster), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("instancetype.kubevirt.io", "VirtualMachinePreference", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("instancetype.kubevirt.io", "VirtualMachineClusterPreference", Cluster), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("migrations.kubevirt.io", "MigrationPolicy", Cluster), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
    ("clone.kubevirt.io", "VirtualMachineClone", Namespaced), // kubevirt/kubevirt pkg/virt-operator/resource/generate/components/crds.go
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn each_kind_is_listed_once() {
        let mut seen = BTreeSet::new();
        for (group, kind, _) in CATALOGUE {
            assert!(seen.insert((group, kind)), "{kind}.{group} is listed twice");
        }
    }
}
