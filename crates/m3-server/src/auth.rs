//! The guard in front of every route: a request must name a host this server
//! answers (without a token: loopback, see [`crate::host`]), a foreign
//! `Origin` never changes state, and with a token every route but `/healthz`
//! and the assets needs it (a bearer header, or the page's cookie set through
//! `?token=`).

use axum::extract::{Query, Request, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum_extra::TypedHeader;
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};
use axum_extra::headers::Authorization;
use axum_extra::headers::authorization::Bearer;
use axum_extra::typed_header::TypedHeaderRejection;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::principal::Principal;
use crate::state::Shared;

/// The page's cookie.
pub(crate) const COOKIE: &str = "m3_token";

/// The credentials a request may carry: `Authorization: Bearer TOKEN` (the
/// scheme is case-insensitive, RFC 9110 section 11.1; a header of another
/// scheme or malformed counts as none) and the page's cookie.
#[derive(Debug)]
pub(crate) struct Credentials {
    bearer: Option<Authorization<Bearer>>,
    cookies: CookieJar,
}

impl Credentials {
    /// Whether either credential is `token`.
    fn match_token(&self, token: &str) -> bool {
        let bearer = self.bearer.as_ref().map(|header| header.token());
        let cookie = self.cookies.get(COOKIE).map(Cookie::value);
        bearer.is_some_and(|given| equal(given, token))
            || cookie.is_some_and(|given| equal(given, token))
    }
}

/// Runs before every handler.
pub(crate) async fn guard(
    State(state): State<Shared>,
    bearer: Result<TypedHeader<Authorization<Bearer>>, TypedHeaderRejection>,
    cookies: CookieJar,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    if !state.hosts.admits(request.uri(), request.headers()) {
        return refuse(
            &path,
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "this server answers only the host names it was started for (see --allowed-host)",
        );
    }
    if !is_safe(request.method()) && !state.hosts.same_origin(request.uri(), request.headers()) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden_origin",
            "state-changing requests from another origin are refused",
        )
        .into_response();
    }
    // An answer link is its own credential (checked by its handler).
    if path == "/healthz" || path.starts_with("/assets/") || path.starts_with("/answer/") {
        return next.run(request).await;
    }
    let Some(token) = state.token.as_deref() else {
        request.extensions_mut().insert(Principal::ANONYMOUS);
        return next.run(request).await;
    };
    if let Some(given) = query_token(request.uri()) {
        return login(
            &state.base_path,
            &path,
            request.uri().query(),
            token,
            &given,
        );
    }
    let credentials = Credentials {
        bearer: bearer.ok().map(|TypedHeader(header)| header),
        cookies,
    };
    if credentials.match_token(token) {
        request.extensions_mut().insert(Principal::SHARED_TOKEN);
        return next.run(request).await;
    }
    unauthorized(&path)
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The query string of the page's login link.
#[derive(Debug, Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

/// `?token=` of the page's login link (a query that does not read as one
/// `token`, e.g. a repeated one, counts as a wrong token).
fn query_token(uri: &Uri) -> Option<String> {
    match Query::<LoginQuery>::try_from_uri(uri) {
        Ok(Query(query)) => query.token,
        Err(_) => uri.query().map(|_| String::new()),
    }
}

/// A correct `?token=` sets the cookie and redirects to the same address
/// without the token (other query parameters kept as they were sent).
fn login(base: &str, path: &str, query: Option<&str>, token: &str, given: &str) -> Response {
    if !equal(given, token) {
        return unauthorized(path);
    }
    let cookie_path = if base.is_empty() { "/" } else { base };
    let cookie = Cookie::build((COOKIE, token.to_owned()))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path(cookie_path.to_owned());
    let jar = CookieJar::new().add(cookie);
    (jar, Redirect::to(&without_token(base, path, query))).into_response()
}

/// `base` + `path` + the query minus its `token` pairs. Leading slashes and
/// backslashes collapse to one `/`, so the target can never be read as
/// another site (`//evil.example`).
fn without_token(base: &str, path: &str, query: Option<&str>) -> String {
    let path = path.trim_start_matches(['/', '\\']);
    let kept: Vec<&str> = query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| {
            let name = pair.split('=').next().unwrap_or_default();
            !pair.is_empty()
                && !form_urlencoded::parse(name.as_bytes()).any(|(name, _)| name == "token")
        })
        .collect();
    if kept.is_empty() {
        format!("{base}/{path}")
    } else {
        format!("{base}/{path}?{}", kept.join("&"))
    }
}

/// Compares in time independent of where the values differ.
fn equal(given: &str, token: &str) -> bool {
    given.as_bytes().ct_eq(token.as_bytes()).into()
}

fn unauthorized(path: &str) -> Response {
    refuse(
        path,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong token: send Authorization: Bearer TOKEN",
    )
}

/// A refusal: the JSON error object on the API and `/healthz`, a small page
/// naming the code elsewhere.
fn refuse(path: &str, status: StatusCode, code: &str, message: &str) -> Response {
    if path.starts_with("/api/") || path == "/healthz" {
        return ApiError::new(status, code, message).into_response();
    }
    let advice = if status == StatusCode::UNAUTHORIZED {
        "Open the address that <code>m3 serve</code> printed (it carries <code>?token=</code>)."
    } else {
        "Open the address that <code>m3 serve</code> printed."
    };
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>m3: refused</title></head>\
        <body><h1>Refused</h1><p data-error-code=\"{code}\">{advice} (<code>{code}</code>)</p></body></html>"
    );
    (status, Html(page)).into_response()
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, header};
    use axum_extra::headers::HeaderMapExt;

    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(equal("abc", "abc"));
        assert!(!equal("abd", "abc"));
        assert!(!equal("ab", "abc"));
    }

    fn credentials(name: header::HeaderName, value: &str) -> Credentials {
        let mut headers = HeaderMap::new();
        headers.insert(name, value.parse().unwrap());
        Credentials {
            bearer: headers.typed_get::<Authorization<Bearer>>(),
            cookies: CookieJar::from_headers(&headers),
        }
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer xyz", "bearer xyz", "BEARER  xyz"] {
            let given = credentials(header::AUTHORIZATION, value);
            assert_eq!(
                given.bearer.as_ref().map(|b| b.token()),
                Some("xyz"),
                "{value}"
            );
            assert!(given.match_token("xyz"), "{value}");
        }
        let basic = credentials(header::AUTHORIZATION, "Basic xyz");
        assert!(basic.bearer.is_none());
        assert!(!basic.match_token("xyz"));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let given = credentials(header::COOKIE, "a=1; m3_token=xyz; b=2");
        assert_eq!(given.cookies.get(COOKIE).map(Cookie::value), Some("xyz"));
        assert!(given.match_token("xyz"));
        assert!(!given.match_token("xy"));
    }

    #[test]
    fn the_login_cookie_is_http_only_and_strict() {
        let response = login("/m3", "/", Some("token=t"), "t", "t");
        let cookie = response.headers()[header::SET_COOKIE].to_str().unwrap();
        assert_eq!(cookie, "m3_token=t; HttpOnly; SameSite=Strict; Path=/m3");
    }

    #[test]
    fn the_login_redirect_keeps_the_path_and_other_parameters() {
        assert_eq!(without_token("", "/", Some("token=t")), "/");
        assert_eq!(
            without_token("/m3", "/executions/E", Some("a=1&token=t&b=x%20y")),
            "/m3/executions/E?a=1&b=x%20y"
        );
        assert_eq!(without_token("", "/x", Some("%74oken=t&c")), "/x?c");
        assert_eq!(
            without_token("", "//evil.example/x", Some("token=t")),
            "/evil.example/x"
        );
        assert_eq!(
            without_token("", "/\\evil.example", Some("token=t")),
            "/evil.example"
        );
    }
}
