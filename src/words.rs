//! Counts as people read them: "1 object", "4 objects", never "4 object(s)".

/// `n` and the noun that agrees with it: `count(1, "object", "objects")` is "1 object".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", agree(n, one, many))
}

/// The word that agrees with `n` things, without the number: `agree(1, "a hook", "hooks")`.
pub fn agree<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "object", "objects"), "1 object");
        assert_eq!(count(0, "object", "objects"), "0 objects");
        assert_eq!(count(4, "stale entry", "stale entries"), "4 stale entries");
        assert_eq!(agree(1, "a hook", "hooks"), "a hook");
        assert_eq!(agree(2, "a hook", "hooks"), "hooks");
    }
}
