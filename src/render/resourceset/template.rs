//! The Flux Operator's template language: Go `text/template` with `<<` and `>>` as delimiters,
//! `missingkey=error`, the input set as the function `inputs`, and functions from slim-sprig's
//! hermetic set plus `slugify`, `toYaml` and `mustToYaml`.
//!
//! Templates run on `gotmpl`, a port of Go's `text/template`. Of the functions, fluxplan renders
//! the ones below, each as slim-sprig writes it; a template that names any other function fails
//! by that name, never rendered by a guess.

use gotmpl::{MissingKey, Template, TemplateError, Value};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

/// The operator's delimiters.
const LEFT: &str = "<<";
const RIGHT: &str = ">>";
/// Range iterations one template may run (the operator has no bound; a pull request must).
const MAX_RANGE_ITERATIONS: u64 = 100_000;
/// gosimple/slug's length as the operator sets it: a label value's.
const SLUG_MAX_LENGTH: usize = 63;

/// The functions of slim-sprig's hermetic set and the operator's own that fluxplan does not
/// render: named in the error so the author knows it is fluxplan's gap, not theirs.
const NOT_RENDERED: &[&str] = &[
    "ago",
    "duration",
    "durationRound",
    "mustToDate",
    "toDate",
    "unixEpoch",
    "title",
    "substr",
    "trimall",
    "plural",
    "sha1sum",
    "adler32sum",
    "float64",
    "seq",
    "toDecimal",
    "split",
    "splitn",
    "toStrings",
    "until",
    "untilStep",
    "randInt",
    "biggest",
    "maxf",
    "minf",
    "ceil",
    "floor",
    "round",
    "all",
    "any",
    "mustCompact",
    "fromJson",
    "toPrettyJson",
    "toRawJson",
    "mustFromJson",
    "mustToJson",
    "mustToPrettyJson",
    "mustToRawJson",
    "typeOf",
    "typeIs",
    "typeIsLike",
    "kindOf",
    "kindIs",
    "deepEqual",
    "base",
    "dir",
    "clean",
    "ext",
    "isAbs",
    "osBase",
    "osClean",
    "osDir",
    "osExt",
    "osIsAbs",
    "b32enc",
    "b32dec",
    "tuple",
    "set",
    "unset",
    "pluck",
    "keys",
    "pick",
    "omit",
    "values",
    "append",
    "mustAppend",
    "prepend",
    "mustPrepend",
    "mustFirst",
    "rest",
    "mustRest",
    "mustLast",
    "initial",
    "mustInitial",
    "reverse",
    "mustReverse",
    "mustUniq",
    "without",
    "mustWithout",
    "mustHas",
    "slice",
    "mustSlice",
    "concat",
    "dig",
    "chunk",
    "mustChunk",
    "mustRegexMatch",
    "regexFindAll",
    "mustRegexFindAll",
    "regexFind",
    "mustRegexFind",
    "mustRegexReplaceAll",
    "regexReplaceAllLiteral",
    "mustRegexReplaceAllLiteral",
    "regexSplit",
    "mustRegexSplit",
    "regexQuoteMeta",
    "urlParse",
    "urlJoin",
    "hello",
    "mustDateModify",
];

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateFailure(pub String);

/// The text a ResourceSet's templates may print in all, across every input set: a pull request
/// must not make the planner print without end.
pub struct Budget {
    remaining: std::cell::Cell<usize>,
    limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Budget { remaining: std::cell::Cell::new(limit), limit }
    }

    pub fn exhausted(&self) -> bool {
        self.remaining.get() == 0
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// Collects a template's output, failing once the budget is spent.
struct Bounded<'b> {
    out: Vec<u8>,
    budget: &'b Budget,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let remaining = self.budget.remaining.get();
        if bytes.len() > remaining {
            self.budget.remaining.set(0);
            return Err(std::io::Error::other("over the output budget"));
        }
        self.budget.remaining.set(remaining - bytes.len());
        self.out.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Renders `text` for one input set (`None`: the ResourceSet has no inputs).
pub fn render(text: &str, inputs: Option<&Json>, budget: &Budget) -> Result<String, TemplateFailure> {
    let inputs = inputs.map(to_value).transpose()?.unwrap_or(Value::Nil);
    let template = Template::new("resourceset")
        .delims(LEFT, RIGHT)
        .missing_key(MissingKey::Error)
        .max_range_iters(MAX_RANGE_ITERATIONS)
        .funcs(FUNCTIONS.clone())
        .func("inputs", move |_| Ok(inputs.clone()))
        .parse(text)
        .map_err(|e| TemplateFailure(format!("cannot parse the template: {e}")))?;
    // Go's parser refuses a function it does not know wherever it is named, even in a branch
    // that never runs: so does this one.
    if let Some(name) = undefined_functions(&template).into_iter().next() {
        return Err(unknown_function(&name));
    }
    let mut out = Bounded { out: Vec::new(), budget };
    template.execute(&mut out, &Value::Nil).map_err(|e| match e {
        _ if budget.exhausted() => TemplateFailure(format!(
            "the templates print more than {} MiB: over fluxplan's limit",
            budget.limit() >> 20
        )),
        TemplateError::UndefinedFunction(name) => unknown_function(&name),
        other => TemplateFailure(format!("cannot execute the template: {other}")),
    })?;
    String::from_utf8(out.out)
        .map_err(|_| TemplateFailure("the template prints text that is not UTF-8".into()))
}

fn unknown_function(name: &str) -> TemplateFailure {
    if NOT_RENDERED.contains(&name) {
        TemplateFailure(format!(
            "the template calls {name}, a function the Flux Operator has and fluxplan does not render: \
             this ResourceSet is not planned (docs/flux-operator.md lists the functions rendered)"
        ))
    } else {
        TemplateFailure(format!(
            "the template calls {name}, which is not a function the Flux Operator defines"
        ))
    }
}

/// Functions named anywhere in the parsed template that neither Go nor the operator define here.
fn undefined_functions(template: &Template) -> Vec<String> {
    static IDENTIFIER: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r#"Identifier\(Pos \{[^}]*\}, "([^"]+)"\)"#).expect("valid"));
    let known = |name: &str| name == "inputs" || FUNCTIONS.contains_key(name) || BUILTINS.contains(&name);
    template
        .templates()
        .into_iter()
        .filter_map(|name| template.lookup(name))
        .flat_map(|tree| {
            let printed = format!("{tree:?}");
            IDENTIFIER.captures_iter(&printed).map(|c| c[1].to_string()).collect::<Vec<_>>()
        })
        .filter(|name| !known(name))
        .collect()
}

/// Go's own template functions.
const BUILTINS: &[&str] = &[
    "and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf", "println",
    "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

/// Inputs as Go holds them after `json.Unmarshal` into `any`: numbers are `float64`.
pub fn to_value(json: &Json) -> Result<Value, TemplateFailure> {
    Ok(match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // Go prints these with an exponent (`1e+21`); Rust would not.
            if f.abs() >= 1e21 || (f != 0.0 && f.abs() < 1e-4) || !f.is_finite() {
                return Err(TemplateFailure(format!(
                    "the input number {n} prints in exponent form in Go: fluxplan does not render it"
                )));
            }
            Value::Float(f)
        }
        Json::String(s) => Value::String(s.as_str().into()),
        Json::Array(items) => Value::List(items.iter().map(to_value).collect::<Result<Vec<_>, _>>()?.into()),
        Json::Object(map) => {
            let mut out: BTreeMap<Arc<str>, Value> = BTreeMap::new();
            for (key, value) in map {
                out.insert(key.as_str().into(), to_value(value)?);
            }
            Value::Map(Arc::new(out))
        }
    })
}

/// A template value as JSON (what `toJson` and `toYaml` encode): a `float64` holding an integer
/// encodes without a fraction, as Go's encoder writes it.
fn to_json(value: &Value) -> Result<Json, TemplateError> {
    Ok(match value {
        Value::Nil => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Uint(u) => Json::from(*u),
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => Json::from(*f as i64),
        Value::Float(f) => serde_json::Number::from_f64(*f).map(Json::Number).unwrap_or(Json::Null),
        Value::String(s) => Json::String(s.to_string()),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(map) => Json::Object(
            map.iter()
                .map(|(k, v)| Ok((k.to_string(), to_json(v)?)))
                .collect::<Result<serde_json::Map<String, Json>, TemplateError>>()?,
        ),
        Value::Function(_) => return Err(fail("cannot encode a function")),
    })
}

fn fail(message: impl Into<String>) -> TemplateError {
    TemplateError::Exec(message.into())
}

/// slim-sprig's `strval`: a string as is, anything else as `%v` prints it.
fn strval(value: &Value) -> String {
    match value {
        Value::String(s) => s.to_string(),
        other => other.to_string(),
    }
}

/// Go's `%q` of a string (`strconv.Quote`).
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An argument Go would pass to a parameter of type `string`.
fn string_arg(args: &[Value], i: usize, function: &str) -> Result<String, TemplateError> {
    match args.get(i) {
        Some(Value::String(s)) => Ok(s.to_string()),
        Some(other) => Err(fail(format!(
            "{function}: wrong type for argument {}: expected string, got {}",
            i + 1,
            other.type_name()
        ))),
        None => Err(fail(format!("{function}: missing argument {}", i + 1))),
    }
}

/// An argument Go would pass to a parameter of type `int`.
fn int_arg(args: &[Value], i: usize, function: &str) -> Result<i64, TemplateError> {
    match args.get(i) {
        Some(Value::Int(n)) => Ok(*n),
        Some(Value::Uint(n)) => i64::try_from(*n).map_err(|_| fail(format!("{function}: {n} overflows int"))),
        Some(other) => Err(fail(format!(
            "{function}: wrong type for argument {}: expected int, got {}",
            i + 1,
            other.type_name()
        ))),
        None => Err(fail(format!("{function}: missing argument {}", i + 1))),
    }
}

fn arity(args: &[Value], n: usize, function: &str) -> Result<(), TemplateError> {
    if args.len() == n {
        Ok(())
    } else {
        Err(fail(format!("{function}: wants {n} arguments, got {}", args.len())))
    }
}

/// slim-sprig's `toInt64` (through `cast`): numbers converted, strings parsed (0 when they do
/// not parse), booleans 1 or 0, anything else 0.
fn to_int64(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        Value::Uint(n) => *n as i64,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => s.trim().parse::<i64>().unwrap_or(0),
        _ => 0,
    }
}

/// slim-sprig's `empty`: the zero value of its type.
fn empty(value: &Value) -> bool {
    match value {
        Value::Nil => true,
        Value::Bool(b) => !b,
        Value::Int(n) => *n == 0,
        Value::Uint(n) => *n == 0,
        Value::Float(f) => *f == 0.0,
        Value::String(s) => s.is_empty(),
        Value::List(items) => items.is_empty(),
        Value::Map(map) => map.is_empty(),
        Value::Function(_) => false,
    }
}

fn list_of<'v>(value: &'v Value, function: &str) -> Result<&'v [Value], TemplateError> {
    match value {
        Value::List(items) => Ok(items),
        other => Err(fail(format!("{function}: expected a list, got {}", other.type_name()))),
    }
}

fn map_of<'v>(value: &'v Value, function: &str) -> Result<&'v BTreeMap<Arc<str>, Value>, TemplateError> {
    match value {
        Value::Map(map) => Ok(map),
        other => Err(fail(format!("{function}: expected a map, got {}", other.type_name()))),
    }
}

/// `toYaml` as the operator encodes: the value's JSON as YAML, keys sorted.
fn yaml_of(value: &Value) -> Result<String, TemplateError> {
    let json = to_json(value)?;
    serde_norway::to_string(&json).map_err(|e| fail(format!("toYaml: {e}")))
}

/// Go's `json.Marshal`: keys sorted, `<`, `>` and `&` escaped for HTML.
fn json_of(value: &Value) -> Result<String, TemplateError> {
    let text = serde_json::to_string(&to_json(value)?).map_err(|e| fail(format!("toJson: {e}")))?;
    Ok(text
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029"))
}

/// gosimple/slug's `Make` as the operator configures it (63 characters, smart truncation), for
/// ASCII text; other text goes through a transliteration table fluxplan does not have.
fn slugify(text: &str) -> Result<String, TemplateError> {
    if !text.is_ascii() {
        return Err(fail(format!(
            "slugify of non-ASCII text ({text:?}) transliterates it: fluxplan does not render that"
        )));
    }
    let substituted = text.trim().replace('&', "and").replace('@', "at").to_lowercase();
    let mut slug = String::with_capacity(substituted.len());
    for c in substituted.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' };
        if !(c == '-' && slug.ends_with('-')) {
            slug.push(c);
        }
    }
    let slug = slug.trim_matches(|c| c == '-' || c == '_');
    if slug.len() <= SLUG_MAX_LENGTH {
        return Ok(slug.to_string());
    }
    let bytes = slug.as_bytes();
    let cut = (0..=SLUG_MAX_LENGTH).rev().find(|&i| bytes[i] == b'-').unwrap_or(SLUG_MAX_LENGTH);
    Ok(slug[..cut].to_string())
}

type Function = Arc<dyn Fn(&[Value]) -> gotmpl::Result<Value> + Send + Sync>;

static FUNCTIONS: LazyLock<gotmpl::FuncMap> = LazyLock::new(functions);

fn functions() -> gotmpl::FuncMap {
    let mut map: BTreeMap<String, Function> = BTreeMap::new();
    let mut add = |name: &str, f: Function| {
        map.insert(name.to_string(), f);
    };
    let string = |s: String| Ok(Value::String(s.into()));
    let unary_string = |name: &'static str, f: fn(&str) -> String| -> Function {
        Arc::new(move |args: &[Value]| {
            arity(args, 1, name)?;
            string(f(&string_arg(args, 0, name)?))
        })
    };
    let binary_string = |name: &'static str, f: fn(&str, &str) -> Value| -> Function {
        Arc::new(move |args: &[Value]| {
            arity(args, 2, name)?;
            Ok(f(&string_arg(args, 0, name)?, &string_arg(args, 1, name)?))
        })
    };
    add("trim", unary_string("trim", |s| s.trim().to_string()));
    add("upper", unary_string("upper", str::to_uppercase));
    add("lower", unary_string("lower", str::to_lowercase));
    add("trimSuffix", binary_string("trimSuffix", |a, b| b.strip_suffix(a).unwrap_or(b).into()));
    add("trimPrefix", binary_string("trimPrefix", |a, b| b.strip_prefix(a).unwrap_or(b).into()));
    add("trimAll", binary_string("trimAll", |a, b| b.trim_matches(|c| a.contains(c)).into()));
    add("contains", binary_string("contains", |a, b| Value::Bool(b.contains(a))));
    add("hasPrefix", binary_string("hasPrefix", |a, b| Value::Bool(b.starts_with(a))));
    add("hasSuffix", binary_string("hasSuffix", |a, b| Value::Bool(b.ends_with(a))));
    add(
        "splitList",
        binary_string("splitList", |sep, s| {
            Value::List(s.split(sep).map(|p| Value::String(p.into())).collect::<Vec<_>>().into())
        }),
    );
    add(
        "quote",
        Arc::new(|args| {
            let quoted: Vec<String> =
                args.iter().filter(|a| !matches!(a, Value::Nil)).map(|a| go_quote(&strval(a))).collect();
            Ok(Value::String(quoted.join(" ").into()))
        }),
    );
    add(
        "squote",
        Arc::new(|args| {
            let quoted: Vec<String> =
                args.iter().filter(|a| !matches!(a, Value::Nil)).map(|a| format!("'{a}'")).collect();
            Ok(Value::String(quoted.join(" ").into()))
        }),
    );
    add(
        "cat",
        Arc::new(|args| {
            let parts: Vec<String> =
                args.iter().filter(|a| !matches!(a, Value::Nil)).map(|a| a.to_string()).collect();
            Ok(Value::String(parts.join(" ").into()))
        }),
    );
    add(
        "replace",
        Arc::new(|args| {
            arity(args, 3, "replace")?;
            let (old, new, src) = (
                string_arg(args, 0, "replace")?,
                string_arg(args, 1, "replace")?,
                string_arg(args, 2, "replace")?,
            );
            // Go's strings.Replace with an empty `old` inserts between every rune: so does Rust's.
            Ok(Value::String(src.replace(&old, &new).into()))
        }),
    );
    let indent = |spaces: i64, text: &str| {
        let pad = " ".repeat(usize::try_from(spaces).unwrap_or(0));
        format!("{pad}{}", text.replace('\n', &format!("\n{pad}")))
    };
    add(
        "indent",
        Arc::new(move |args| {
            arity(args, 2, "indent")?;
            Ok(Value::String(indent(int_arg(args, 0, "indent")?, &string_arg(args, 1, "indent")?).into()))
        }),
    );
    add(
        "nindent",
        Arc::new(move |args| {
            arity(args, 2, "nindent")?;
            let text = indent(int_arg(args, 0, "nindent")?, &string_arg(args, 1, "nindent")?);
            Ok(Value::String(format!("\n{text}").into()))
        }),
    );
    add(
        "repeat",
        Arc::new(|args| {
            arity(args, 2, "repeat")?;
            let count = int_arg(args, 0, "repeat")?;
            let text = string_arg(args, 1, "repeat")?;
            let count = usize::try_from(count).map_err(|_| fail("repeat: negative count"))?;
            if count.saturating_mul(text.len()) > 1 << 20 {
                return Err(fail("repeat: over 1 MiB of text"));
            }
            Ok(Value::String(text.repeat(count).into()))
        }),
    );
    add(
        "trunc",
        Arc::new(|args| {
            arity(args, 2, "trunc")?;
            let (c, s) = (int_arg(args, 0, "trunc")?, string_arg(args, 1, "trunc")?);
            let len = s.len() as i64;
            let (start, end) = if c < 0 && len + c > 0 {
                ((len + c) as usize, s.len())
            } else if c >= 0 && len > c {
                (0, c as usize)
            } else {
                (0, s.len())
            };
            // Go slices bytes; a cut inside a character would print invalid UTF-8.
            s.get(start..end).map(|t| Value::String(t.into())).ok_or_else(|| {
                fail("trunc: the cut falls inside a multi-byte character: fluxplan does not render it")
            })
        }),
    );
    add(
        "toString",
        Arc::new(|args| {
            arity(args, 1, "toString")?;
            Ok(Value::String(strval(&args[0]).into()))
        }),
    );
    add(
        "join",
        Arc::new(|args| {
            arity(args, 2, "join")?;
            let sep = string_arg(args, 0, "join")?;
            let parts: Vec<String> = match &args[1] {
                Value::List(items) => items.iter().filter(|i| !matches!(i, Value::Nil)).map(strval).collect(),
                other => vec![strval(other)],
            };
            Ok(Value::String(parts.join(&sep).into()))
        }),
    );
    add(
        "default",
        Arc::new(|args| {
            let given = args.get(1).filter(|g| !empty(g));
            Ok(given.or(args.first()).cloned().unwrap_or(Value::Nil))
        }),
    );
    add(
        "empty",
        Arc::new(|args| {
            arity(args, 1, "empty")?;
            Ok(Value::Bool(empty(&args[0])))
        }),
    );
    add("coalesce", Arc::new(|args| Ok(args.iter().find(|a| !empty(a)).cloned().unwrap_or(Value::Nil))));
    add(
        "ternary",
        Arc::new(|args| {
            arity(args, 3, "ternary")?;
            match &args[2] {
                Value::Bool(b) => Ok(if *b { args[0].clone() } else { args[1].clone() }),
                other => Err(fail(format!("ternary: expected bool, got {}", other.type_name()))),
            }
        }),
    );
    add(
        "toJson",
        Arc::new(|args| {
            arity(args, 1, "toJson")?;
            Ok(Value::String(json_of(&args[0]).unwrap_or_default().into()))
        }),
    );
    add(
        "toYaml",
        Arc::new(|args| {
            arity(args, 1, "toYaml")?;
            Ok(Value::String(yaml_of(&args[0]).unwrap_or_default().into()))
        }),
    );
    add(
        "mustToYaml",
        Arc::new(|args| {
            arity(args, 1, "mustToYaml")?;
            Ok(Value::String(yaml_of(&args[0])?.into()))
        }),
    );
    add(
        "dict",
        Arc::new(|args| {
            let mut map: BTreeMap<Arc<str>, Value> = BTreeMap::new();
            for pair in args.chunks(2) {
                let value = pair.get(1).cloned().unwrap_or_else(|| Value::String("".into()));
                map.insert(strval(&pair[0]).into(), value);
            }
            Ok(Value::Map(Arc::new(map)))
        }),
    );
    add("list", Arc::new(|args| Ok(Value::List(args.to_vec().into()))));
    add(
        "get",
        Arc::new(|args| {
            arity(args, 2, "get")?;
            let key = string_arg(args, 1, "get")?;
            Ok(map_of(&args[0], "get")?
                .get(key.as_str())
                .cloned()
                .unwrap_or_else(|| Value::String("".into())))
        }),
    );
    add(
        "hasKey",
        Arc::new(|args| {
            arity(args, 2, "hasKey")?;
            let key = string_arg(args, 1, "hasKey")?;
            Ok(Value::Bool(map_of(&args[0], "hasKey")?.contains_key(key.as_str())))
        }),
    );
    add(
        "has",
        Arc::new(|args| {
            arity(args, 2, "has")?;
            match &args[1] {
                Value::Nil => Ok(Value::Bool(false)),
                list => Ok(Value::Bool(list_of(list, "has")?.contains(&args[0]))),
            }
        }),
    );
    add(
        "first",
        Arc::new(|args| {
            arity(args, 1, "first")?;
            Ok(list_of(&args[0], "first")?.first().cloned().unwrap_or(Value::Nil))
        }),
    );
    add(
        "last",
        Arc::new(|args| {
            arity(args, 1, "last")?;
            Ok(list_of(&args[0], "last")?.last().cloned().unwrap_or(Value::Nil))
        }),
    );
    add(
        "uniq",
        Arc::new(|args| {
            arity(args, 1, "uniq")?;
            let mut kept: Vec<Value> = Vec::new();
            for item in list_of(&args[0], "uniq")? {
                if !kept.contains(item) {
                    kept.push(item.clone());
                }
            }
            Ok(Value::List(kept.into()))
        }),
    );
    add(
        "compact",
        Arc::new(|args| {
            arity(args, 1, "compact")?;
            let kept: Vec<Value> =
                list_of(&args[0], "compact")?.iter().filter(|i| !empty(i)).cloned().collect();
            Ok(Value::List(kept.into()))
        }),
    );
    add(
        "sortAlpha",
        Arc::new(|args| {
            arity(args, 1, "sortAlpha")?;
            let mut items: Vec<String> = match &args[0] {
                Value::List(items) => items.iter().filter(|i| !matches!(i, Value::Nil)).map(strval).collect(),
                other => vec![strval(other)],
            };
            items.sort();
            Ok(Value::List(items.into_iter().map(|s| Value::String(s.into())).collect::<Vec<_>>().into()))
        }),
    );
    let int_of = |name: &'static str| -> Function {
        Arc::new(move |args: &[Value]| {
            arity(args, 1, name)?;
            Ok(Value::Int(to_int64(&args[0])))
        })
    };
    add("int", int_of("int"));
    add("int64", int_of("int64"));
    add(
        "atoi",
        Arc::new(|args| {
            arity(args, 1, "atoi")?;
            Ok(Value::Int(string_arg(args, 0, "atoi")?.parse::<i64>().unwrap_or(0)))
        }),
    );
    add("add", Arc::new(|args| Ok(Value::Int(args.iter().map(to_int64).fold(0i64, i64::wrapping_add)))));
    add(
        "add1",
        Arc::new(|args| {
            arity(args, 1, "add1")?;
            Ok(Value::Int(to_int64(&args[0]).wrapping_add(1)))
        }),
    );
    add("mul", Arc::new(|args| Ok(Value::Int(args.iter().map(to_int64).fold(1i64, i64::wrapping_mul)))));
    let binary_int = |name: &'static str, f: fn(i64, i64) -> Option<i64>| -> Function {
        Arc::new(move |args: &[Value]| {
            arity(args, 2, name)?;
            f(to_int64(&args[0]), to_int64(&args[1]))
                .map(Value::Int)
                .ok_or_else(|| fail(format!("{name}: integer divide by zero")))
        })
    };
    add("sub", binary_int("sub", |a, b| Some(a.wrapping_sub(b))));
    add("div", binary_int("div", i64::checked_div));
    add("mod", binary_int("mod", i64::checked_rem));
    add("max", Arc::new(|args| Ok(Value::Int(args.iter().map(to_int64).max().unwrap_or(0)))));
    add("min", Arc::new(|args| Ok(Value::Int(args.iter().map(to_int64).min().unwrap_or(0)))));
    add(
        "b64enc",
        Arc::new(|args| {
            use base64::Engine;
            arity(args, 1, "b64enc")?;
            Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(string_arg(args, 0, "b64enc")?).into(),
            ))
        }),
    );
    add(
        "b64dec",
        Arc::new(|args| {
            use base64::Engine;
            arity(args, 1, "b64dec")?;
            let decoded = base64::engine::general_purpose::STANDARD.decode(string_arg(args, 0, "b64dec")?);
            Ok(Value::String(match decoded {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned().into(),
                Err(e) => e.to_string().into(),
            }))
        }),
    );
    add(
        "sha256sum",
        Arc::new(|args| {
            use sha2::Digest;
            arity(args, 1, "sha256sum")?;
            Ok(Value::String(hex::encode(sha2::Sha256::digest(string_arg(args, 0, "sha256sum")?)).into()))
        }),
    );
    add(
        "regexMatch",
        Arc::new(|args| {
            arity(args, 2, "regexMatch")?;
            let re = regex::Regex::new(&string_arg(args, 0, "regexMatch")?);
            Ok(Value::Bool(
                re.is_ok_and(|re| re.is_match(&string_arg(args, 1, "regexMatch").unwrap_or_default())),
            ))
        }),
    );
    add(
        "regexReplaceAll",
        Arc::new(|args| {
            arity(args, 3, "regexReplaceAll")?;
            let re = regex::Regex::new(&string_arg(args, 0, "regexReplaceAll")?)
                .map_err(|e| fail(format!("regexReplaceAll: {e}")))?;
            let (text, replacement) =
                (string_arg(args, 1, "regexReplaceAll")?, string_arg(args, 2, "regexReplaceAll")?);
            Ok(Value::String(re.replace_all(&text, replacement.as_str()).into_owned().into()))
        }),
    );
    add(
        "fail",
        Arc::new(|args| {
            arity(args, 1, "fail")?;
            Err(fail(string_arg(args, 0, "fail")?))
        }),
    );
    add(
        "slugify",
        Arc::new(|args| {
            arity(args, 1, "slugify")?;
            Ok(Value::String(slugify(&string_arg(args, 0, "slugify")?)?.into()))
        }),
    );
    map.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(text: &str, inputs: Json) -> Result<String, TemplateFailure> {
        render(text, Some(&inputs), &Budget::new(1 << 20))
    }

    #[test]
    fn inputs_are_read_with_the_operators_delimiters() {
        let inputs = json!({"tenant": "frontend", "replicas": 3, "tags": ["a", "b"]});
        assert_eq!(run("name: << inputs.tenant >>", inputs.clone()).unwrap(), "name: frontend");
        assert_eq!(run("replicas: << inputs.replicas >>", inputs.clone()).unwrap(), "replicas: 3");
        assert_eq!(
            run("{{ kept }} << inputs.tenant | upper >>", inputs.clone()).unwrap(),
            "{{ kept }} FRONTEND"
        );
        assert_eq!(run("<< range inputs.tags >>- << . >>\n<< end >>", inputs.clone()).unwrap(), "- a\n- b\n");
        assert_eq!(run("<< inputs.tenant | quote >>", inputs).unwrap(), "\"frontend\"");
    }

    #[test]
    fn a_missing_key_fails_as_missingkey_error_does() {
        let error = run("<< inputs.nope >>", json!({"tenant": "a"})).unwrap_err();
        assert!(error.0.contains("nope"), "{error}");
    }

    #[test]
    fn a_function_fluxplan_does_not_render_fails_by_name_even_where_it_never_runs() {
        let error = run("<< if false >><< toDate \"2006\" \"x\" >><< end >>", json!({})).unwrap_err();
        assert!(
            error.0.contains("calls toDate, a function the Flux Operator has and fluxplan does not render"),
            "{error}"
        );
        let error = run("<< lookup \"v1\" >>", json!({})).unwrap_err();
        assert!(
            error.0.contains("calls lookup, which is not a function the Flux Operator defines"),
            "{error}"
        );
        assert!(run("<< now >>", json!({})).unwrap_err().0.contains("calls now"));
    }

    #[test]
    fn functions_behave_as_slim_sprig_writes_them() {
        let inputs = json!({"name": "Team Alpha & Co", "n": 4, "empty": "", "values": {"b": 1, "a": "<x>"}});
        let cases = [
            ("<< inputs.name | slugify >>", "team-alpha-and-co"),
            ("<< inputs.empty | default \"fallback\" >>", "fallback"),
            ("<< inputs.name | trunc 4 >>", "Team"),
            ("<< inputs.name | trunc -2 >>", "Co"),
            ("<< \"a\nb\" | nindent 2 >>", "\n  a\n  b"),
            ("<< \"a\nb\" | indent 2 >>", "  a\n  b"),
            ("<< inputs.values | toJson >>", "{\"a\":\"\\u003cx\\u003e\",\"b\":1}"),
            ("<< inputs.values | toYaml >>", "a: <x>\nb: 1\n"),
            ("<< add inputs.n 1 >>", "5"),
            ("<< inputs.n | int | add1 >>", "5"),
            ("<< list \"b\" \"a\" | sortAlpha | join \",\" >>", "a,b"),
            ("<< \"x-y\" | splitList \"-\" | last >>", "y"),
            ("<< dict \"k\" \"v\" | toJson >>", "{\"k\":\"v\"}"),
            ("<< ternary \"yes\" \"no\" true >>", "yes"),
            ("<< \"abc\" | sha256sum | trunc 8 >>", "ba7816bf"),
            ("<< \"abc\" | b64enc >>", "YWJj"),
            ("<< \"a\\tb\" | quote >>", "\"a\\tb\""),
            // The piped value is the last argument: the replacement.
            ("<< regexReplaceAll \"[.]\" \"v1.2\" \"-\" >>", "v1-2"),
            ("<< \"-\" | regexReplaceAll \"[.]\" \"v1.2\" >>", "v1-2"),
            ("<< squote \"x\" >>", "'x'"),
            ("<< hasKey inputs.values \"a\" >>", "true"),
        ];
        for (template, expected) in cases {
            assert_eq!(run(template, inputs.clone()).unwrap(), expected, "{template}");
        }
    }

    #[test]
    fn go_parameter_types_are_kept() {
        // Go refuses a float64 where `indent` wants an int.
        let error = run("<< \"a\" | indent inputs.n >>", json!({"n": 2})).unwrap_err();
        assert!(error.0.contains("expected int"), "{error}");
        assert!(run("<< fail \"no tenant\" >>", json!({})).unwrap_err().0.contains("no tenant"));
    }

    #[test]
    fn slugs_are_cut_after_a_whole_word_at_63() {
        let long = "word ".repeat(20);
        let slug = slugify(&long).unwrap();
        assert!(slug.len() <= 63 && slug.ends_with("word") && !slug.ends_with('-'), "{slug}");
        assert_eq!(slugify("  --Hello__World!!  ").unwrap(), "hello__world");
        assert!(slugify("café").is_err());
    }

    #[test]
    fn output_is_bounded_across_renders() {
        let budget = Budget::new(1 << 20);
        let big = "<< range $i, $x := list 1 2 3 4 5 6 7 8 >><< repeat 100000 \"x\" >><< end >>";
        assert_eq!(render(big, None, &budget).unwrap().len(), 800_000);
        let error = render(big, None, &budget).unwrap_err();
        assert!(error.0.contains("more than 1 MiB: over fluxplan's limit"), "{error}");
    }

    #[test]
    fn ranges_are_bounded() {
        let error = run("<< range $i, $x := until 1000000 >>x<< end >>", json!({})).unwrap_err();
        assert!(error.0.contains("until"), "{error}");
        let big: Vec<i64> = (0..200_000).collect();
        let error = run("<< range inputs.big >>.<< end >>", json!({"big": big})).unwrap_err();
        assert!(error.0.contains("execute"), "{error}");
    }
}
