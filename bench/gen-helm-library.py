#!/usr/bin/env python3
"""Generates a fleet shaped like the real ones (home-ops: 35 releases of app-template, whose
`common` library subchart holds ~100 template files): a chart `app` with a vendored library chart
of LIBRARY template files, used by RELEASES HelmReleases with different values, plus CRD-heavy
charts (`operator`: one 1 MB CRD in crds/; `crds`: 20 CRDs rendered from templates). The charts
are packaged with `helm package` into REPO_DIR with an index.yaml (serve it over HTTP at URL);
the HelmReleases name them through a HelmRepository at URL, as a loopback mirror would.

Writes FLOOR_FILE: one line per release, `NAME ARCHIVE NAMESPACE VALUES_FILE`, for the
`helm template` floor.

Usage: gen-helm-library.py HELM DIR REPO_DIR URL RELEASES LIBRARY FLOOR_FILE"""
import os
import subprocess
import sys


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def library(root, files):
    """A library chart of `files` template files, each defining helpers the app includes."""
    write(root, "Chart.yaml", "apiVersion: v2\nname: common\nversion: 4.1.1\ntype: library\n")
    write(root, "values.yaml", "global:\n  labels: {}\n")
    for n in range(files):
        doc = "".join(f"{{{{/* part {n}, line {line}: what this helper renders and which values it reads */}}}}\n"
                      for line in range(8))
        write(root, f"templates/lib/_part{n:03d}.tpl", doc + f"""{{{{- define "common.part{n}.labels" -}}}}
app.kubernetes.io/part-{n}: {{{{ .Release.Name | quote }}}}
{{{{- with .Values.global.labels }}}}
{{{{ toYaml . }}}}
{{{{- end }}}}
{{{{- end -}}}}

{{{{- define "common.part{n}.container" -}}}}
- name: {{{{ .name }}}}-{n}
  image: {{{{ .image.repository }}}}:{{{{ .image.tag }}}}
  {{{{- if .env }}}}
  env:
  {{{{- range $k, $v := .env }}}}
  - name: {{{{ $k }}}}
    value: {{{{ $v | quote }}}}
  {{{{- end }}}}
  {{{{- end }}}}
{{{{- end -}}}}
""")


def app(root, library_files):
    write(root, "Chart.yaml", """apiVersion: v2
name: app-template
version: 4.1.1
dependencies:
- name: common
  version: 4.1.1
""")
    write(root, "values.yaml", "global:\n  labels: {}\ncontrollers: {}\nservice: {}\n")
    uses = "\n".join(f'    {{{{- include "common.part{n}.labels" $ | nindent 4 }}}}'
                     for n in range(0, library_files, 10))
    write(root, "templates/common.yaml", f"""{{{{- range $name, $c := .Values.controllers }}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{{{ $.Release.Name }}}}-{{{{ $name }}}}
  labels:
{uses}
spec:
  replicas: {{{{ $c.replicas | default 1 }}}}
  selector:
    matchLabels: {{app: {{{{ $.Release.Name }}}}}}
  template:
    metadata:
      labels: {{app: {{{{ $.Release.Name }}}}}}
    spec:
      containers:
      {{{{- include "common.part0.container" (dict "name" $name "image" $c.image "env" $c.env) | nindent 6 }}}}
{{{{- end }}}}
{{{{- range $name, $s := .Values.service }}}}
---
apiVersion: v1
kind: Service
metadata:
  name: {{{{ $.Release.Name }}}}-{{{{ $name }}}}
spec:
  selector: {{app: {{{{ $.Release.Name }}}}}}
  ports:
  - port: {{{{ $s.port }}}}
{{{{- end }}}}
""")
    library(os.path.join(root, "charts", "common"), library_files)


def crd(group, kind, properties):
    """A CustomResourceDefinition whose schema holds `properties` described fields."""
    fields = "".join(f"""                field{n}:
                  type: string
                  description: {"The field's long description, as generated CRDs carry them. " * 3}
""" for n in range(properties))
    plural = kind.lower() + "s"
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
spec:
  group: {group}
  names:
    kind: {kind}
    plural: {plural}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
{fields}"""


def operator(root):
    """One CRD of about 1 MB in crds/, and a Deployment."""
    write(root, "Chart.yaml", "apiVersion: v2\nname: operator\nversion: 1.0.0\n")
    write(root, "values.yaml", "replicas: 1\n")
    write(root, "crds/big.yaml", crd("big.example.com", "Big", 4500))
    write(root, "templates/deployment.yaml", """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: operator}
  template:
    metadata:
      labels: {app: operator}
    spec:
      containers:
      - name: operator
        image: example/operator:1.0.0
""")


def crds(root):
    """Twenty CRDs rendered from templates (as kube-prometheus-stack's CRD chart does)."""
    write(root, "Chart.yaml", "apiVersion: v2\nname: crds\nversion: 1.0.0\n")
    write(root, "values.yaml", "enabled: true\n")
    for n in range(20):
        write(root, f"templates/crd-{n}.yaml",
              "{{- if .Values.enabled }}\n" + crd("monitoring.example.com", f"Kind{n}", 200) + "{{- end }}\n")


HEADER = """apiVersion: source.toolkit.fluxcd.io/v1
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
"""


def main():
    helm, root, repo, url = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    releases, library_files, floor = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
    env = {"HOME": "/nonexistent", "PATH": os.environ["PATH"]}
    charts = os.path.join(os.path.dirname(os.path.abspath(floor)), "charts")
    app(os.path.join(charts, "app-template"), library_files)
    operator(os.path.join(charts, "operator"))
    crds(os.path.join(charts, "crds"))
    os.makedirs(repo, exist_ok=True)
    for chart in ["app-template", "operator", "crds"]:
        subprocess.run([helm, "package", os.path.join(charts, chart), "-d", repo], check=True,
                       stdout=subprocess.DEVNULL, env=env)
    subprocess.run([helm, "repo", "index", repo, "--url", url], check=True, env=env)
    write(root, "clusters/prod/flux-system/gotk-sync.yaml", HEADER)
    write(root, "apps/repository.yaml", f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata:
  name: charts
  namespace: flux-system
spec:
  interval: 1h
  url: {url}
""")
    entries = [("app-template", "4.1.1", f"app-{i}", f"ns-{i % 8}") for i in range(releases)]
    entries += [("operator", "1.0.0", "operator", "operators"), ("crds", "1.0.0", "crds", "monitoring")]
    names, lines = ["repository.yaml"], []
    values_dir = os.path.join(os.path.dirname(os.path.abspath(floor)), "values")
    os.makedirs(values_dir, exist_ok=True)
    for n, (chart, version, name, namespace) in enumerate(entries):
        if chart == "app-template":
            values = (f"controllers:\n  main:\n    replicas: {n % 5 + 1}\n    image:\n      repository: "
                      f"example/app-{n}\n      tag: \"1.{n}.0\"\n    env:\n      TZ: Europe/Paris\n"
                      f"      INSTANCE: \"{n}\"\nservice:\n  main:\n    port: {8000 + n}\n")
        else:
            values = "replicas: 1\n" if chart == "operator" else "enabled: true\n"
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
      chart: {chart}
      version: {version}
      sourceRef:
        kind: HelmRepository
        name: charts
        namespace: flux-system
  values:
{indented}""")
        names.append(f"{name}.yaml")
        values_file = os.path.join(values_dir, f"{name}.yaml")
        with open(values_file, "w") as f:
            f.write(values)
        lines.append(f"{name} {os.path.join(repo, f'{chart}-{version}.tgz')} {namespace} {values_file}\n")
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
