//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`, `1E`), read exactly into whole units
//! of a chosen scale: millicores for CPU, bytes for memory and storage.
//!
//! The grammar and rules are apimachinery's `resource.Quantity`
//! (kubernetes/kubernetes `staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go`):
//! `<sign><digits>[.<digits>]<suffix>`, the suffix one of the binary `Ki Mi Gi Ti Pi Ei`, the
//! decimal `m "" k M G T P E`, or an exponent `e<int>`/`E<int>`. A value is rounded *up* to the
//! scale asked for (as `MilliValue`/`Value` do), and no quantity exceeds 2^63-1 of it: larger
//! ones are capped, as Kubernetes caps them. Nothing here panics or allocates by the input's
//! exponent: `1e999999999` is capped, not computed.

/// The largest value Kubernetes represents (`math.MaxInt64`).
pub const MAX: u64 = i64::MAX as u64;

/// How a quantity was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Exactly (rounded up to the scale).
    Exact(u64),
    /// Larger than Kubernetes represents: capped at [`MAX`].
    Capped,
}

impl Read {
    pub fn value(self) -> u64 {
        match self {
            Read::Exact(v) => v,
            Read::Capped => MAX,
        }
    }
}

/// Why a quantity cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("'{0}' is not a Kubernetes quantity (digits, an optional fraction, then Ki/Mi/Gi/Ti/Pi/Ei, m/k/M/G/T/P/E or e<exponent>)")]
    Malformed(String),
    #[error("'{0}' is negative: requests, limits and storage cannot be")]
    Negative(String),
}

/// Longest quantity read: a longer one is hostile, not a size.
const MAX_LEN: usize = 64;
/// Significant digits kept; the rest round the value up (u128 holds 10^20 · 2^60).
const MAX_DIGITS: usize = 20;

/// Reads `text` in units of 10^-`scale` (`scale` 3: millicores; 0: bytes).
pub fn parse(text: &str, scale: u32) -> Result<Read, QuantityError> {
    let malformed = || QuantityError::Malformed(shorten(text));
    let text = text.trim();
    if text.is_empty() || text.len() > MAX_LEN || !text.is_ascii() {
        return Err(malformed());
    }
    let (negative, unsigned) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = unsigned.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
        return Err(malformed());
    }
    // value = digits · 10^exp10 · 2^exp2
    let (mut exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        exponent => {
            let digits = exponent.strip_prefix(['e', 'E']).ok_or_else(malformed)?;
            let (sign, digits) = match digits.as_bytes().first() {
                Some(b'-') => (-1, &digits[1..]),
                Some(b'+') => (1, &digits[1..]),
                _ => (1, digits),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed());
            }
            // apimachinery reads the exponent as an int32: a longer one is malformed there too.
            let exponent: i32 = digits.parse().map_err(|_| malformed())?;
            (sign * i64::from(exponent), 0)
        }
    };
    let mut digits: String = format!("{whole}{fraction}").trim_start_matches('0').to_string();
    exp10 -= fraction.len() as i64;
    exp10 += i64::from(scale);
    while digits.ends_with('0') {
        digits.pop();
        exp10 += 1;
    }
    if digits.is_empty() {
        return Ok(Read::Exact(0));
    }
    if negative {
        return Err(QuantityError::Negative(shorten(text)));
    }
    // Keep MAX_DIGITS significant digits, rounding the dropped ones up.
    let mut round_up = false;
    if digits.len() > MAX_DIGITS {
        round_up = digits[MAX_DIGITS..].bytes().any(|b| b != b'0');
        exp10 += (digits.len() - MAX_DIGITS) as i64;
        digits.truncate(MAX_DIGITS);
    }
    let mantissa: u128 = digits.parse::<u128>().map_err(|_| malformed())? + u128::from(round_up);
    let scaled = mantissa << exp2; // < 10^20 · 2^60 < 2^127
    let value = if exp10 >= 0 {
        match u32::try_from(exp10)
            .ok()
            .and_then(|e| 10u128.checked_pow(e))
            .and_then(|p| scaled.checked_mul(p))
        {
            Some(v) => v,
            None => return Ok(Read::Capped),
        }
    } else {
        match u32::try_from(-exp10).ok().and_then(|e| 10u128.checked_pow(e)) {
            Some(divisor) => scaled.div_ceil(divisor),
            // Smaller than one unit: rounds up to one.
            None => 1,
        }
    };
    Ok(if value > u128::from(MAX) { Read::Capped } else { Read::Exact(value as u64) })
}

/// A hostile quantity is quoted only so far.
fn shorten(text: &str) -> String {
    let mut cut: String = text.chars().take(24).collect();
    if text.chars().count() > 24 {
        cut.push('…');
    }
    cut
}

/// Millicores as people read them: `250m`, `2`, `1.5`.
pub fn format_cpu(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        format!("{}", millis / 1000)
    } else if millis < 1000 {
        format!("{millis}m")
    } else {
        let text = format!("{}.{:03}", millis / 1000, millis % 1000);
        text.trim_end_matches('0').to_string()
    }
}

/// Bytes in the largest binary unit that keeps them exact with at most one decimal (`1.5Gi`,
/// `1152Mi`); when that takes more than five digits, the largest unit to two decimals, rounded
/// (`10.09Gi`): the JSON keeps the exact bytes.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let mut exact = bytes.to_string();
    let mut largest = None;
    for (i, unit) in UNITS.iter().enumerate() {
        let size = 1u128 << (10 * (i + 1));
        if u128::from(bytes) < size {
            break;
        }
        largest = Some((size, *unit));
        let tenths = u128::from(bytes) * 10 / size;
        if tenths * size == u128::from(bytes) * 10 {
            exact = if tenths.is_multiple_of(10) {
                format!("{}{unit}", tenths / 10)
            } else {
                format!("{}.{}{unit}", tenths / 10, tenths % 10)
            };
        }
    }
    let digits = exact.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
    match largest {
        Some((size, unit)) if digits > 5 => {
            let hundredths = (u128::from(bytes) * 100 + size / 2) / size;
            let text = format!("{}.{:02}", hundredths / 100, hundredths % 100);
            format!("{}{unit}", text.trim_end_matches('0').trim_end_matches('.'))
        }
        _ => exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(text: &str) -> u64 {
        parse(text, 3).unwrap().value()
    }

    fn bytes(text: &str) -> u64 {
        parse(text, 0).unwrap().value()
    }

    #[test]
    fn every_suffix_reads() {
        assert_eq!(milli("250m"), 250);
        assert_eq!(milli("2"), 2000);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("5."), 5000);
        assert_eq!(milli("+1"), 1000);
        assert_eq!(bytes("1k"), 1_000);
        assert_eq!(bytes("1M"), 1_000_000);
        assert_eq!(bytes("1G"), 1_000_000_000);
        assert_eq!(bytes("1T"), 1_000_000_000_000);
        assert_eq!(bytes("1P"), 1_000_000_000_000_000);
        assert_eq!(bytes("1E"), 1_000_000_000_000_000_000);
        assert_eq!(bytes("1Ki"), 1 << 10);
        assert_eq!(bytes("1Mi"), 1 << 20);
        assert_eq!(bytes("1Gi"), 1 << 30);
        assert_eq!(bytes("1Ti"), 1 << 40);
        assert_eq!(bytes("1Pi"), 1 << 50);
        assert_eq!(bytes("1Ei"), 1 << 60);
        assert_eq!(bytes("1.5Gi"), 3 << 29);
        assert_eq!(bytes("2e3"), 2000);
        assert_eq!(bytes("2E3"), 2000);
        assert_eq!(bytes("2e+3"), 2000);
        assert_eq!(milli("5e-1"), 500);
        assert_eq!(bytes("0"), 0);
        assert_eq!(bytes("0.000Gi"), 0);
    }

    #[test]
    fn fractions_round_up_to_the_scale() {
        // MilliValue and Value round up.
        assert_eq!(milli("0.0001"), 1);
        assert_eq!(milli("1.0001"), 1001);
        assert_eq!(bytes("1m"), 1, "a milli-byte is still a byte");
        assert_eq!(bytes("0.1Ki"), 103, "102.4 bytes round up");
        assert_eq!(bytes("1e-30"), 1);
        assert_eq!(bytes("1.00000000000000000000000000000000001"), 2, "digits past 20 round up");
        assert_eq!(bytes("1.00000000000000000000000000000000000"), 1, "trailing zeros are exact");
    }

    #[test]
    fn hostile_quantities_are_capped_or_refused_without_panicking() {
        assert_eq!(parse("1e999999999", 0), Ok(Read::Capped));
        assert_eq!(parse("1e-999999999", 0), Ok(Read::Exact(1)));
        assert_eq!(parse("9223372036854775807", 0), Ok(Read::Exact(MAX)));
        assert_eq!(parse("9223372036854775808", 0), Ok(Read::Capped));
        assert_eq!(parse("9223372036854775807", 3), Ok(Read::Capped), "in millicores it is too large");
        assert_eq!(parse("99999999999999999999Ei", 0), Ok(Read::Capped));
        assert_eq!(parse("8Ei", 0), Ok(Read::Capped));
        assert_eq!(parse("0e999999999", 0), Ok(Read::Exact(0)));
        for bad in [
            "",
            "m",
            "1.2.3",
            "1x",
            "1 Gi",
            "1gi",
            "1e",
            "1e+",
            "1e1.5",
            "1e99999999999",
            "--1",
            "0x10",
            "١",
            "NaN",
            "inf",
            ".",
            "e3",
            &"9".repeat(65),
        ] {
            assert!(matches!(parse(bad, 0), Err(QuantityError::Malformed(_))), "{bad:?} must not read");
        }
        assert!(matches!(parse("-1", 3), Err(QuantityError::Negative(_))));
        assert_eq!(parse("-0", 3), Ok(Read::Exact(0)));
        let long = parse(&"9".repeat(65), 0).unwrap_err().to_string();
        assert!(long.contains('…') && long.len() < 200, "{long}");
    }

    #[test]
    fn formatting_reads_back() {
        assert_eq!(format_cpu(250), "250m");
        assert_eq!(format_cpu(2000), "2");
        assert_eq!(format_cpu(1500), "1.5");
        assert_eq!(format_cpu(1250), "1.25");
        assert_eq!(format_bytes(512 << 20), "512Mi");
        assert_eq!(format_bytes(3 << 29), "1.5Gi");
        assert_eq!(format_bytes(1000), "1000");
        assert_eq!(format_bytes(1152 << 20), "1152Mi");
        assert_eq!(format_bytes(10_831_838_208), "10.09Gi", "not 10577967Ki");
        assert_eq!(format_bytes(5_000_000_000), "4.66Gi");
        assert_eq!(format_bytes(1 << 40), "1Ti");
        assert_eq!(format_bytes(MAX), format_bytes(MAX), "no overflow at the cap");
    }
}
