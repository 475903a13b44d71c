//! Keys HCCM reserves, never read or written.

use super::declaration::{Annotation, Kind, Section, declare};

declare! {
    section: "Reserved keys (never read or written)";

    /// Read-only in HCCM, never written or read.
    IPV4 = "ipv4" {
        kind: Kind::Reserved,
        hccm: "Declared read-only by HCCM and never written by it; ignored here.",
    }

    /// Read-only in HCCM, never written or read.
    IPV6 = "ipv6" {
        kind: Kind::Reserved,
        hccm: "As `ipv4`.",
    }

    /// Reserved by HCCM, never written or read.
    ID = "id" {
        kind: Kind::Reserved,
        hccm: "Reserved by HCCM; ignored here.",
    }
}
