#!/usr/bin/env python3
"""Generates a synthetic Flux fleet: N Kustomizations x M objects, nested three deep, with
postBuild substitution and a shared component. Usage: gen-fleet.py DIR N M"""
import os
import subprocess
import sys


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def kustomization(name, path, depends=""):
    return f"""apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {name}
  namespace: flux-system
spec:
  interval: 10m
  path: {path}
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
  postBuild:
    substitute:
      app: {name}
      replicas: "2"
{depends}"""


def main():
    root, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    write(root, "clusters/bench/flux-system/gotk-sync.yaml", """apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  url: https://example.com/bench/fleet
---
""" + kustomization("flux-system", "./clusters/bench"))
    write(root, "clusters/bench/flux-system/kustomization.yaml", "resources:\n- gotk-sync.yaml\n")
    write(root, "components/common/kustomization.yaml",
          "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n"
          "commonLabels:\n  fleet: bench\n")
    # Nesting: flux-system -> group-G (10 groups) -> app-I; every app renders M objects.
    groups = max(1, min(10, n // 10))
    for g in range(groups):
        write(root, f"clusters/bench/group-{g}.yaml", kustomization(f"group-{g}", f"./groups/{g}"))
    for i in range(n):
        g = i % groups
        write(root, f"groups/{g}/app-{i}.yaml", kustomization(f"app-{i}", f"./apps/app-{i}"))
        resources = []
        for j in range(m):
            kind = "ConfigMap" if j % 2 == 0 else "Service"
            body = ("data:\n  app: ${app}\n  index: \"%d\"\n" % j) if kind == "ConfigMap" else \
                "spec:\n  ports:\n  - port: 80\n  selector:\n    app: ${app}\n"
            write(root, f"apps/app-{i}/obj-{j}.yaml",
                  f"apiVersion: v1\nkind: {kind}\nmetadata:\n  name: ${{app}}-{j}\n  namespace: app-{i}\n{body}")
            resources.append(f"obj-{j}.yaml")
        write(root, f"apps/app-{i}/kustomization.yaml",
              "resources:\n" + "".join(f"- {r}\n" for r in resources) + "components:\n- ../../components/common\n")
    if not os.path.isdir(os.path.join(root, ".git")):
        subprocess.run(["git", "init", "-q", "-b", "main", root], check=True)
    subprocess.run(["git", "-C", root, "add", "-A"], check=True)
    subprocess.run(["git", "-C", root, "-c", "user.email=b@example.com", "-c", "user.name=bench",
                    "commit", "-q", "-m", f"fleet {n}x{m}"], check=True)


if __name__ == "__main__":
    main()
