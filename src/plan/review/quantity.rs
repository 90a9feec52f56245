//! Kubernetes quantities (`10Gi`, `500M`, `1.5Ti`), compared exactly. Only the common forms are
//! read: a plain or decimal number with one of the binary suffixes `Ki` … `Ei` or the decimal
//! ones `k` … `E`. Anything else (`100m`, `1e3`, a sign) is not guessed at: `None`.

use std::cmp::Ordering;

/// Digits after the decimal point a quantity may have: values are compared in units of 10⁻⁹.
const SCALE: u32 = 9;

/// The value of a quantity in units of 10⁻⁹, `None` when it is not a common form or too big.
fn parse(text: &str) -> Option<u128> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty()
        || !digits_ok(whole)
        || !digits_ok(fraction)
        || fraction.len() > SCALE as usize
        || whole.len() > 24
    {
        return None;
    }
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction_value: u128 = if fraction.is_empty() { 0 } else { fraction.parse().ok()? };
    let scaled_fraction = fraction_value.checked_mul(10u128.pow(SCALE - fraction.len() as u32))?;
    let units = whole.checked_mul(10u128.pow(SCALE))?.checked_add(scaled_fraction)?;
    units.checked_mul(multiplier)
}

/// How quantity `a` compares with `b`, `None` when either is not a form this module reads. A
/// number (YAML `storage: 1073741824`) reads as its digits.
pub fn compare(a: &serde_json::Value, b: &serde_json::Value) -> Option<Ordering> {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) if n.is_u64() => Some(n.to_string()),
        _ => None,
    };
    Some(parse(&text(a)?)?.cmp(&parse(&text(b)?)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_common_suffixes() {
        assert_eq!(parse("1Ki"), Some(1024 * 10u128.pow(SCALE)));
        assert_eq!(parse("1k"), Some(1000 * 10u128.pow(SCALE)));
        assert_eq!(parse("1.5Gi"), parse("1536Mi"));
        assert_eq!(parse("1G"), parse("1000M"));
        assert_eq!(parse("0.5"), Some(5 * 10u128.pow(SCALE - 1)));
        assert_eq!(parse("42"), Some(42 * 10u128.pow(SCALE)));
    }

    #[test]
    fn refuses_to_guess() {
        for text in ["100m", "1e3", "-1Gi", "+1Gi", "1 Gi", "Gi", "", ".", "1.2.3Gi", "1gi", "0.0000000001"] {
            assert_eq!(parse(text), None, "{text}");
        }
        assert_eq!(compare(&json!("10Gi"), &json!("5x")), None);
    }

    #[test]
    fn compares_across_suffixes() {
        assert_eq!(compare(&json!("10Gi"), &json!("5Gi")), Some(Ordering::Greater));
        assert_eq!(compare(&json!("1Gi"), &json!("1G")), Some(Ordering::Greater));
        assert_eq!(compare(&json!("1024Mi"), &json!("1Gi")), Some(Ordering::Equal));
        assert_eq!(compare(&json!(1073741824), &json!("1Gi")), Some(Ordering::Equal));
        assert_eq!(compare(&json!("500Mi"), &json!("1Gi")), Some(Ordering::Less));
        assert_eq!(compare(&json!("1000Ei"), &json!("1Ei")), Some(Ordering::Greater));
    }
}
