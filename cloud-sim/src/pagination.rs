//! List plumbing shared by every collection: query parsing, the `name` and `label_selector`
//! filters, `sort=field[:asc|:desc]` (repeatable), and `page`/`per_page` with
//! `meta.pagination` and a `Link` header (docs/hetzner-api.md, "Pagination").

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::label_selector::{Labels, Selector};

pub const DEFAULT_PER_PAGE: u64 = 25;
pub const MAX_PER_PAGE: u64 = 50;

/// A decoded query string that keeps repeated keys (`sort=a&sort=b`, `id=1&id=2`).
#[derive(Debug, Clone, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(raw: &str) -> Query {
        Query(
            raw.split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    pub fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn encode_without(&self, skip: &[&str]) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| !skip.contains(&k.as_str()))
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect()
    }
}

pub(crate) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match hex_byte(bytes[i + 1], bytes[i + 2]) {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_byte(hi: u8, lo: u8) -> Option<u8> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    Some(digit(hi)? << 4 | digit(lo)?)
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// What a list handler needs from the request: the query and the URL to build `Link` from.
#[derive(Debug, Clone)]
pub struct ListParams {
    pub query: Query,
    url: String,
}

impl<S: Send + Sync> FromRequestParts<S> for ListParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost");
        Ok(ListParams {
            query: Query::parse(parts.uri.query().unwrap_or("")),
            url: format!("http://{host}{}", parts.uri.path()),
        })
    }
}

/// Order of a sort key: missing values sort first, like SQL NULLs ascending.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum SortKey {
    Null,
    Int(i64),
    Str(String),
}

/// A resource a collection endpoint lists.
pub trait Listable {
    fn id(&self) -> u64;
    fn name(&self) -> Option<&str>;
    fn labels(&self) -> Option<&Labels>;
    /// `None` for a field that cannot be sorted by.
    fn sort_key(&self, field: &str) -> Option<SortKey>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageSpec {
    pub page: u64,
    pub per_page: u64,
}

fn positive(q: &Query, key: &str, default: u64) -> Result<u64, ApiError> {
    match q.first(key) {
        None => Ok(default),
        Some(v) => v.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
            ApiError::invalid_input(key, format!("{key} must be a positive integer"))
        }),
    }
}

impl ListParams {
    pub fn page_spec(&self) -> Result<PageSpec, ApiError> {
        Ok(PageSpec {
            page: positive(&self.query, "page", 1)?,
            // Larger pages are capped rather than refused, as the real API does.
            per_page: positive(&self.query, "per_page", DEFAULT_PER_PAGE)?.min(MAX_PER_PAGE),
        })
    }

    /// The whole pipeline: `name` and `label_selector` filters, `sort`, then one page rendered.
    pub fn respond<'a, T: Listable + 'a>(
        &self,
        root_key: &str,
        items: impl Iterator<Item = &'a T>,
        render: impl Fn(&T) -> Value,
    ) -> Result<Response, ApiError> {
        let spec = self.page_spec()?;
        let selector = match self.query.first("label_selector") {
            Some(s) => {
                Some(Selector::parse(s).map_err(|e| ApiError::invalid_input("label_selector", e))?)
            }
            None => None,
        };
        let name = self.query.first("name");
        let empty = Labels::new();
        let mut selected: Vec<&T> = items
            .filter(|t| name.is_none_or(|n| t.name() == Some(n)))
            .filter(|t| {
                selector
                    .as_ref()
                    .is_none_or(|s| s.matches(t.labels().unwrap_or(&empty)))
            })
            .collect();
        self.sort(&mut selected)?;
        let total = selected.len() as u64;
        let start = ((spec.page - 1).saturating_mul(spec.per_page)).min(total) as usize;
        let end = (start + spec.per_page as usize).min(selected.len());
        let page: Vec<Value> = selected[start..end].iter().map(|t| render(t)).collect();
        Ok(self.page_response(root_key, page, spec, total))
    }

    fn sort<T: Listable>(&self, items: &mut [&T]) -> Result<(), ApiError> {
        let mut keys = Vec::new();
        for raw in self.query.all("sort") {
            let (field, desc) = match raw.split_once(':') {
                Some((f, "asc")) => (f, false),
                Some((f, "desc")) => (f, true),
                Some(_) => {
                    return Err(ApiError::invalid_input(
                        "sort",
                        format!("invalid sort order in '{raw}'"),
                    ));
                }
                None => (raw, false),
            };
            if items.first().is_some_and(|t| t.sort_key(field).is_none())
                || !SORTABLE.contains(&field)
            {
                return Err(ApiError::invalid_input(
                    "sort",
                    format!("cannot sort by '{field}'"),
                ));
            }
            keys.push((field.to_owned(), desc));
        }
        // The id is the implicit last key, so pages are stable.
        items.sort_by(|a, b| {
            keys.iter()
                .map(|(f, desc)| {
                    let o = a.sort_key(f).cmp(&b.sort_key(f));
                    if *desc { o.reverse() } else { o }
                })
                .find(|o| o.is_ne())
                .unwrap_or_else(|| a.id().cmp(&b.id()))
        });
        Ok(())
    }

    pub fn page_response(
        &self,
        root_key: &str,
        items: Vec<Value>,
        spec: PageSpec,
        total: u64,
    ) -> Response {
        let last_page = total.div_ceil(spec.per_page).max(1);
        let previous = (spec.page > 1).then(|| (spec.page - 1).min(last_page));
        let next = (spec.page < last_page).then_some(spec.page + 1);
        let body = json!({
            root_key: items,
            "meta": {"pagination": {
                "page": spec.page, "per_page": spec.per_page,
                "previous_page": previous, "next_page": next,
                "last_page": last_page, "total_entries": total,
            }},
        });
        let base = self.query.encode_without(&["page", "per_page"]);
        let link_to = |page: u64, rel: &str| {
            let mut q = base.clone();
            q.push(format!("page={page}"));
            q.push(format!("per_page={}", spec.per_page));
            format!("<{}?{}>; rel=\"{rel}\"", self.url, q.join("&"))
        };
        let mut links = Vec::new();
        if let Some(p) = previous {
            links.push(link_to(p, "prev"));
        }
        if let Some(n) = next {
            links.push(link_to(n, "next"));
        }
        links.push(link_to(last_page, "last"));
        let mut resp = Json(body).into_response();
        if let Ok(v) = HeaderValue::from_str(&links.join(", ")) {
            resp.headers_mut().insert(header::LINK, v);
        }
        resp
    }
}

/// Every field any collection can be sorted by; each resource still decides what it supports.
const SORTABLE: &[&str] = &[
    "id", "name", "created", "status", "command", "progress", "started", "finished", "type",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_query() {
        let q = Query::parse(
            "label_selector=env%3Dprod%2Ctier+in+(a%2Cb)&sort=id:desc&sort=name&bad=%zz%",
        );
        assert_eq!(q.first("label_selector"), Some("env=prod,tier in (a,b)"));
        assert_eq!(q.all("sort").collect::<Vec<_>>(), vec!["id:desc", "name"]);
        assert_eq!(q.first("bad"), Some("%zz%"));
        assert_eq!(encode("a=b c"), "a%3Db%20c");
    }
}
