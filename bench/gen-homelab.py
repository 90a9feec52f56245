#!/usr/bin/env python3
"""Generates a fleet laid out like a Flux Operator homelab repository: a FluxInstance (the
flux-instance chart's HelmRelease) syncing kubernetes/flux/cluster, whose `cluster-apps`
Kustomization patches every child Kustomization (decryption, substituteFrom, HelmRelease
defaults as `spec.patches`); one directory per namespace listing each app's `ks.yaml`; apps
with `postBuild.substitute`, shared components and dependsOn.

Usage: gen-homelab.py DIR NAMESPACES APPS_PER_NAMESPACE [PATHS_FILE]
Writes, when PATHS_FILE is given, every Kustomization's path (one per line) for the floors."""
import os
import subprocess
import sys


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


FLUX_INSTANCE = """apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: flux-instance
  namespace: flux-system
spec:
  interval: 1h
  chartRef:
    kind: OCIRepository
    name: flux-instance
  values:
    instance:
      distribution:
        version: 2.x
        registry: ghcr.io/fluxcd
      sync:
        kind: GitRepository
        url: https://github.com/example/home-ops
        ref: refs/heads/main
        path: kubernetes/flux/cluster
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: flux-instance
  namespace: flux-system
spec:
  interval: 5m
  url: oci://ghcr.io/controlplaneio-fluxcd/charts/flux-instance
  ref:
    tag: 0.14.0
"""

CLUSTER_APPS = """apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: cluster-apps
  namespace: flux-system
spec:
  interval: 1h
  path: ./kubernetes/apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substitute:
      CLUSTER: home
  patches:
    - patch: |-
        apiVersion: kustomize.toolkit.fluxcd.io/v1
        kind: Kustomization
        metadata:
          name: _
        spec:
          deletionPolicy: WaitForTermination
          decryption:
            provider: sops
            secretRef:
              name: sops-age
          postBuild:
            substitute:
              CLUSTER: home
          patches:
            - patch: |-
                apiVersion: helm.toolkit.fluxcd.io/v2
                kind: HelmRelease
                metadata:
                  name: _
                spec:
                  install:
                    crds: CreateReplace
                    strategy:
                      name: RetryOnFailure
                  upgrade:
                    cleanupOnFail: true
                    crds: CreateReplace
                    remediation:
                      retries: 2
              target:
                group: helm.toolkit.fluxcd.io
                kind: HelmRelease
      target:
        group: kustomize.toolkit.fluxcd.io
        kind: Kustomization
"""


def app_ks(ns, app, depends):
    depends_on = "".join(f"    - name: {d}\n      namespace: {ns}\n" for d in depends)
    return f"""apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: &app {app}
  namespace: {ns}
spec:
  commonMetadata:
    labels:
      app.kubernetes.io/name: *app
  components:
    - ../../../../components/volsync
  path: ./kubernetes/apps/{ns}/{app}/app
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
    namespace: flux-system
  targetNamespace: {ns}
  interval: 1h
  retryInterval: 2m
  timeout: 5m
  wait: false
  postBuild:
    substitute:
      APP: *app
      VOLSYNC_CAPACITY: 5Gi
{"  dependsOn:" + chr(10) + depends_on if depends else ""}"""


def app_files(root, ns, app, index):
    base = f"kubernetes/apps/{ns}/{app}/app"
    write(root, f"{base}/kustomization.yaml", f"""---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ./helmrelease.yaml
  - ./ocirepository.yaml
configMapGenerator:
  - name: {app}-config
    files:
      - config.yaml=./resources/config.yaml
generatorOptions:
  disableNameSuffixHash: true
""")
    write(root, f"{base}/resources/config.yaml", f"app: ${{APP}}\ncluster: ${{CLUSTER}}\nindex: {index}\n")
    write(root, f"{base}/ocirepository.yaml", f"""---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: {app}
spec:
  interval: 15m
  layerSelector:
    mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip
    operation: copy
  ref:
    tag: 4.1.2
  url: oci://ghcr.io/bjw-s-labs/helm/app-template
""")
    write(root, f"{base}/helmrelease.yaml", f"""---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {app}
spec:
  chartRef:
    kind: OCIRepository
    name: {app}
  interval: 1h
  values:
    controllers:
      {app}:
        annotations:
          reloader.stakater.com/auto: "true"
        containers:
          app:
            image:
              repository: ghcr.io/home-operations/{app}
              tag: 1.{index}.0
            env:
              TZ: Europe/Berlin
              CLUSTER: ${{CLUSTER}}
            probes:
              liveness:
                enabled: true
              readiness:
                enabled: true
            resources:
              requests:
                cpu: 10m
              limits:
                memory: 1Gi
    service:
      app:
        ports:
          http:
            port: 80
    route:
      app:
        hostnames: ["{{{{ .Release.Name }}}}.example.com"]
        parentRefs:
          - name: envoy-internal
            namespace: network
    persistence:
      config:
        existingClaim: ${{APP}}
""")


def main():
    root, namespaces, per_ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    paths_file = sys.argv[4] if len(sys.argv) > 4 else None
    paths = ["kubernetes/flux/cluster", "kubernetes/apps"]
    write(root, "kubernetes/flux/cluster/ks.yaml", CLUSTER_APPS)
    write(root, "kubernetes/flux/cluster/kustomization.yaml",
          "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./ks.yaml\n")
    write(root, "kubernetes/components/common/kustomization.yaml", """---
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources:
  - ./sops
""")
    write(root, "kubernetes/components/common/sops/kustomization.yaml",
          "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./cluster-secrets.yaml\n")
    write(root, "kubernetes/components/common/sops/cluster-secrets.yaml", """---
apiVersion: v1
kind: Secret
metadata:
  name: cluster-secrets
stringData:
  SECRET_DOMAIN: example.com
""")
    write(root, "kubernetes/components/volsync/kustomization.yaml", """---
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
resources:
  - ./pvc.yaml
  - ./replicationsource.yaml
""")
    write(root, "kubernetes/components/volsync/pvc.yaml", """---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ${APP}
spec:
  accessModes: ["${VOLSYNC_ACCESSMODES:=ReadWriteOnce}"]
  dataSourceRef:
    kind: ReplicationDestination
    apiGroup: volsync.backube
    name: ${APP}-dst
  resources:
    requests:
      storage: ${VOLSYNC_CAPACITY:=5Gi}
  storageClassName: ${VOLSYNC_STORAGECLASS:=ceph-block}
""")
    write(root, "kubernetes/components/volsync/replicationsource.yaml", """---
apiVersion: volsync.backube/v1alpha1
kind: ReplicationSource
metadata:
  name: ${APP}
spec:
  sourcePVC: ${APP}
  trigger:
    schedule: "0 * * * *"
  restic:
    copyMethod: ${VOLSYNC_COPYMETHOD:=Snapshot}
    pruneIntervalDays: 14
    repository: ${APP}-volsync-secret
    retain:
      hourly: 24
      daily: 7
""")
    ns_names = ["flux-system"] + [f"ns-{n}" for n in range(1, namespaces)]
    apps_entries = []
    for ns in ns_names:
        apps_entries.append(f"  - ./{ns}\n")
        entries = ["  - ./namespace.yaml\n"]
        write(root, f"kubernetes/apps/{ns}/namespace.yaml",
              f"---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  annotations:\n    kustomize.toolkit.fluxcd.io/prune: disabled\n")
        apps = [f"{ns}-app-{a}" for a in range(per_ns)]
        if ns == "flux-system":
            apps[0] = "flux-instance"
        for index, app in enumerate(apps):
            entries.append(f"  - ./{app}/ks.yaml\n")
            depends = [apps[0]] if index > 0 else []
            write(root, f"kubernetes/apps/{ns}/{app}/ks.yaml", app_ks(ns, app, depends))
            paths.append(f"kubernetes/apps/{ns}/{app}/app")
            if app == "flux-instance":
                write(root, f"kubernetes/apps/{ns}/{app}/app/kustomization.yaml",
                      "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./helmrelease.yaml\n")
                write(root, f"kubernetes/apps/{ns}/{app}/app/helmrelease.yaml", FLUX_INSTANCE)
            else:
                app_files(root, ns, app, index)
        write(root, f"kubernetes/apps/{ns}/kustomization.yaml",
              f"---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\n"
              "components:\n  - ../../components/common\nresources:\n" + "".join(entries))
    write(root, "kubernetes/apps/kustomization.yaml",
          "---\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
          + "".join(apps_entries))
    if paths_file:
        with open(paths_file, "w") as f:
            f.write("".join(p + "\n" for p in paths))
    if not os.path.isdir(os.path.join(root, ".git")):
        subprocess.run(["git", "init", "-q", "-b", "main", root], check=True)
    subprocess.run(["git", "-C", root, "add", "-A"], check=True)
    subprocess.run(["git", "-C", root, "-c", "user.email=b@example.com", "-c", "user.name=bench",
                    "commit", "-q", "-m", f"homelab {namespaces}x{per_ns}"], check=True)


if __name__ == "__main__":
    main()
