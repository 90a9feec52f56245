//! Names substituted from Secrets: objects keep their real inventory ids (what the cluster
//! holds) for matching, and every text shown carries the masked names instead (`(masked:NAME)`
//! in place of the value), ids included. [`Masks`] turns one into the other.

use super::Render;
use std::collections::BTreeMap;

/// Real names, namespaces and ids that hold a value substituted from a Secret, with their masked
/// forms.
#[derive(Debug, Clone, Default)]
pub struct Masks {
    /// (real, shown), longest real first: a real name that contains another is replaced whole.
    pairs: Vec<(String, String)>,
}

impl Masks {
    /// The masks for every object of `renders`.
    pub fn of(renders: &[&Render]) -> Self {
        Masks { pairs: replacements(renders) }
    }

    /// Masks from (real, shown) pairs, for tests.
    #[cfg(test)]
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let mut pairs: Vec<(String, String)> =
            pairs.iter().map(|(r, s)| (r.to_string(), s.to_string())).collect();
        pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        Masks { pairs }
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `text` with each whole-word occurrence of a real name replaced by its masked form.
    pub fn apply(&self, text: &str) -> String {
        mask_text(text, &self.pairs)
    }
}

/// Real name or namespace → the shown (masked) one, for every object of `renders` whose identity
/// holds a value substituted from a Secret.
fn replacements(renders: &[&Render]) -> Vec<(String, String)> {
    let mut pairs = BTreeMap::new();
    // A release's hooks are named in plans too.
    let objects = renders.iter().flat_map(|r| r.kustomizations()).flat_map(|(_, k)| {
        k.objects.iter().chain(k.helm.iter().flat_map(|h| h.hook_objects.iter().map(|hook| &hook.object)))
    });
    for object in objects {
        let (Some(real), Some(shown)) = (&object.id, &object.shown_id) else { continue };
        if real == shown {
            continue;
        }
        // Whole ids first (their encoding of `:` differs from the names'), then the names and
        // namespaces that displays and messages carry.
        pairs.insert(real.to_string(), shown.to_string());
        for (real, shown) in [(&real.name, &shown.name), (&real.namespace, &shown.namespace)] {
            if real != shown && !real.is_empty() {
                pairs.insert(real.clone(), shown.clone());
            }
        }
    }
    // Paths substituted from Secrets too: kustomize and the controller's messages quote them,
    // as written (`./apps/x`) or relative (`apps/x`).
    for (_, k) in renders.iter().flat_map(|r| r.kustomizations()) {
        let Some(real) = k.spec.as_ref().map(|spec| spec.path.as_str()).filter(|real| *real != k.path) else {
            continue;
        };
        pairs.insert(real.to_string(), k.path.clone());
        let relative = |path: &str| path.trim_start_matches("./").trim_matches('/').to_string();
        if !relative(real).is_empty() {
            pairs.insert(relative(real), relative(&k.path));
        }
    }
    // Longest first: a real name that contains another is replaced whole.
    let mut pairs: Vec<(String, String)> = pairs.into_iter().collect();
    pairs.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
    pairs
}

/// A character that continues a word: a match next to one is part of another name. (A `.` does
/// not: masking `app-x` in `app-x.example` hides more than needed, never less.)
fn continues_name(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-'
}

/// `text` with each whole-word occurrence of a real name replaced by its masked form. Ids
/// (`ns_name_group_kind`), displays (`Kind/ns/name`) and messages all delimit names this way.
fn mask_text(text: &str, pairs: &[(String, String)]) -> String {
    let mut text = text.to_string();
    for (real, shown) in pairs {
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        let mut before: Option<char> = None;
        while let Some(at) = rest.find(real.as_str()) {
            let prior = rest[..at].chars().next_back().or(before);
            let after = rest[at + real.len()..].chars().next();
            let whole = !prior.is_some_and(continues_name) && !after.is_some_and(continues_name);
            let end = if whole {
                at + real.len()
            } else {
                at + rest[at..].chars().next().map_or(1, char::len_utf8)
            };
            out.push_str(&rest[..at]);
            out.push_str(if whole { shown } else { &rest[at..end] });
            before = rest[..end].chars().next_back();
            rest = &rest[end..];
        }
        out.push_str(rest);
        text = out;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs() -> Vec<(String, String)> {
        vec![("app-s3cr3t".into(), "app-(masked:SUFFIX)".into())]
    }

    #[test]
    fn masks_names_in_ids_displays_and_messages() {
        let pairs = pairs();
        assert_eq!(
            mask_text("shop_app-s3cr3t_apps_Deployment", &pairs),
            "shop_app-(masked:SUFFIX)_apps_Deployment"
        );
        assert_eq!(mask_text("Deployment/shop/app-s3cr3t", &pairs), "Deployment/shop/app-(masked:SUFFIX)");
        assert_eq!(
            mask_text("`app-s3cr3t` and app-s3cr3t.", &pairs),
            "`app-(masked:SUFFIX)` and app-(masked:SUFFIX)."
        );
    }

    #[test]
    fn leaves_other_names_that_contain_the_real_one() {
        let pairs = pairs();
        assert_eq!(mask_text("my-app-s3cr3t-2", &pairs), "my-app-s3cr3t-2");
        assert_eq!(mask_text("app-s3cr3tx app-s3cr3t", &pairs), "app-s3cr3tx app-(masked:SUFFIX)");
    }
}
