//! Helm's `--set` syntax and Go's YAML as fluxplan reads them, against the pinned Helm itself:
//! each form is given to `helm template --set`/`--set-string`/`--set-literal`/`-f` of a chart
//! that prints `.Values` as JSON, and fluxplan's port must give the same parsed JSON (or fail
//! where Helm fails), for Helm 3 and Helm 4.

use crate::fixture::helm;
use fluxplan::render::helm::shared::{int64_assignments, map_to_json, new_map};
use fluxplan::render::helm::strvals::{
    parse_into, replace_path_literal_value, replace_path_value, Budget, Dialect, Reader,
};
use serde_json::Value;
use std::process::Command;

/// A chart whose only object holds `.Values` as JSON.
fn dump_chart() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Chart.yaml"), "apiVersion: v2\nname: dump\nversion: 0.1.0\n").unwrap();
    std::fs::create_dir(dir.path().join("templates")).unwrap();
    std::fs::write(
        dir.path().join("templates/values.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\ndata:\n  json: {{ toJson .Values | quote }}\n",
    )
    .unwrap();
    dir
}

/// `.Values` as the pinned Helm `major` builds them from `args`; `Err` with its message when it fails.
fn helm_values(major: u8, chart: &std::path::Path, args: &[&str]) -> Result<Value, String> {
    let helm = helm(major);
    let out = Command::new(helm.program())
        .arg("template")
        .arg("r")
        .arg(chart)
        .args(args)
        .env("HOME", "/nonexistent")
        .output()
        .unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let object = fluxplan::yaml::parse_documents(&text).unwrap().pop().unwrap();
    Ok(serde_json::from_str(object["data"]["json"].as_str().unwrap()).unwrap())
}

/// Helm drops keys whose value is null when it coalesces values (not the parser): the port's
/// result without them.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// Every number as a float: a values file's numbers are all float64 once Helm reads them, and
/// `toJson` prints 1000.0 as 1000.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, numbers_as_floats(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Number(n) => serde_json::Number::from_f64(n.as_f64().unwrap()).map(Value::Number).unwrap(),
        other => other,
    }
}

fn dialect(major: u8) -> Dialect {
    if major == 3 {
        Dialect::V3
    } else {
        Dialect::V4
    }
}

/// One case per syntax form: (what it shows, the flag, its argument).
const SET_CASES: &[(&str, &str, &str)] = &[
    ("comma separates assignments", "--set", "a=1,b=two"),
    ("a comma in a value opens a second path", "--set", "x=plain,gate.open=true"),
    ("an escaped comma is part of the value", "--set", "x=plain\\,gate.open=true"),
    ("an escaped backslash before a comma still separates", "--set", "x=plain\\\\,gate.open=true"),
    ("an escaped dot is part of the key", "--set", "a\\.b=1,c.d\\.e=2"),
    ("braces are a list", "--set", "a={1,two,true},b={}"),
    ("a list then more assignments", "--set", "a={x,y},b=1"),
    ("an index", "--set", "a[0]=x,a[2]=y"),
    ("a map in a list", "--set", "a[0].b=1,a[0].c[1]=z"),
    ("a list in a list", "--set", "a[1][0]=q,a[1][2]=r"),
    (
        "types",
        "--set",
        "t=true,f=FALSE,i=42,z=0,o=0755,neg=-3,plus=+7,big=99999999999999999999,fl=1.5,s=falſe",
    ),
    ("an empty value and a trailing comma", "--set", "e=,g=1,"),
    ("escaped specials in keys", "--set", "k\\=x\\,y\\[z\\]=5,m\\{n\\}.o\\\\p=6"),
    ("a quoted value stays quoted for --set", "--set", "q=\"x\",r='y'"),
    ("set-string keeps every value a string", "--set-string", "i=42,b=true,l={1,2},n=null"),
    ("a path ending in a dot is ignored", "--set", "a=1,b."),
    ("an index left open (v3 fails, v4 stops)", "--set", "x=1,a[1"),
    ("a map over a string fails", "--set", "a=1,a.b=2"),
    ("a list over a string fails", "--set", "a=1,a[0]=2"),
    ("an index past MaxIndex fails", "--set", "a[65537]=1"),
    ("a negative index fails", "--set", "a[-1]=1"),
    ("a key without a value fails", "--set", "a"),
    ("an unterminated list fails", "--set", "a={1,2"),
    ("31 levels of names fail", "--set", "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a=1"),
];

#[test]
fn every_set_form_parses_as_the_pinned_helm_parses_it() {
    let chart = dump_chart();
    for major in [3u8, 4] {
        for (what, flag, argument) in SET_CASES {
            let expected = helm_values(major, chart.path(), &[flag, argument]);
            let map = new_map([]);
            let reader = if *flag == "--set-string" { Reader::String } else { Reader::Typed };
            let ours = parse_into(argument, &map, &reader, dialect(major), &mut Budget::default())
                .map(|()| without_nulls(map_to_json(&map)));
            match (&expected, &ours) {
                (Ok(expected), Ok(ours)) => {
                    assert_eq!(ours, expected, "Helm {major}, {what}: {flag} {argument}")
                }
                (Err(_), Err(_)) => {}
                _ => panic!(
                    "Helm {major}, {what}: {flag} {argument}: helm gave {expected:?}, fluxplan {ours:?}"
                ),
            }
        }
    }
}

/// A chart whose only object holds the Go type of every leaf of `.Values` (`path=type;`).
fn type_chart() -> tempfile::TempDir {
    let dir = dump_chart();
    std::fs::write(
        dir.path().join("templates/values.yaml"),
        "{{- define \"walk\" -}}{{- $p := index . 0 -}}{{- $v := index . 1 -}}\
         {{- if kindIs \"map\" $v -}}{{- range $k, $x := $v -}}{{ include \"walk\" (list (printf \"%s/%s\" $p $k) $x) }}{{- end -}}\
         {{- else if kindIs \"slice\" $v -}}{{- range $i, $x := $v -}}{{ include \"walk\" (list (printf \"%s[%d]\" $p $i) $x) }}{{- end -}}\
         {{- else -}}{{ $p }}={{ typeOf $v }}:{{ $v }};{{- end -}}{{- end -}}\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\ndata:\n  types: {{ include \"walk\" (list \"\" .Values) | quote }}\n",
    )
    .unwrap();
    dir
}

/// The Go type and value of every leaf as the pinned Helm prints them for `args`.
fn helm_types(chart: &std::path::Path, args: &[&str]) -> Result<String, String> {
    let helm = helm(4);
    let out = Command::new(helm.program()).arg("template").arg("r").arg(chart).args(args).output().unwrap();
    if !out.status.success() {
        return Err(format!("{args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8(out.stdout).unwrap();
    let object = fluxplan::yaml::parse_documents(&text).unwrap().pop().unwrap();
    Ok(object["data"]["types"].as_str().unwrap().to_string())
}

/// What `--set` makes, given to Helm as fluxplan gives it (the values as JSON through `--values`,
/// then the `--set` assignments that give back the `int64`s): the same Go types and values as
/// Helm's own `--set` of the text, for every form Helm accepts.
#[test]
fn set_values_reach_helm_with_their_go_types() {
    let chart = type_chart();
    let mut checked = 0;
    for (what, flag, argument) in SET_CASES.iter().filter(|(_, flag, _)| *flag == "--set") {
        let Ok(expected) = helm_types(chart.path(), &[flag, argument]) else { continue };
        let map = new_map([]);
        parse_into(argument, &map, &Reader::Typed, Dialect::V4, &mut Budget::default()).unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), map_to_json(&map).to_string()).unwrap();
        let assignments = int64_assignments(&map);
        let mut args = vec!["--values", file.path().to_str().unwrap()];
        args.extend(assignments.iter().flat_map(|a| ["--set", a.as_str()]));
        assert_eq!(helm_types(chart.path(), &args), Ok(expected), "{what}: {argument} as {args:?}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} forms checked");
}

/// Several `--set` flags, one after the other, into one map (as Argo CD's parameters are given).
#[test]
fn several_set_flags_apply_in_order_into_one_map() {
    let chart = dump_chart();
    let flags = ["a.b=1", "a.c={x,y}", "a.c[3]=z", "a.b=2,d=e"];
    for major in [3u8, 4] {
        let args: Vec<&str> = flags.iter().flat_map(|f| ["--set", *f]).collect();
        let expected = helm_values(major, chart.path(), &args).unwrap();
        let map = new_map([]);
        for flag in flags {
            parse_into(flag, &map, &Reader::Typed, dialect(major), &mut Budget::default()).unwrap();
        }
        assert_eq!(without_nulls(map_to_json(&map)), expected, "Helm {major}");
    }
}

/// helm-controller's `targetPath` (fluxcd/pkg `ReplacePathValue`): unquoted → `--set PATH=VALUE`;
/// quoted → the quotes trimmed, `--set-string`; `literal` → `--set-literal PATH=VALUE`.
#[test]
fn target_path_values_are_what_helm_makes_of_the_same_flag() {
    let chart = dump_chart();
    let cases: &[(&str, bool, &str, &str)] = &[
        ("plain,gate.open=true", false, "--set", "x=plain,gate.open=true"),
        ("plain\\,gate.open=true", false, "--set", "x=plain\\,gate.open=true"),
        ("{a,b}", false, "--set", "x={a,b}"),
        ("\"42,y=true\"", false, "--set-string", "x=42,y=true"),
        ("'0755'", false, "--set-string", "x=0755"),
        ("plain,gate.open=true", true, "--set-literal", "x=plain,gate.open=true"),
        ("{a,b}\\[0]=x", true, "--set-literal", "x={a,b}\\[0]=x"),
    ];
    for major in [3u8, 4] {
        for (value, literal, flag, argument) in cases {
            let expected = helm_values(major, chart.path(), &[flag, argument]).unwrap();
            let map = new_map([]);
            let budget = &mut Budget::default();
            let set = if *literal { replace_path_literal_value } else { replace_path_value };
            set(&map, "x", value, None, dialect(major), budget).unwrap();
            assert_eq!(without_nulls(map_to_json(&map)), expected, "Helm {major}: targetPath x = {value}");
        }
    }
}

/// Values files as Helm reads them (`-f`): merge keys where they stand, YAML 1.1 scalars,
/// quoted scalars as strings; Helm 4 merges every document of a file, Helm 3 reads the first.
#[test]
fn values_files_read_as_helm_reads_them() {
    let chart = dump_chart();
    let files = [
        "base: &base {a: 1, b: 1}\nother: &other {b: 2, c: 2}\nbefore: {a: 0, <<: *base}\nafter: {<<: *base, a: 3}\n\
         list: {<<: [*base, *other]}\nquoted: {\"<<\": *base}\n",
        "gate: &g {open: false}\nrelease:\n  <<: *g\n  open: on\nflags: [yes, no, off, y, n, \"yes\", 'on']\n",
        "octal: 0755\nunderscored: 1_000\nbinary: 0b101\nhex: 0x1F\nfloat: 1e3\nnotoctal: 08\nstring: !!str 12\n\
         date: 2024-01-01\ny: key\n",
        "a: 1\n---\nb: 2\n",
    ];
    for major in [3u8, 4] {
        for text in files {
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), text).unwrap();
            let expected = helm_values(major, chart.path(), &["-f", file.path().to_str().unwrap()]).unwrap();
            let ours = fluxplan::render::helm::values::values_file(text, dialect(major)).unwrap();
            assert_eq!(
                numbers_as_floats(without_nulls(map_to_json(&ours))),
                numbers_as_floats(expected),
                "Helm {major}: {text}"
            );
        }
        // What Go refuses, fluxplan refuses.
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "a: .inf\n").unwrap();
        assert!(helm_values(major, chart.path(), &["-f", file.path().to_str().unwrap()]).is_err());
        assert!(fluxplan::render::helm::values::values_file("a: .inf\n", dialect(major)).is_err());
    }
}
