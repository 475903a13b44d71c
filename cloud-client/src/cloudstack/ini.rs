//! The INI dialect upstream's cloud-config is read with (gopkg.in/gcfg.v1, git-config syntax), as
//! far as a `[Global]` section of plain variables needs it:
//!
//! - `[section]` headers (a `[section "sub"]` is read so that it can be refused by name);
//! - `name = value`, or a bare `name` (a boolean's `true`); names are case-insensitive;
//! - `;` and `#` start a comment at the start of a line or anywhere outside quotes;
//! - values are trimmed; `"…"` keeps its spaces, `;` and `#`; the escapes `\"`, `\\`, `\n`,
//!   `\t`, and a `\` ending the line, which continues the value on the next one.
//!
//! What this reads is the file's structure and nothing more; which sections and names mean
//! something is `config`'s question. Every item keeps its line number and text for messages.

/// One section header or variable, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    /// The line it starts on (1-based).
    pub line: usize,
    pub kind: ItemKind,
}

#[derive(Clone, PartialEq, Eq)]
pub(crate) enum ItemKind {
    /// `[name]` or `[name "sub"]`, the name as written.
    Section { name: String, sub: Option<String> },
    /// `name = value`; `value` is `None` for a bare `name`.
    Variable { name: String, value: Option<String> },
}

// No derived Debug: a variable's value may be a credential.
impl std::fmt::Debug for ItemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemKind::Section { name, sub } => write!(f, "[{name} {sub:?}]"),
            ItemKind::Variable { name, value } => write!(
                f,
                "{name}{}",
                if value.is_some() { " = <value>" } else { "" }
            ),
        }
    }
}

/// A line that is not INI, with what is wrong (never the line's value: it may be a credential).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: usize,
    pub message: String,
}

/// The file's items in order, or every line that is not valid INI.
pub(crate) fn parse(text: &str) -> Result<Vec<Item>, Vec<SyntaxError>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut items = Vec::new();
    let mut errors = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = i + 1;
        let trimmed = lines[i].trim();
        i += 1;
        if trimmed.is_empty() || trimmed.starts_with(';') || trimmed.starts_with('#') {
            continue;
        }
        let parsed = if trimmed.starts_with('[') {
            section(trimmed)
        } else {
            variable(trimmed, &lines, &mut i)
        };
        match parsed {
            Ok(kind) => items.push(Item { line, kind }),
            Err(message) => errors.push(SyntaxError { line, message }),
        }
    }
    if errors.is_empty() {
        Ok(items)
    } else {
        Err(errors)
    }
}

fn section(text: &str) -> Result<ItemKind, String> {
    let close = text.find(']').ok_or("a section header must end with `]`")?;
    let rest = text[close + 1..].trim();
    if !(rest.is_empty() || rest.starts_with(';') || rest.starts_with('#')) {
        return Err("only a comment may follow a section header".into());
    }
    let inner = text[1..close].trim();
    let (name, sub) = match inner.split_once(char::is_whitespace) {
        Some((name, sub)) => {
            let sub = sub.trim();
            let quoted = sub.len() >= 2 && sub.starts_with('"') && sub.ends_with('"');
            if !quoted {
                return Err("a subsection name must be in double quotes".into());
            }
            (name, Some(sub[1..sub.len() - 1].to_owned()))
        }
        None => (inner, None),
    };
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if !valid {
        return Err("a section name is letters, digits, `-` and `.`".into());
    }
    Ok(ItemKind::Section {
        name: name.to_owned(),
        sub,
    })
}

fn variable(text: &str, lines: &[&str], next: &mut usize) -> Result<ItemKind, String> {
    // gcfg's names are letters, digits and `-`; a `_` is read too, so that a misspelt key is
    // refused as an unknown key (naming the known ones) rather than as bad syntax.
    let name_end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .unwrap_or(text.len());
    let name = &text[..name_end];
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(
            "expected `name = value` (a name starts with a letter and is letters, digits \
                    and `-`)"
                .into(),
        );
    }
    let rest = text[name_end..].trim_start();
    if rest.is_empty() || rest.starts_with(';') || rest.starts_with('#') {
        return Ok(ItemKind::Variable {
            name: name.to_owned(),
            value: None,
        });
    }
    let Some(raw) = rest.strip_prefix('=') else {
        return Err("expected `=` after the name".into());
    };
    let value = value(raw, lines, next)?;
    Ok(ItemKind::Variable {
        name: name.to_owned(),
        value: Some(value),
    })
}

/// A value from after the `=` to the end of the line (or of the lines a trailing `\` joins).
fn value(raw: &str, lines: &[&str], next: &mut usize) -> Result<String, String> {
    let mut out = String::new();
    // Characters outside quotes whose whitespace may still be trimmed off the end.
    let mut pending_space = String::new();
    let mut quoted = false;
    let mut chars: Vec<char> = raw.trim_start().chars().collect();
    let mut at = 0;
    loop {
        let Some(&c) = chars.get(at) else {
            if quoted {
                return Err("a quoted value must end with `\"` on its line".into());
            }
            break;
        };
        at += 1;
        match c {
            '"' => {
                out.push_str(&std::mem::take(&mut pending_space));
                quoted = !quoted;
            }
            ';' | '#' if !quoted => break,
            '\\' => match chars.get(at) {
                None => {
                    // A `\` ending the line continues the value on the next line.
                    let Some(line) = lines.get(*next) else {
                        return Err("a `\\` ends the file's last line".into());
                    };
                    *next += 1;
                    chars = line.chars().collect();
                    at = 0;
                }
                Some(&e) => {
                    at += 1;
                    let unescaped = match e {
                        '"' => '"',
                        '\\' => '\\',
                        'n' => '\n',
                        't' => '\t',
                        _ => {
                            return Err(
                                "unknown escape: `\\` may only precede `\"`, `\\`, `n`, `t` or \
                                 the end of the line"
                                    .into(),
                            );
                        }
                    };
                    out.push_str(&std::mem::take(&mut pending_space));
                    out.push(unescaped);
                }
            },
            c if c.is_whitespace() && !quoted => pending_space.push(c),
            c => {
                out.push_str(&std::mem::take(&mut pending_space));
                out.push(c);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variables(text: &str) -> Vec<(usize, String, Option<String>)> {
        parse(text)
            .unwrap()
            .into_iter()
            .filter_map(|i| match i.kind {
                ItemKind::Variable { name, value } => Some((i.line, name, value)),
                ItemKind::Section { .. } => None,
            })
            .collect()
    }

    #[test]
    fn values_read_as_gcfg_reads_them() {
        let text = "; a comment\n[Global]\n  api-url = http://cs/client/api ; trailing\n\
                    api-key=\"  quoted ; kept # too \"\nzone = zone 1   # spaces inside kept\n\
                    region = a\\\n  b\nproject-id = \"x\\\"y\\\\z\\tq\"\nssl-no-verify\n";
        let got = variables(text);
        let v = |n: &str| {
            got.iter()
                .find(|(_, k, _)| k == n)
                .and_then(|(_, _, v)| v.clone())
        };
        assert_eq!(v("api-url").as_deref(), Some("http://cs/client/api"));
        assert_eq!(v("api-key").as_deref(), Some("  quoted ; kept # too "));
        assert_eq!(v("zone").as_deref(), Some("zone 1"));
        assert_eq!(v("region").as_deref(), Some("a  b"));
        assert_eq!(v("project-id").as_deref(), Some("x\"y\\z\tq"));
        assert!(
            got.iter()
                .any(|(line, k, v)| *line == 9 && k == "ssl-no-verify" && v.is_none())
        );
        // Line numbers are where each item starts.
        assert_eq!(got[0].0, 3);
    }

    #[test]
    fn sections_and_their_subsections() {
        let items = parse("[global]\n[Global \"more\"] ; c\n").unwrap();
        assert_eq!(
            items.iter().map(|i| i.kind.clone()).collect::<Vec<_>>(),
            [
                ItemKind::Section {
                    name: "global".into(),
                    sub: None
                },
                ItemKind::Section {
                    name: "Global".into(),
                    sub: Some("more".into())
                }
            ]
        );
    }

    #[test]
    fn every_bad_line_is_reported_with_its_number_and_never_its_value() {
        let text =
            "[Global\nsecret-key = \"s3cr3t-unterminated\nkey s3cr3t\n= x\nv = a\\q\n[a b]\n";
        let errors = parse(text).unwrap_err();
        assert_eq!(
            errors.iter().map(|e| e.line).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5, 6]
        );
        for e in &errors {
            assert!(!e.message.contains("s3cr3t"), "{e:?}");
        }
        assert!(errors[3].message.contains("expected `name = value`"));
    }

    #[test]
    fn debug_shows_no_value() {
        let items = parse("[Global]\nsecret-key = s3cr3t\n").unwrap();
        assert!(!format!("{items:?}").contains("s3cr3t"));
    }
}
