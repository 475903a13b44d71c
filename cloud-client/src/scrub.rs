//! Credentials scrubbed out of every text the cloud sends back.
//!
//! A cloud may echo what it was sent: Hetzner's rate-limit answer reads `Limit of '3600'
//! requests per hour for token '<the first 32 characters of the token>...' reached.` Such a
//! message becomes an error, and errors reach Events, Service conditions, logs, `/plan` and the
//! pod's termination message, which far more people can read than the token's Secret. So every
//! text a client decodes from an answer goes through [`scrub`] with the credentials that client
//! sends (a server can only echo what it was given): any run of [`MIN_RUN`] or more consecutive
//! characters of one of them is replaced by [`MARKER`], wherever it starts or ends in the secret.

use crate::secret::Secret;

/// The shortest run of a secret's characters that is replaced. Eight characters of a 64-character
/// token are not enough to use it, and shorter runs would start to eat ordinary words of a
/// message that happen to occur in a secret.
pub const MIN_RUN: usize = 8;

/// What a run of a secret's characters is replaced by.
pub const MARKER: &str = "<redacted>";

/// `text` with every run of [`MIN_RUN`] or more characters of any of `secrets` replaced by
/// [`MARKER`]. A secret shorter than [`MIN_RUN`] is replaced where it occurs whole.
pub fn scrub<'a>(text: &str, secrets: impl IntoIterator<Item = &'a Secret>) -> String {
    let chars: Vec<char> = text.chars().collect();
    // Which characters of `text` belong to a run of some secret's characters.
    let mut covered = vec![false; chars.len()];
    for secret in secrets {
        let secret: Vec<char> = secret.expose().chars().collect();
        if secret.is_empty() {
            continue;
        }
        let window = MIN_RUN.min(secret.len());
        let windows: std::collections::HashSet<&[char]> = secret.windows(window).collect();
        for (start, w) in chars.windows(window).enumerate() {
            if windows.contains(w) {
                covered[start..start + window].fill(true);
            }
        }
    }
    if !covered.contains(&true) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for (&c, &hidden) in chars.iter().zip(&covered) {
        if hidden {
            if !in_run {
                out.push_str(MARKER);
            }
        } else {
            out.push(c);
        }
        in_run = hidden;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "Kp3xQ9vLmZ2aB7cD1eF4gH6iJ8kL0mN5oP3qR7sT9uV1wX2yZ4aB6cD8eF0gH2iJ";

    #[test]
    fn hetzners_rate_limit_echo_loses_the_token() {
        let echo = format!(
            "Limit of '3600' requests per hour for token '{}...' reached.",
            &TOKEN[..32]
        );
        assert_eq!(
            scrub(&echo, [&Secret::new(TOKEN)]),
            "Limit of '3600' requests per hour for token '<redacted>...' reached."
        );
    }

    #[test]
    fn any_run_of_eight_is_replaced_and_seven_are_left() {
        let secret = Secret::new(TOKEN);
        let middle = &TOKEN[20..28];
        assert_eq!(scrub(&format!("x {middle} y"), [&secret]), "x <redacted> y");
        let end = &TOKEN[50..];
        assert_eq!(scrub(&format!("{end}!"), [&secret]), "<redacted>!");
        let seven = &TOKEN[20..27];
        assert_eq!(
            scrub(&format!("x {seven} y"), [&secret]),
            format!("x {seven} y")
        );
    }

    #[test]
    fn every_secret_given_is_scrubbed_and_the_rest_kept() {
        let old = Secret::new("old-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        let user = Secret::new("#ws+Ab3dEf9h");
        let short = Secret::new("pw12");
        let text = "user #ws+Ab3dEf9h, token old-token-aaaaaaaa, pw12 — é unchanged";
        assert_eq!(
            scrub(text, [&old, &user, &short]),
            "user <redacted>, token <redacted>, <redacted> — é unchanged"
        );
        assert_eq!(scrub("nothing here", [&old]), "nothing here");
    }
}
