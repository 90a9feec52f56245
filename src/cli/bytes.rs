//! Byte counts on the command line and in the environment: `10MiB`, `512KiB`, `1GiB` (powers of
//! 1024; Kubernetes' `10Mi` too), `10MB`, `500kB` (powers of 1000), or a plain number of bytes.

use std::fmt;
use std::str::FromStr;

/// A number of bytes, read with or without a unit; shown with the largest binary unit that
/// divides it (`10MiB`), else as a plain number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub const fn kib(n: u64) -> Self {
        ByteSize(n * 1024)
    }

    pub const fn mib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024)
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    /// As a `usize`, saturating (a limit too large for this machine is no limit).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

const FORMS: &str = "expected a number of bytes (1048576) or one with a unit: 512KiB, 10MiB, 1GiB \
                     (powers of 1024; also Ki, Mi, Gi) or 500kB, 10MB, 1GB (powers of 1000)";

/// Units by their lower-case spelling.
const UNITS: &[(&str, u64)] = &[
    ("", 1),
    ("b", 1),
    ("k", 1_000),
    ("kb", 1_000),
    ("m", 1_000_000),
    ("mb", 1_000_000),
    ("g", 1_000_000_000),
    ("gb", 1_000_000_000),
    ("t", 1_000_000_000_000),
    ("tb", 1_000_000_000_000),
    ("ki", 1 << 10),
    ("kib", 1 << 10),
    ("mi", 1 << 20),
    ("mib", 1 << 20),
    ("gi", 1 << 30),
    ("gib", 1 << 30),
    ("ti", 1 << 40),
    ("tib", 1 << 40),
];

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let invalid = || format!("'{text}' is not a size: {FORMS}");
        let trimmed = text.trim();
        let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
        let (number, unit) = trimmed.split_at(split);
        let unit = unit.trim().to_ascii_lowercase();
        let (_, multiplier) = UNITS.iter().find(|(name, _)| *name == unit).ok_or_else(invalid)?;
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.len() > 9 || fraction.contains('.') {
            return Err(invalid());
        }
        let digits = |s: &str| if s.is_empty() { Ok(0) } else { s.parse::<u128>().map_err(|_| invalid()) };
        let (whole, fraction_value) = (digits(whole)?, digits(fraction)?);
        let scale = 10u128.pow(fraction.len() as u32);
        let bytes = whole
            .checked_mul(u128::from(*multiplier))
            .and_then(|b| b.checked_add(fraction_value * u128::from(*multiplier) / scale))
            .and_then(|b| u64::try_from(b).ok())
            .ok_or_else(|| format!("'{text}' is too large a size"))?;
        Ok(ByteSize(bytes))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, size) in [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{unit}", self.0 / size);
            }
        }
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<u64, String> {
        text.parse::<ByteSize>().map(ByteSize::bytes)
    }

    #[test]
    fn sizes_are_read_with_binary_and_decimal_units_or_none() {
        assert_eq!(parse("1048576"), Ok(1_048_576));
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("10MiB"), Ok(10 << 20));
        assert_eq!(parse("512KiB"), Ok(512 << 10));
        assert_eq!(parse("1GiB"), Ok(1 << 30));
        assert_eq!(parse("2TiB"), Ok(2 << 40));
        assert_eq!(parse("10Mi"), Ok(10 << 20));
        assert_eq!(parse("10MB"), Ok(10_000_000));
        assert_eq!(parse("500kB"), Ok(500_000));
        assert_eq!(parse("500KB"), Ok(500_000));
        assert_eq!(parse("1G"), Ok(1_000_000_000));
        assert_eq!(parse("10 mib"), Ok(10 << 20));
        assert_eq!(parse(" 64B "), Ok(64));
        assert_eq!(parse("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse(".5KiB"), Ok(512));
        assert_eq!(parse("16EiB").unwrap_err(), format!("'16EiB' is not a size: {FORMS}"));
        for bad in ["", "MiB", "-1", "1.2.3", "ten", "10 MiBs", "1e6", "0x10", "."] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains("512KiB, 10MiB, 1GiB") && error.contains("10MB"), "{bad}: {error}");
        }
        assert_eq!(parse("99999999999TiB").unwrap_err(), "'99999999999TiB' is too large a size");
        assert_eq!(parse("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn sizes_are_shown_in_the_largest_binary_unit_that_divides_them() {
        assert_eq!(ByteSize::mib(10).to_string(), "10MiB");
        assert_eq!(ByteSize(1 << 30).to_string(), "1GiB");
        assert_eq!(ByteSize::kib(256).to_string(), "256KiB");
        assert_eq!(ByteSize(1536).to_string(), "1536");
        assert_eq!(ByteSize(1_000_000).to_string(), "1000000");
        assert_eq!(ByteSize(0).to_string(), "0");
        // What is shown reads back as itself.
        for size in [ByteSize::mib(512), ByteSize(1536), ByteSize(0)] {
            assert_eq!(size.to_string().parse::<ByteSize>(), Ok(size));
        }
    }
}
