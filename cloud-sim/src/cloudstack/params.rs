//! A request's parameters, from the query string and (for POST) an
//! `application/x-www-form-urlencoded` body, the way the servlet merges them; typed reads that
//! fail with the API layer's own errors; `page`/`pagesize`; and the list answer's shape.

use serde_json::{Map, Value, json};

use super::error::{CsError, code, cs_code};
use crate::pagination::decode;

/// The parameters of one request, in the order they came (query first, then body).
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    pub fn parse(query: &str, form: &[u8]) -> Params {
        let form = String::from_utf8_lossy(form);
        let pairs = query
            .split('&')
            .chain(form.split('&'))
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (decode(k), decode(v))
            })
            .collect();
        Params { pairs }
    }

    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The first value of `name`; an empty value counts as absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// The command (`listVirtualMachines`), as sent.
    pub fn command(&self) -> Option<&str> {
        self.get("command")
    }

    /// `listvirtualmachines`: how the API layer names the command in its messages.
    pub fn command_lower(&self) -> String {
        self.command().unwrap_or_default().to_ascii_lowercase()
    }

    pub fn required(&self, name: &str) -> Result<&str, CsError> {
        self.get(name).ok_or_else(|| {
            CsError::new(
                code::PARAM_ERROR,
                cs_code::SERVER_API,
                format!(
                    "Unable to execute API command {} due to missing parameter {name}",
                    self.command_lower()
                ),
            )
        })
    }

    /// `Boolean.valueOf`: `true` (any case) is true, everything else false.
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.get(name).map(|v| v.eq_ignore_ascii_case("true"))
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>, CsError> {
        self.get(name)
            .map(|v| v.trim().parse::<i64>().map_err(|_| self.bad_value(name, v)))
            .transpose()
    }

    pub fn required_int(&self, name: &str) -> Result<i64, CsError> {
        self.required(name)?;
        self.int(name).map(|v| v.unwrap_or_default())
    }

    /// A comma-separated list (`virtualmachineids`, `cidrlist`), items trimmed.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn bad_value(&self, name: &str, value: &str) -> CsError {
        CsError::new(
            code::PARAM_ERROR,
            cs_code::SERVER_API,
            format!(
                "Unable to execute API command {} due to invalid value {value} for parameter {name}",
                self.command_lower()
            ),
        )
    }

    /// What the API layer answers when a UUID parameter names nothing it knows.
    pub fn unknown_id(&self, name: &str, value: &str) -> CsError {
        CsError::new(
            code::PARAM_ERROR,
            cs_code::SERVER_API,
            format!(
                "Unable to execute API command {} due to invalid value. Invalid parameter {name} \
                 value={value} due to incorrect long value format, or entity does not exist or due \
                 to incorrect parameter annotation for the field in api cmd class.",
                self.command_lower()
            ),
        )
    }

    /// `page`/`pagesize` as `BaseListCmd` reads them: both or neither; `pagesize=-1` is
    /// unlimited; without them one page of `default_page_size` (`default.page.size`).
    pub fn page(&self, default_page_size: usize) -> Result<Page, CsError> {
        let param_error = |text: String| CsError::new(code::PARAM_ERROR, cs_code::SERVER_API, text);
        let page = self.int("page")?;
        let size = self.int("pagesize")?;
        match (page, size) {
            (None, None) => Ok(Page {
                start: 0,
                size: Some(default_page_size),
            }),
            (_, Some(-1)) => Ok(Page {
                start: 0,
                size: None,
            }),
            (None, Some(_)) => Err(param_error(
                "\"page\" parameter is required when \"pagesize\" is specified".into(),
            )),
            (Some(_), None) => Err(param_error(
                "\"pagesize\" parameter is required when \"page\" is specified".into(),
            )),
            (Some(page), Some(size)) => {
                if size > default_page_size as i64 {
                    return Err(param_error(format!(
                        "Page size can't exceed max allowed page size value: {default_page_size}"
                    )));
                }
                if size < 1 {
                    return Err(self.bad_value("pagesize", &size.to_string()));
                }
                if page < 1 {
                    return Err(self.bad_value("page", &page.to_string()));
                }
                Ok(Page {
                    start: ((page - 1) * size) as usize,
                    size: Some(size as usize),
                })
            }
        }
    }
}

/// One page of a list: where it starts and how long it is (`None`: to the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub start: usize,
    pub size: Option<usize>,
}

impl Page {
    pub fn slice<'a, T>(&self, items: &'a [T]) -> &'a [T] {
        let start = self.start.min(items.len());
        let end = self
            .size
            .map_or(items.len(), |s| (start + s).min(items.len()));
        &items[start..end]
    }
}

/// A list answer's inner object as `ApiResponseSerializer` writes it: `{}` when nothing matched
/// (no `count` at all), `{"count": total}` for a page past the end, else `{"count": total,
/// "<item>": [...]}`. `count` is the number of matches, not the page's length.
pub fn list_body(item_key: &str, total: usize, page: Vec<Value>) -> Value {
    let mut m = Map::new();
    if total > 0 {
        m.insert("count".into(), json!(total));
        if !page.is_empty() {
            m.insert(item_key.into(), Value::Array(page));
        }
    }
    Value::Object(m)
}

/// Filters, sorts nothing (the caller's order stands), pages and renders a list.
pub fn paged<T>(
    params: &Params,
    default_page_size: usize,
    item_key: &str,
    items: &[T],
    render: impl Fn(&T) -> Value,
) -> Result<Value, CsError> {
    let page = params.page(default_page_size)?;
    let shown = page.slice(items).iter().map(render).collect();
    Ok(list_body(item_key, items.len(), shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(q: &str) -> Params {
        Params::parse(q, b"")
    }

    #[test]
    fn merges_query_and_form_and_decodes() {
        let params = Params::parse("command=listZones&name=a%20b", b"name=ignored&id=x+y");
        assert_eq!(params.get("name"), Some("a b"));
        assert_eq!(params.get("id"), Some("x y"));
        assert_eq!(params.command_lower(), "listzones");
    }

    #[test]
    fn pages_as_base_list_cmd_does() {
        assert_eq!(
            p("").page(500).unwrap(),
            Page {
                start: 0,
                size: Some(500)
            }
        );
        assert_eq!(
            p("page=3&pagesize=10").page(500).unwrap(),
            Page {
                start: 20,
                size: Some(10)
            }
        );
        assert_eq!(p("pagesize=-1").page(500).unwrap().size, None);
        assert!(
            p("pagesize=10")
                .page(500)
                .unwrap_err()
                .text
                .contains("\"page\" parameter")
        );
        assert!(
            p("page=1")
                .page(500)
                .unwrap_err()
                .text
                .contains("\"pagesize\" parameter")
        );
        assert!(
            p("page=1&pagesize=501")
                .page(500)
                .unwrap_err()
                .text
                .contains("500")
        );
        assert_eq!(p("page=x&pagesize=1").page(500).unwrap_err().errorcode, 431);
    }

    #[test]
    fn list_bodies() {
        assert_eq!(list_body("zone", 0, vec![]), json!({}));
        assert_eq!(list_body("zone", 3, vec![]), json!({"count": 3}));
        assert_eq!(
            list_body("zone", 3, vec![json!(1)]),
            json!({"count": 3, "zone": [1]})
        );
    }
}
