//! Follows `meta.pagination.next_page` with `per_page=50` (the API maximum) so lists cost as few calls
//! as possible.

use serde::de::DeserializeOwned;

use crate::error::CloudError;
use crate::hcloud::transport::{Req, Transport};
use crate::hcloud::wire::Meta;

pub(crate) const PER_PAGE: u32 = 50;
/// Guard against a server that never stops paging.
const MAX_PAGES: u64 = 10_000;

/// A list response: the items and its `meta`.
pub(crate) trait Page: DeserializeOwned {
    type Item;
    fn into_parts(self) -> (Vec<Self::Item>, Option<Meta>);
}

macro_rules! page {
    ($ty:ty, $item:ty, $field:ident) => {
        impl Page for $ty {
            type Item = $item;
            fn into_parts(self) -> (Vec<$item>, Option<Meta>) {
                (self.$field, self.meta)
            }
        }
    };
}

use crate::hcloud::wire::{
    Certificate, CertificatesPage, LoadBalancer, LoadBalancersPage, Network, NetworksPage, Server,
    ServersPage,
};
page!(ServersPage, Server, servers);
page!(LoadBalancersPage, LoadBalancer, load_balancers);
page!(NetworksPage, Network, networks);
page!(CertificatesPage, Certificate, certificates);

/// Fetches every page of `req` (its own query parameters are kept).
pub(crate) async fn list_all<P: Page>(t: &Transport, req: Req) -> Result<Vec<P::Item>, CloudError> {
    let mut out = Vec::new();
    let mut page = 1u64;
    loop {
        let r = req
            .clone()
            .query("page", page.to_string())
            .query("per_page", PER_PAGE.to_string());
        let p: P = t.call(&r).await?;
        let (items, meta) = p.into_parts();
        out.extend(items);
        match meta.and_then(|m| m.pagination).and_then(|p| p.next_page) {
            Some(next) if next > page && next < MAX_PAGES => page = next,
            _ => return Ok(out),
        }
    }
}
