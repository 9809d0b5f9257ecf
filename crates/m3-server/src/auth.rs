//! The guard in front of every route: a foreign `Origin` never changes state,
//! and with a token every route but `/healthz` and the assets needs it (a
//! bearer header, or the page's cookie set through `/?token=`).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};

use crate::config::Shared;
use crate::error::ApiError;

/// The page's cookie.
pub(crate) const COOKIE: &str = "m3_token";

/// Runs before every handler.
pub(crate) async fn guard(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    if !is_safe(request.method()) && !same_origin(request.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            "state-changing requests from another origin are refused",
        )
        .into_response();
    }
    if path == "/healthz" || path.starts_with("/assets/") {
        return next.run(request).await;
    }
    let Some(token) = state.token.as_deref() else {
        return next.run(request).await;
    };
    if let Some(given) = query_token(request.uri().query()) {
        return login(&state.base_path, token, &given);
    }
    if bearer(request.headers()).is_some_and(|given| equal(given, token))
        || cookie(request.headers()).is_some_and(|given| equal(given, token))
    {
        return next.run(request).await;
    }
    unauthorized(&path)
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// True when the request carries no `Origin` (a program, not a page) or one
/// naming this very host; `Sec-Fetch-Site: cross-site` is refused as well.
fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| site == "cross-site" || site == "same-site")
    {
        return false;
    }
    let Some(origin) = text(header::ORIGIN) else {
        return true;
    };
    let Some(host) = text(header::HOST) else {
        return false;
    };
    origin == format!("http://{host}") || origin == format!("https://{host}")
}

/// `?token=` of the page's login link.
fn query_token(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
}

/// A correct `?token=` sets the cookie and drops the token from the address.
fn login(base: &str, token: &str, given: &str) -> Response {
    if !equal(given, token) {
        return unauthorized("/");
    }
    let path = if base.is_empty() { "/" } else { base };
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path={path}");
    let mut response = Redirect::to(&format!("{base}/")).into_response();
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Compares without stopping at the first difference.
fn equal(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unauthorized(path: &str) -> Response {
    if path.starts_with("/api/") {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong token: send Authorization: Bearer TOKEN",
        )
        .into_response();
    }
    let page = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>m3: token required</title></head>\
        <body><h1>Token required</h1><p>Open the address that <code>m3 serve</code> printed (it carries <code>?token=</code>).</p></body></html>";
    (StatusCode::UNAUTHORIZED, Html(page)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(equal("abc", "abc"));
        assert!(!equal("abd", "abc"));
        assert!(!equal("ab", "abc"));
    }

    #[test]
    fn origins_are_compared_with_the_host() {
        let mut headers = HeaderMap::new();
        assert!(same_origin(&headers));
        headers.insert(header::HOST, "127.0.0.1:7878".parse().unwrap());
        headers.insert(header::ORIGIN, "http://127.0.0.1:7878".parse().unwrap());
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, "http://evil.test".parse().unwrap());
        assert!(!same_origin(&headers));
        headers.insert(header::ORIGIN, "null".parse().unwrap());
        assert!(!same_origin(&headers));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, "a=1; m3_token=xyz; b=2".parse().unwrap());
        assert_eq!(cookie(&headers), Some("xyz"));
    }
}
