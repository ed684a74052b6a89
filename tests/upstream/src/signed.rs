//! A script step's `verify`: the request's signature checked before the step answers, by an
//! implementation written apart from the core's (so the two cannot agree on the same mistake).
//!
//! `{"scheme": "harness" | "slack" | "github" | "standard_webhooks", "secret": "..."}` checks
//! an HMAC signature the way each vendor documents it; `{"scheme": "aws_sigv4",
//! "access_key_id", "secret_access_key", "region", "service"}` recomputes a SigV4 signature
//! from the request as received. A timestamp must be within `max_skew_s` (default 300) of
//! now, and a nonce (`webhook-id`) may not repeat within the script. A failed check is
//! answered 401 with `{"error": {"code", "message"}}` (never the secret) instead of the step.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifySpec {
    pub scheme: String,
    #[serde(default)]
    pub secret: String,
    #[serde(default)]
    pub access_key_id: String,
    #[serde(default)]
    pub secret_access_key: String,
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub service: String,
    pub max_skew_s: Option<u64>,
}

/// What a check needs of the request.
pub struct Seen<'a> {
    pub method: &'a str,
    /// The request target as received (path and query).
    pub target: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

impl Seen<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Checks `seen` against `spec`: what was verified, or why not.
pub fn check(spec: &VerifySpec, seen: &Seen<'_>, nonces: &mut HashSet<String>) -> Result<Value, String> {
    let skew = spec.max_skew_s.unwrap_or(300);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let fresh = |ts: &str| -> Result<(), String> {
        let t: u64 = ts.parse().map_err(|_| format!("the timestamp {ts:?} is not Unix seconds"))?;
        if now.abs_diff(t) > skew {
            return Err(format!("the timestamp {t} is more than {skew} s from now"));
        }
        Ok(())
    };
    let need = |name: &str| seen.header(name).ok_or_else(|| format!("no {name} header"));
    let key = spec.secret.as_bytes();
    match spec.scheme.as_str() {
        "harness" => {
            let ts = need("x-timestamp")?;
            fresh(ts)?;
            let want = hex(&hmac256(key, &[ts.as_bytes(), b".", seen.body].concat()));
            matches(need("x-signature")?, &want)?;
            Ok(json!({"scheme": "harness", "timestamp": ts}))
        }
        "slack" => {
            let ts = need("x-slack-request-timestamp")?;
            fresh(ts)?;
            let want = format!("v0={}", hex(&hmac256(key, &[b"v0:", ts.as_bytes(), b":", seen.body].concat())));
            matches(need("x-slack-signature")?, &want)?;
            Ok(json!({"scheme": "slack", "timestamp": ts}))
        }
        "github" => {
            let want = format!("sha256={}", hex(&hmac256(key, seen.body)));
            matches(need("x-hub-signature-256")?, &want)?;
            Ok(json!({"scheme": "github"}))
        }
        "standard_webhooks" => {
            let (id, ts) = (need("webhook-id")?, need("webhook-timestamp")?);
            fresh(ts)?;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(spec.secret.strip_prefix("whsec_").unwrap_or(&spec.secret))
                .map_err(|_| "the spec's secret is not base64".to_string())?;
            let sig = hmac256(&raw, &[id.as_bytes(), b".", ts.as_bytes(), b".", seen.body].concat());
            let want = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(sig));
            // The header may list several signatures, space-separated.
            if !need("webhook-signature")?.split(' ').any(|s| s == want) {
                return Err("the signature does not match".into());
            }
            if !nonces.insert(id.to_string()) {
                return Err(format!("the message id {id} was seen before (a replayed nonce)"));
            }
            Ok(json!({"scheme": "standard_webhooks", "timestamp": ts, "nonce": id}))
        }
        "aws_sigv4" => sigv4(spec, seen, now, skew),
        other => Err(format!("unknown scheme {other:?}")),
    }
}

fn matches(got: &str, want: &str) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err("the signature does not match".into())
    }
}

fn hmac256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), msg).as_ref().to_vec()
}

fn sha256_hex(b: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, b).as_ref())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// RFC 3986 unreserved characters stay; every other byte is `%XX` (SigV4's URI encoding).
fn aws_encode(s: &[u8], keep_slash: bool) -> String {
    let mut out = String::new();
    for &b in s {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    out
}

/// SigV4 recomputed from the request as received: the canonical request (path encoded once
/// more, as non-S3 services sign it; the query decoded, re-encoded and sorted; the signed
/// headers trimmed), the string to sign and the derived key.
fn sigv4(spec: &VerifySpec, seen: &Seen<'_>, now: u64, skew: u64) -> Result<Value, String> {
    let auth = seen.header("authorization").ok_or("no authorization header")?;
    let rest = auth.strip_prefix("AWS4-HMAC-SHA256 ").ok_or("not an AWS4-HMAC-SHA256 authorization")?;
    let field = |name: &str| rest.split(", ").find_map(|p| p.strip_prefix(name)).map(str::to_string);
    let credential = field("Credential=").ok_or("no Credential")?;
    let signed = field("SignedHeaders=").ok_or("no SignedHeaders")?;
    let signature = field("Signature=").ok_or("no Signature")?;
    let amz_date = seen.header("x-amz-date").ok_or("no x-amz-date header")?;
    let date = amz_date.get(..8).ok_or("a short x-amz-date")?;
    let scope = format!("{date}/{}/{}/aws4_request", spec.region, spec.service);
    if credential != format!("{}/{scope}", spec.access_key_id) {
        return Err(format!("the credential scope is {credential:?}, expected {}/{scope}", spec.access_key_id));
    }
    // x-amz-date: YYYYMMDDTHHMMSSZ, within the skew.
    let at = civil_to_unix(amz_date).ok_or("x-amz-date is not YYYYMMDDTHHMMSSZ")?;
    if now.abs_diff(at) > skew {
        return Err(format!("x-amz-date {amz_date} is more than {skew} s from now"));
    }
    let (path, query) = seen.target.split_once('?').unwrap_or((seen.target, ""));
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (aws_encode(&percent_decode(k), false), aws_encode(&percent_decode(v), false))
        })
        .collect();
    pairs.sort();
    let canonical_query = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&");
    let mut canonical_headers = String::new();
    for name in signed.split(';') {
        let values: Vec<String> = seen.headers.iter().filter(|(k, _)| k == name).map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" ")).collect();
        if values.is_empty() {
            return Err(format!("the signed header {name} is missing"));
        }
        canonical_headers.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    let payload = seen.header("x-amz-content-sha256").map(str::to_string).unwrap_or_else(|| sha256_hex(seen.body));
    let canonical = format!("{}\n{}\n{canonical_query}\n{canonical_headers}\n{signed}\n{payload}", seen.method, aws_encode(path.as_bytes(), true));
    let to_sign = format!("AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}", sha256_hex(canonical.as_bytes()));
    let mut k = hmac256(format!("AWS4{}", spec.secret_access_key).as_bytes(), date.as_bytes());
    for part in [spec.region.as_str(), spec.service.as_str(), "aws4_request"] {
        k = hmac256(&k, part.as_bytes());
    }
    matches(&signature, &hex(&hmac256(&k, to_sign.as_bytes())))?;
    Ok(json!({"scheme": "aws_sigv4", "signed_headers": signed, "amz_date": amz_date, "session_token": seen.header("x-amz-security-token").is_some()}))
}

/// `YYYYMMDDTHHMMSSZ` to Unix seconds (the proleptic Gregorian calendar).
fn civil_to_unix(s: &str) -> Option<u64> {
    if s.len() != 16 || &s[8..9] != "T" || !s.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    let (hh, mm, ss) = (n(9..11)?, n(11..13)?, n(13..15)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    u64::try_from(days * 86400 + hh * 3600 + mm * 60 + ss).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time() {
        assert_eq!(civil_to_unix("20150830T123600Z"), Some(1440938160));
        assert_eq!(civil_to_unix("19700101T000000Z"), Some(0));
    }

    #[test]
    fn the_sigv4_suites_get_vanilla_checks_out_at_its_own_time() {
        // aws-signing-test-suite/v4/get-vanilla (the request as the server receives it).
        let spec = VerifySpec {
            scheme: "aws_sigv4".into(),
            secret: String::new(),
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            region: "us-east-1".into(),
            service: "service".into(),
            max_skew_s: None,
        };
        let headers = vec![
            ("host".to_string(), "example.amazonaws.com".to_string()),
            ("x-amz-date".to_string(), "20150830T123600Z".to_string()),
            ("authorization".to_string(), "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31".to_string()),
        ];
        let seen = Seen { method: "GET", target: "/", headers: &headers, body: b"" };
        sigv4(&spec, &seen, 1440938160, 300).unwrap();
        assert!(sigv4(&spec, &seen, 1440938160 + 301, 300).unwrap_err().contains("from now"));
        let bad = VerifySpec { secret_access_key: "other".into(), ..spec };
        assert_eq!(sigv4(&bad, &seen, 1440938160, 300).unwrap_err(), "the signature does not match");
    }
}
