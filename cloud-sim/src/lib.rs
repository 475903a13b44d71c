//! cloud-sim: a simulator of the Hetzner Cloud API subset used by the controllers.
