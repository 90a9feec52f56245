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
/// Range iterations one render may run (the operator has no bound; a pull request must).
const MAX_RANGE_ITERATIONS: u64 = 2_000;
/// How deep lists and maps built by a template may nest.
const MAX_DEPTH: usize = 32;
/// What every error of a spent budget says, so callers tell a limit from a refusal.
pub const OVER_LIMIT: &str = "over fluxplan's limit";
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
    "push",
    "mustPush",
    "must_date_modify",
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

thread_local! {
    /// Bytes the template functions may still build on this thread (see `with_allocation_budget`).
    static ALLOCATION: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// Runs `f` with at most `bytes` for the values template functions build (strings, lists, maps),
/// counted before each is built: doubling a string forty times fails, never allocates.
pub fn with_allocation_budget<T>(bytes: usize, f: impl FnOnce() -> T) -> T {
    let before = ALLOCATION.with(|a| a.replace(bytes));
    let result = f();
    ALLOCATION.with(|a| a.set(before));
    result
}

/// True when the functions' budget is spent.
pub fn allocation_spent() -> bool {
    ALLOCATION.with(|a| a.get() == 0)
}

/// Takes `bytes` from the functions' budget, or fails with a limit.
fn charge(bytes: usize, function: &str) -> Result<(), TemplateError> {
    ALLOCATION.with(|a| {
        if bytes > a.get() {
            a.set(0);
            Err(fail(format!("{function}: the templates build too much text: {OVER_LIMIT}")))
        } else {
            a.set(a.get() - bytes);
            Ok(())
        }
    })
}

/// The size of a value once printed or encoded, counted up to `cap` (shared parts of a list
/// built from itself count every time they print).
fn weight(value: &Value, cap: usize) -> usize {
    fn walk(value: &Value, cap: usize, total: &mut usize) {
        if *total > cap {
            return;
        }
        match value {
            Value::String(s) => *total += s.len() + 2,
            Value::List(items) => {
                *total += 2;
                for item in items.iter() {
                    walk(item, cap, total);
                }
            }
            Value::Map(map) => {
                *total += 2;
                for (key, item) in map.iter() {
                    *total += key.len() + 4;
                    walk(item, cap, total);
                }
            }
            _ => *total += 32,
        }
    }
    let mut total = 0;
    walk(value, cap, &mut total);
    total
}

/// How deep lists and maps nest, counted up to `MAX_DEPTH + 1`.
fn depth(value: &Value) -> usize {
    fn walk(value: &Value, level: usize) -> usize {
        if level > MAX_DEPTH {
            return level;
        }
        match value {
            Value::List(items) => items.iter().map(|i| walk(i, level + 1)).max().unwrap_or(level + 1),
            Value::Map(map) => map.values().map(|i| walk(i, level + 1)).max().unwrap_or(level + 1),
            _ => level,
        }
    }
    walk(value, 0)
}

/// Charges what building a list or map of `items` costs, refusing nesting deeper than Go's
/// printer and encoders should ever see from a template.
fn charge_composite<'v>(
    items: impl Iterator<Item = &'v Value> + Clone,
    function: &str,
) -> Result<(), TemplateError> {
    // Charged first: the depth walk below then costs no more than what was charged.
    let left = ALLOCATION.with(std::cell::Cell::get);
    let mut total = 0usize;
    for item in items.clone() {
        total = total.saturating_add(weight(item, left));
        if total > left {
            break;
        }
    }
    charge(total, function)?;
    if items.into_iter().any(|i| depth(i) >= MAX_DEPTH) {
        return Err(fail(format!(
            "{function}: lists and maps nest more than {MAX_DEPTH} deep: {OVER_LIMIT}"
        )));
    }
    Ok(())
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
    Prepared::parse(text)?.render(inputs, budget)
}

/// A template parsed and checked once, rendered for each input set.
pub struct Prepared {
    template: Template,
    /// What `inputs` returns during the render under way.
    inputs: Arc<std::sync::Mutex<Value>>,
}

impl Prepared {
    pub fn parse(text: &str) -> Result<Self, TemplateFailure> {
        let inputs = Arc::new(std::sync::Mutex::new(Value::Nil));
        let current = inputs.clone();
        let template = Template::new("resourceset")
            .delims(LEFT, RIGHT)
            .missing_key(MissingKey::Error)
            .max_range_iters(MAX_RANGE_ITERATIONS)
            .funcs(FUNCTIONS.clone())
            .func("inputs", move |_| Ok(current.lock().unwrap_or_else(|e| e.into_inner()).clone()))
            .parse(text)
            .map_err(|e| TemplateFailure(format!("cannot parse the template: {e}")))?;
        // Go's parser refuses a function it does not know wherever it is named, even in a branch
        // that never runs: so does this one.
        if let Some(name) = undefined_functions(&template).into_iter().next() {
            return Err(unknown_function(&name));
        }
        // Named templates call each other without printing: a few dozen make 2^60 calls.
        if template.templates().len() > 1
            || format!("{:?}", template.lookup("resourceset")).contains("Template(")
        {
            return Err(TemplateFailure(
                "the template defines or calls named templates (define, block, template): fluxplan does not \
                 render them"
                    .into(),
            ));
        }
        Ok(Prepared { template, inputs })
    }

    /// The template's text for one input set (`Value::Nil`: no inputs).
    pub fn render(&self, inputs: Value, budget: &Budget) -> Result<String, TemplateFailure> {
        *self.inputs.lock().unwrap_or_else(|e| e.into_inner()) = inputs;
        let mut out = Bounded { out: Vec::new(), budget };
        self.template.execute(&mut out, &Value::Nil).map_err(|e| match e {
            _ if budget.exhausted() => TemplateFailure(format!(
                "the templates print more than {} MiB: {OVER_LIMIT}",
                budget.limit() >> 20
            )),
            TemplateError::UndefinedFunction(name) => unknown_function(&name),
            other => TemplateFailure(format!("cannot execute the template: {other}")),
        })?;
        String::from_utf8(out.out)
            .map_err(|_| TemplateFailure("the template prints text that is not UTF-8".into()))
    }
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
    "and", "call", "html", "index", "js", "len", "not", "or", "print", "printf", "println", "urlquery", "eq",
    "ge", "gt", "le", "lt", "ne",
];

/// Inputs as Go holds them after `json.Unmarshal` into `any`: numbers are `float64`.
pub fn to_value(json: &Json) -> Result<Value, TemplateFailure> {
    Ok(match json {
        Json::Null => Value::Nil,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            // Go prints a float64 from 1e6 up (and below 1e-4) with an exponent (`1e+06`); Rust
            // would not.
            if f.abs() >= 1e6 || (f != 0.0 && f.abs() < 1e-4) || !f.is_finite() {
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

/// A string a function built, charged to the functions' budget.
fn built(text: String, function: &str) -> Result<Value, TemplateError> {
    charge(text.len(), function)?;
    Ok(Value::String(text.into()))
}

/// Go's `strings.ToUpper`/`ToLower`: each character mapped on its own (simple case mapping).
/// Where Unicode maps one character to several (`ß` → `SS`), Go keeps one: refused.
fn simple_case<I: Iterator<Item = char>>(
    text: &str,
    function: &str,
    map: fn(char) -> I,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let mut mapped = map(c);
        match (mapped.next(), mapped.next()) {
            (Some(one), None) => out.push(one),
            _ => {
                return Err(fail(format!(
                    "{function} of {c:?} differs between Go and Unicode's full mapping: fluxplan does not render it"
                )))
            }
        }
    }
    Ok(out)
}

/// A regular expression as Go's RE2 reads it. Go's `\d`, `\w`, `\s` and `\b` are ASCII only,
/// Rust's Unicode: on ASCII text both agree, on other text with those classes it is refused.
/// `None` when Go would not compile it either (slim-sprig's `regexMatch` then says false).
fn go_regex(pattern: &str, text: &str, function: &str) -> Result<Option<regex::Regex>, TemplateError> {
    let classes = ["\\d", "\\D", "\\w", "\\W", "\\s", "\\S", "\\b", "\\B"];
    if !text.is_ascii() && classes.iter().any(|c| pattern.contains(c)) {
        return Err(fail(format!(
            "{function}: \\d, \\w, \\s and \\b match ASCII only in Go: on non-ASCII text fluxplan does not render them"
        )));
    }
    Ok(regex::RegexBuilder::new(pattern).size_limit(1 << 20).build().ok())
}

/// Go's `%q` of a string (`strconv.Quote`).
fn go_quote(text: &str) -> Result<String, TemplateError> {
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
            c if c.is_ascii() => out.push(c),
            // Go escapes what unicode.IsPrint says is not printable; letters and numbers are.
            c if c.is_alphanumeric() => out.push(c),
            c => {
                return Err(fail(format!(
                    "quote of {c:?}: whether Go escapes it depends on Unicode tables fluxplan does not have"
                )))
            }
        }
    }
    out.push('"');
    Ok(out)
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
    let substituted =
        text.trim().replace(['"', '\''], "").replace('&', "and").replace('@', "at").to_lowercase();
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

/// One of Go's builtins, charged the most it can print first: every argument once per verb,
/// padded to the widest width the format names, escaped at most six times over.
fn bounded_builtin(name: &'static str) -> Function {
    Arc::new(move |args: &[Value]| {
        let (verbs, width) = match (name, args.first()) {
            ("printf", Some(Value::String(format))) => {
                let widest = format
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|digits| digits.parse::<usize>().ok())
                    .max()
                    .unwrap_or(0);
                (format.matches('%').count() + 1, widest)
            }
            _ => (1, 0),
        };
        let left = ALLOCATION.with(std::cell::Cell::get);
        let weight = args.iter().fold(0usize, |total, a| total.saturating_add(weight(a, left)));
        charge(
            weight.saturating_add(width).saturating_mul(verbs).saturating_mul(6).saturating_add(64),
            name,
        )?;
        // The builtin itself, through a template of its own that calls it.
        let fields: String = (0..args.len()).map(|i| format!(" .a{i}")).collect();
        let data: BTreeMap<Arc<str>, Value> =
            args.iter().enumerate().map(|(i, a)| (Arc::from(format!("a{i}")), a.clone())).collect();
        Template::new(name)
            .parse(&format!("{{{{{name}{fields}}}}}"))?
            .execute_to_string(&Value::Map(Arc::new(data)))
            .map(|text| Value::String(text.into()))
    })
}

static FUNCTIONS: LazyLock<gotmpl::FuncMap> = LazyLock::new(functions);

fn functions() -> gotmpl::FuncMap {
    let mut map: BTreeMap<String, Function> = BTreeMap::new();
    let mut add = |name: &str, f: Function| {
        map.insert(name.to_string(), f);
    };
    let unary_string = |name: &'static str, f: fn(&str) -> Result<String, TemplateError>| -> Function {
        Arc::new(move |args: &[Value]| {
            arity(args, 1, name)?;
            built(f(&string_arg(args, 0, name)?)?, name)
        })
    };
    let binary_string = |name: &'static str, f: fn(&str, &str) -> Value| -> Function {
        Arc::new(move |args: &[Value]| {
            arity(args, 2, name)?;
            Ok(f(&string_arg(args, 0, name)?, &string_arg(args, 1, name)?))
        })
    };
    add("trim", unary_string("trim", |s| Ok(s.trim().to_string())));
    add("upper", unary_string("upper", |s| simple_case(s, "upper", char::to_uppercase)));
    add("lower", unary_string("lower", |s| simple_case(s, "lower", char::to_lowercase)));
    add("trimSuffix", binary_string("trimSuffix", |a, b| b.strip_suffix(a).unwrap_or(b).into()));
    add("trimPrefix", binary_string("trimPrefix", |a, b| b.strip_prefix(a).unwrap_or(b).into()));
    add("trimAll", binary_string("trimAll", |a, b| b.trim_matches(|c| a.contains(c)).into()));
    add("contains", binary_string("contains", |a, b| Value::Bool(b.contains(a))));
    add("hasPrefix", binary_string("hasPrefix", |a, b| Value::Bool(b.starts_with(a))));
    add("hasSuffix", binary_string("hasSuffix", |a, b| Value::Bool(b.ends_with(a))));
    add(
        "splitList",
        binary_string("splitList", |sep, s| {
            // Go's strings.Split with an empty separator splits into characters.
            let parts: Vec<Value> = if sep.is_empty() {
                s.chars().map(|c| Value::String(c.to_string().into())).collect()
            } else {
                s.split(sep).map(|p| Value::String(p.into())).collect()
            };
            Value::List(parts.into())
        }),
    );
    add(
        "quote",
        Arc::new(|args| {
            charge_composite(args.iter(), "quote")?;
            let quoted: Vec<String> = args
                .iter()
                .filter(|a| !matches!(a, Value::Nil))
                .map(|a| go_quote(&strval(a)))
                .collect::<Result<_, _>>()?;
            built(quoted.join(" "), "quote")
        }),
    );
    add(
        "squote",
        Arc::new(|args| {
            charge_composite(args.iter(), "squote")?;
            let quoted: Vec<String> =
                args.iter().filter(|a| !matches!(a, Value::Nil)).map(|a| format!("'{a}'")).collect();
            Ok(Value::String(quoted.join(" ").into()))
        }),
    );
    add(
        "cat",
        Arc::new(|args| {
            charge_composite(args.iter(), "cat")?;
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
            // At most one replacement per character and one more (an empty `old` inserts between
            // every rune, in Go as in Rust).
            charge(src.len().saturating_add((src.chars().count() + 1).saturating_mul(new.len())), "replace")?;
            Ok(Value::String(src.replace(&old, &new).into()))
        }),
    );
    let indent = |spaces: i64, text: &str| -> Result<String, TemplateError> {
        // Go's strings.Repeat panics on a negative count: the template fails.
        let spaces = usize::try_from(spaces).map_err(|_| fail("indent: negative Repeat count"))?;
        let lines = text.matches('\n').count() + 1;
        charge(text.len().saturating_add(lines.saturating_mul(spaces)), "indent")?;
        let pad = " ".repeat(spaces);
        Ok(format!("{pad}{}", text.replace('\n', &format!("\n{pad}"))))
    };
    add(
        "indent",
        Arc::new(move |args| {
            arity(args, 2, "indent")?;
            Ok(Value::String(indent(int_arg(args, 0, "indent")?, &string_arg(args, 1, "indent")?)?.into()))
        }),
    );
    add(
        "nindent",
        Arc::new(move |args| {
            arity(args, 2, "nindent")?;
            let text = indent(int_arg(args, 0, "nindent")?, &string_arg(args, 1, "nindent")?)?;
            Ok(Value::String(format!("\n{text}").into()))
        }),
    );
    add(
        "repeat",
        Arc::new(|args| {
            arity(args, 2, "repeat")?;
            let count = int_arg(args, 0, "repeat")?;
            let text = string_arg(args, 1, "repeat")?;
            let count = usize::try_from(count).map_err(|_| fail("repeat: negative Repeat count"))?;
            charge(count.saturating_mul(text.len()), "repeat")?;
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
            charge_composite(args.iter(), "toString")?;
            Ok(Value::String(strval(&args[0]).into()))
        }),
    );
    add(
        "join",
        Arc::new(|args| {
            arity(args, 2, "join")?;
            let sep = string_arg(args, 0, "join")?;
            let parts: Vec<String> = match &args[1] {
                Value::List(items) => {
                    charge_composite(items.iter(), "join")?;
                    charge(items.len().saturating_mul(sep.len()), "join")?;
                    items.iter().filter(|i| !matches!(i, Value::Nil)).map(strval).collect()
                }
                // slim-sprig's strslice: nothing for nil.
                Value::Nil => Vec::new(),
                other => {
                    charge_composite(std::iter::once(other), "join")?;
                    vec![strval(other)]
                }
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
            charge_composite(args.iter(), "toJson")?;
            Ok(Value::String(json_of(&args[0]).unwrap_or_default().into()))
        }),
    );
    add(
        "toYaml",
        Arc::new(|args| {
            arity(args, 1, "toYaml")?;
            charge_composite(args.iter(), "toYaml")?;
            Ok(Value::String(yaml_of(&args[0]).unwrap_or_default().into()))
        }),
    );
    add(
        "mustToYaml",
        Arc::new(|args| {
            arity(args, 1, "mustToYaml")?;
            charge_composite(args.iter(), "mustToYaml")?;
            Ok(Value::String(yaml_of(&args[0])?.into()))
        }),
    );
    add(
        "dict",
        Arc::new(|args| {
            charge_composite(args.iter(), "dict")?;
            let mut map: BTreeMap<Arc<str>, Value> = BTreeMap::new();
            for pair in args.chunks(2) {
                let value = pair.get(1).cloned().unwrap_or_else(|| Value::String("".into()));
                map.insert(strval(&pair[0]).into(), value);
            }
            Ok(Value::Map(Arc::new(map)))
        }),
    );
    add(
        "list",
        Arc::new(|args| {
            charge_composite(args.iter(), "list")?;
            Ok(Value::List(args.to_vec().into()))
        }),
    );
    add(
        "get",
        Arc::new(|args| {
            arity(args, 2, "get")?;
            let key = string_arg(args, 1, "get")?;
            // Go passes nil as an empty map.
            if matches!(args[0], Value::Nil) {
                return Ok(Value::String("".into()));
            }
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
            if matches!(args[0], Value::Nil) {
                return Ok(Value::Bool(false));
            }
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
            let items = list_of(&args[0], "uniq")?;
            // Pairwise, as slim-sprig compares: quadratic, so charged as such.
            charge(items.len().saturating_mul(items.len()) / 64, "uniq")?;
            let mut kept: Vec<Value> = Vec::new();
            for item in items {
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
    // Go's integer division wraps (MIN / -1 is MIN) and fails only on zero.
    add("div", binary_int("div", |a, b| (b != 0).then(|| a.wrapping_div(b))));
    add("mod", binary_int("mod", |a, b| (b != 0).then(|| a.wrapping_rem(b))));
    // Both take one argument at least, as Go's signatures do.
    add(
        "max",
        Arc::new(|args| {
            args.iter()
                .map(to_int64)
                .max()
                .map(Value::Int)
                .ok_or_else(|| fail("max: wants 1 argument at least"))
        }),
    );
    add(
        "min",
        Arc::new(|args| {
            args.iter()
                .map(to_int64)
                .min()
                .map(Value::Int)
                .ok_or_else(|| fail("min: wants 1 argument at least"))
        }),
    );
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
            // Go's decoder skips line breaks and accepts trailing bits.
            let text: String =
                string_arg(args, 0, "b64dec")?.chars().filter(|c| *c != '\r' && *c != '\n').collect();
            let engine = base64::engine::GeneralPurpose::new(
                &base64::alphabet::STANDARD,
                base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
            );
            let decoded = engine.decode(text);
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
            let text = string_arg(args, 1, "regexMatch")?;
            let re = go_regex(&string_arg(args, 0, "regexMatch")?, &text, "regexMatch");
            Ok(Value::Bool(re?.is_some_and(|re| re.is_match(&text))))
        }),
    );
    add(
        "regexReplaceAll",
        Arc::new(|args| {
            arity(args, 3, "regexReplaceAll")?;
            let (text, replacement) =
                (string_arg(args, 1, "regexReplaceAll")?, string_arg(args, 2, "regexReplaceAll")?);
            let re = go_regex(&string_arg(args, 0, "regexReplaceAll")?, &text, "regexReplaceAll")?
                .ok_or_else(|| fail("regexReplaceAll: error parsing regexp"))?;
            // At most one match per character and one more, each replaced in full.
            charge(
                text.len().saturating_add((text.chars().count() + 1).saturating_mul(replacement.len())),
                "regexReplaceAll",
            )?;
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
    // Go's own printers and escapers, bounded like the rest: a string printed into itself forty
    // times fails before it is built.
    for name in ["print", "printf", "println", "html", "js", "urlquery"] {
        add(name, bounded_builtin(name));
    }
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
    fn hostile_templates_hit_a_limit_before_they_allocate() {
        let run_budget = |text: &str| with_allocation_budget(1 << 20, || run(text, json!({})));
        // A string doubled forty times, a list built from itself, a huge indent.
        let doubling = format!("<< $s := \"xxxxxxxx\" >>{}<< $s | len >>", "<< $s = cat $s $s >>".repeat(40));
        let lists =
            format!("<< $l := list 1 >>{}<< $l | toJson | len >>", "<< $l = list $l $l >>".repeat(40));
        for hostile in [
            doubling.as_str(),
            lists.as_str(),
            "<< indent 9223372036854775807 \"x\" >>",
            "<< repeat 100000000 \"x\" >>",
        ] {
            let error = run_budget(hostile).unwrap_err();
            assert!(error.0.contains(OVER_LIMIT), "{hostile}: {error}");
        }
        let printed = format!(
            "<< $s := \"xxxxxxxx\" >>{}<< $s | len >>",
            "<< $s = printf \"%s%s\" $s $s >>".repeat(40)
        );
        assert!(run_budget(&printed).unwrap_err().0.contains(OVER_LIMIT));
        assert_eq!(
            run("<< printf \"%s-%d\" \"a\" 7 >><< print 1 2 >><< \"<b>\" | html >>", json!({})).unwrap(),
            "a-71 2&lt;b&gt;"
        );
        let nesting = format!("<< $l := list 1 >>{}ok", "<< $l = list $l >>".repeat(40));
        assert!(run_budget(&nesting).unwrap_err().0.contains("nest more than 32 deep"));
        let error = run("<< define \"a\" >>x<< end >><< template \"a\" >>", json!({})).unwrap_err();
        assert!(error.0.contains("named templates"), "{error}");
    }

    #[test]
    fn go_semantics_that_rust_would_change_are_kept_or_refused() {
        let ok = |text: &str, expected: &str| {
            assert_eq!(run(text, json!({})).map_err(|e| e.0), Ok(expected.to_string()), "{text}")
        };
        let refused = |text: &str, why: &str| {
            let error = run(text, json!({"m": 7})).unwrap_err();
            assert!(error.0.contains(why), "{text}: {error}");
        };
        ok("<< \"abc\" | splitList \"\" | len >>", "3");
        ok("<< \"Bob's \\\"app\\\"\" | slugify >>", "bobs-app");
        ok("<< \"YWJj\nZGVm\" | b64dec >>", "abcdef");
        ok("<< div (sub -9223372036854775807 1) -1 >>", "-9223372036854775808");
        ok("<< join \",\" nil >>", "");
        ok("<< get nil \"k\" >><< hasKey nil \"k\" >>", "false");
        ok("<< regexMatch \"^\\\\w+$\" \"abc\" >>", "true");
        refused("<< \"straße\" | upper >>", "fluxplan does not render it");
        refused("<< regexMatch \"^\\\\w+$\" \"é\" >>", "ASCII only");
        refused("<< \"a\u{a0}b\" | quote >>", "Unicode tables");
        refused("<< indent -1 \"x\" >>", "negative");
        refused("<< max >>", "wants 1 argument");
        refused("<< slice \"abc\" 1 >>", "calls slice");
        assert!(run("<< inputs.n >>", json!({"n": 1_000_000})).unwrap_err().0.contains("exponent"));
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
