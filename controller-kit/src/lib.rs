//! Runtime plumbing shared by the four controller binaries, kept out of their business logic.
