//! The admin console: one page and its ES modules (`gateway/ui/`), embedded in the binary and
//! served at `/admin/ui`; the page calls the admin API with the key the operator types in.
//!
//! Guarantees: the console exists only when the admin API does (`gateway.admin_key_sha256`,
//! else 404 like the API); the page and its assets carry no data (they are the same for
//! everyone, so serving them without the key gives nothing away); every answer under `/admin`
//! carries a strict Content-Security-Policy (scripts and styles from this origin only, no inline
//! code, no other origin reachable, no framing), `X-Frame-Options: DENY`, `nosniff`,
//! `no-referrer` and `Cache-Control: no-store`.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::errors::ApiError;
use crate::state::Gateway;

/// (file name, content type, content).
const ASSETS: &[(&str, &str, &[u8])] = &[
    ("console.css", "text/css; charset=utf-8", include_bytes!("../ui/console.css")),
    ("main.js", "text/javascript; charset=utf-8", include_bytes!("../ui/main.js")),
    ("api.js", "text/javascript; charset=utf-8", include_bytes!("../ui/api.js")),
    ("dom.js", "text/javascript; charset=utf-8", include_bytes!("../ui/dom.js")),
    ("views.js", "text/javascript; charset=utf-8", include_bytes!("../ui/views.js")),
    ("icon.svg", "image/svg+xml", include_bytes!("../ui/icon.svg")),
];

const PAGE: &[u8] = include_bytes!("../ui/index.html");

/// Only this origin's scripts, styles, images and API; nothing inline, no plugin, no base
/// rewrite, no form posted anywhere, and never inside a frame.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn off() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "the admin API is off (gateway.admin_key_sha256)")
}

pub(crate) async fn page(State(gw): State<Arc<Gateway>>) -> Response {
    if !gw.admin_on() {
        return off().into_response();
    }
    ([("content-type", "text/html; charset=utf-8")], PAGE).into_response()
}

pub(crate) async fn asset(State(gw): State<Arc<Gateway>>, Path(name): Path<String>) -> Response {
    if !gw.admin_on() {
        return off().into_response();
    }
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => ([("content-type", *content_type)], *body).into_response(),
        None => ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", "not_found", "no such console asset").into_response(),
    }
}

/// The headers of every answer under `/admin` (the API's and the console's, errors included).
pub(crate) async fn admin_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let is_admin = req.uri().path() == "/admin" || req.uri().path().starts_with("/admin/");
    let mut resp = next.run(req).await;
    if is_admin {
        let h = resp.headers_mut();
        for (name, value) in [
            ("content-security-policy", CSP),
            ("x-frame-options", "DENY"),
            ("x-content-type-options", "nosniff"),
            ("referrer-policy", "no-referrer"),
            ("cache-control", "no-store"),
            ("cross-origin-opener-policy", "same-origin"),
            ("cross-origin-resource-policy", "same-origin"),
        ] {
            h.insert(HeaderName::from_static(name), HeaderValue::from_static(value));
        }
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_embedded_modules_and_no_inline_code() {
        let page = std::str::from_utf8(PAGE).unwrap();
        assert!(!page.contains("style="), "no inline style attribute");
        let handler = page.match_indices(" on").any(|(i, _)| {
            let rest = &page[i + 3..];
            let name = rest.chars().take_while(char::is_ascii_alphabetic).count();
            name > 0 && rest[name..].starts_with('=')
        });
        assert!(!handler, "no inline event handler");
        for script in page.split("<script").skip(1) {
            let tag = &script[..script.find('>').unwrap()];
            assert!(tag.contains("src=\"/admin/ui/"), "every script is an embedded file: {tag}");
            assert!(script[script.find('>').unwrap() + 1..].trim_start().starts_with("</script>"), "no inline script body");
        }
        for (name, _, body) in ASSETS {
            let text = String::from_utf8_lossy(body);
            assert!(!text.contains("innerHTML") && !text.contains("outerHTML") && !text.contains("insertAdjacentHTML") && !text.contains("document.write"), "{name} builds no HTML from strings");
            assert!(!text.contains("localStorage") && !text.contains("sessionStorage") && !text.contains("document.cookie"), "{name} stores nothing");
            assert!(!text.contains("http://") && !text.contains("https://") || *name == "icon.svg", "{name} names no other origin");
        }
    }
}
