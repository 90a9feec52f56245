#!/usr/bin/env python3
"""Generates a fleet shaped like home-ops' apps: RELEASES HelmReleases of a few charts (one chart,
many values), all applied by one Kustomization, the charts in the repository (`charts/`, made by
`helm create`). Writes FLOOR_FILE: one line per release, `NAME CHART NAMESPACE VALUES_FILE`, for
the `helm template` floor.

Usage: gen-helm-fleet.py HELM DIR RELEASES FLOOR_FILE"""
import os
import subprocess
import sys

CHARTS = ["web", "api", "worker"]


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def main():
    helm, root, releases, floor = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    os.makedirs(os.path.join(root, "charts"), exist_ok=True)
    for chart in CHARTS:
        subprocess.run([helm, "create", os.path.join(root, "charts", chart)], check=True,
                       stdout=subprocess.DEVNULL, env={"HOME": "/nonexistent", "PATH": os.environ["PATH"]})
    write(root, "clusters/prod/flux-system/gotk-sync.yaml", """apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m
  url: https://github.com/example/home-ops
  ref:
    branch: main
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m
  path: ./clusters/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: ./apps
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
""")
    names = []
    lines = []
    values_dir = os.path.join(os.path.dirname(os.path.abspath(floor)), "values")
    os.makedirs(values_dir, exist_ok=True)
    for i in range(releases):
        name, chart, namespace = f"app-{i}", CHARTS[i % len(CHARTS)], f"ns-{i % 8}"
        values = f"replicaCount: {i % 5 + 1}\nimage:\n  tag: \"1.{i}.0\"\nservice:\n  port: {8000 + i}\n"
        indented = "".join(f"    {line}\n" for line in values.splitlines())
        write(root, f"apps/{name}.yaml", f"""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {name}
  namespace: {namespace}
spec:
  interval: 1h
  chart:
    spec:
      chart: ./charts/{chart}
      sourceRef:
        kind: GitRepository
        name: flux-system
        namespace: flux-system
  values:
{indented}""")
        names.append(f"{name}.yaml")
        values_file = os.path.join(values_dir, f"{name}.yaml")
        with open(values_file, "w") as f:
            f.write(values)
        lines.append(f"{name} {os.path.join(root, 'charts', chart)} {namespace} {values_file}\n")
    write(root, "apps/kustomization.yaml",
          "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
          + "".join(f"- {n}\n" for n in names))
    with open(floor, "w") as f:
        f.writelines(lines)
    git = ["git", "-C", root, "-c", "user.email=b@example.com", "-c", "user.name=bench"]
    subprocess.run(git[:3] + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "fleet"], check=True)


main()
