//! What a declaration says of an annotation, and the `declare!` macro the section files use.

/// Common prefix of all annotations.
pub const PREFIX: &str = "load-balancer.hetzner.cloud/";

/// What an annotation accepts, as far as the parser checks it before any call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Go's `strconv.ParseBool`: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False.
    Bool,
    /// Whole seconds (`15`) or a Go duration (`15s`, `1m30s`) of whole seconds, `min` to `max`.
    Duration { min: u64, max: Option<u64> },
    /// `tcp`, `http` or `https`, any case.
    Protocol,
    /// An RFC 1123 host name.
    HostName,
    /// Checked by a rule of its own (written out in the parser and the admission policy).
    OwnRule,
    /// Any text: what it names is checked against the cloud, if at all.
    Text,
    /// Never read.
    Reserved,
}

impl Kind {
    /// Whether the parser can refuse a value on its own.
    pub fn is_checked(self) -> bool {
        !matches!(self, Kind::Text | Kind::Reserved)
    }
}

/// Whose annotation it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// HCCM's, with its meaning (a Service served by HCCM keeps working).
    Hccm,
    /// Ours, in HCCM's style.
    Ours,
}

/// One annotation, declared once.
#[derive(Debug)]
pub struct Annotation {
    pub key: &'static str,
    pub kind: Kind,
    /// Can be set for one port: `protocol.443` (the Service-wide value is every other port's).
    pub per_port: bool,
    /// The `HCLOUD_LOAD_BALANCERS_*` variable that sets its default.
    pub env: Option<&'static str>,
    pub origin: Origin,
    /// The reference's columns (docs/annotations.md).
    pub values: &'static str,
    pub default: &'static str,
    pub does: &'static str,
    pub hccm: &'static str,
}

impl Annotation {
    /// What a declaration leaves unsaid.
    pub(super) const BASE: Annotation = Annotation {
        key: "",
        kind: Kind::Text,
        per_port: false,
        env: None,
        origin: Origin::Hccm,
        values: "",
        default: "",
        does: "",
        hccm: "",
    };

    /// The key without the common prefix, as the page and the chart write it.
    pub fn short_key(&self) -> &'static str {
        self.key.strip_prefix(PREFIX).unwrap_or(self.key)
    }
}

/// One section of docs/annotations.md: a heading and its annotations, in the page's order.
#[derive(Debug)]
pub struct Section {
    pub title: &'static str,
    pub annotations: &'static [Annotation],
}

/// Declares a section's annotations: a `pub const` per key (`NAME = "name"` gives
/// `NAME: &str = "load-balancer.hetzner.cloud/name"`) and the section's [`Annotation`]s.
macro_rules! declare {
    (
        section: $title:literal;
        $($(#[$m:meta])* $ident:ident = $suffix:literal { $($field:ident: $value:expr),* $(,)? })*
    ) => {
        $( $(#[$m])* pub const $ident: &str = concat!("load-balancer.hetzner.cloud/", $suffix); )*

        // A declaration may say every field.
        #[allow(clippy::needless_update)]
        pub(super) const SECTION: Section = Section {
            title: $title,
            annotations: &[$(Annotation { key: $ident, $($field: $value,)* ..Annotation::BASE }),*],
        };
    };
}
pub(super) use declare;
