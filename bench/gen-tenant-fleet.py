#!/usr/bin/env python3
"""A Flux Operator fleet shaped like controlplaneio-fluxcd/d2-fleet, for bench/resourceset.sh.

CLUSTERS cluster directories, each with a FluxInstance syncing the OCIRepository CI pushes and a
`tenants` Kustomization reading it; `tenants/` holds SETS ResourceSets sharing TENANTS inline
inputs, each input stamping out a Namespace, ServiceAccount, RoleBinding, ConfigMap, Secret,
PersistentVolumeClaim, OCIRepository and Kustomization (8 objects). Commits once.

Usage: gen-tenant-fleet.py DIR TENANTS [SETS] [CLUSTERS]
"""
import os
import subprocess
import sys

out, tenants = sys.argv[1], int(sys.argv[2])
sets = int(sys.argv[3]) if len(sys.argv) > 3 else 4
clusters = int(sys.argv[4]) if len(sys.argv) > 4 else 3


def write(path, text):
    path = os.path.join(out, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


for c in range(clusters):
    name = f"cluster-{c}"
    write(f"clusters/{name}/flux-system/flux-instance.yaml", f"""apiVersion: fluxcd.controlplane.io/v1
kind: FluxInstance
metadata:
  name: flux
  namespace: flux-system
spec:
  distribution:
    version: "2.x"
    registry: ghcr.io/fluxcd
  sync:
    kind: OCIRepository
    url: oci://ghcr.io/acme/fleet
    ref: latest
    path: clusters/{name}
""")
    write(f"clusters/{name}/tenants.yaml", """apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: tenants
  namespace: flux-system
spec:
  interval: 1h
  path: ./tenants
  prune: true
  sourceRef:
    kind: OCIRepository
    name: flux-system
""")

per_set = max(1, tenants // sets)
for s in range(sets):
    inputs = "".join(f"    - tenant: team-{s}-{t}\n      replicas: {1 + t % 3}\n" for t in range(per_set))
    write(f"tenants/set-{s}.yaml", f"""apiVersion: fluxcd.controlplane.io/v1
kind: ResourceSet
metadata:
  name: set-{s}
  namespace: flux-system
spec:
  commonMetadata:
    labels:
      fleet.acme.dev/set: "{s}"
  inputs:
{inputs}  resourcesTemplate: |
    apiVersion: v1
    kind: Namespace
    metadata:
      name: << inputs.tenant >>
    ---
    apiVersion: v1
    kind: ServiceAccount
    metadata:
      name: flux
      namespace: << inputs.tenant >>
    ---
    apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata:
      name: flux
      namespace: << inputs.tenant >>
    roleRef:
      apiGroup: rbac.authorization.k8s.io
      kind: ClusterRole
      name: admin
    subjects:
      - kind: ServiceAccount
        name: flux
        namespace: << inputs.tenant >>
    ---
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: settings
      namespace: << inputs.tenant >>
    data:
      replicas: << inputs.replicas | quote >>
      slug: << inputs.tenant | slugify | quote >>
    ---
    apiVersion: v1
    kind: Secret
    metadata:
      name: registry
      namespace: << inputs.tenant >>
      annotations:
        fluxcd.controlplane.io/copyFrom: flux-system/registry
    type: kubernetes.io/dockerconfigjson
    ---
    apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      name: data
      namespace: << inputs.tenant >>
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: << mul inputs.replicas 10 >>Gi
    ---
    apiVersion: source.toolkit.fluxcd.io/v1
    kind: OCIRepository
    metadata:
      name: apps
      namespace: << inputs.tenant >>
    spec:
      interval: 5m
      url: oci://ghcr.io/acme/apps/<< inputs.tenant >>
      ref:
        tag: latest
    ---
    apiVersion: kustomize.toolkit.fluxcd.io/v1
    kind: Kustomization
    metadata:
      name: apps
      namespace: << inputs.tenant >>
    spec:
      interval: 30m
      path: ./production
      prune: true
      sourceRef:
        kind: OCIRepository
        name: apps
""")

git = ["git", "-C", out, "-c", "user.email=b@example.com", "-c", "user.name=bench"]
subprocess.run(["git", "init", "-q", out], check=True)
subprocess.run(git + ["add", "-A"], check=True)
subprocess.run(git + ["commit", "-qm", "fleet"], check=True)
