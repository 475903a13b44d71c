//! Maps the validated `HCLOUD_*` settings into cloud-client's Hetzner configuration.
