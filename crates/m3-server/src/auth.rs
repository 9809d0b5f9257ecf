//! The guard in front of every route: a request must name a host this server
//! answers (without a token: loopback, see [`crate::host`]), a foreign
//! `Origin` never changes state, and with a token every route but `/healthz`
//! and the assets needs a credential (a bearer header, or the page's cookie set
//! through `?token=`): the server's `--token`, or one of the store's API tokens
//! (`m3 tokens create`), whose scope must allow the route. The principal it
//! authenticates is put in the request's extensions ([`Principal`]).

use std::net::SocketAddr;
use std::time::Instant;

use axum::extract::{ConnectInfo, Query, Request, State};
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
use m3_kit::tokens::{TokenCheck, TokenScope};

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
    /// The credential presented: the bearer header, else the page's cookie.
    fn given(&self) -> Option<&str> {
        self.bearer
            .as_ref()
            .map(|header| header.token())
            .or_else(|| self.cookies.get(COOKIE).map(Cookie::value))
    }
}

/// What a presented credential turned out to be.
enum Verdict {
    /// A principal.
    Known(Principal),
    /// An API token past its expiry (401 `token_expired`).
    Expired,
    /// Not a credential of this server (401 `unauthorized`).
    Unknown,
}

/// Who `given` is: the server's `token`, or a live API token of the store.
async fn verify(state: &Shared, given: &str) -> Result<Verdict, ApiError> {
    if state
        .token
        .as_deref()
        .is_some_and(|token| equal(given, token))
    {
        return Ok(Verdict::Known(Principal::shared_token()));
    }
    if !given.starts_with(m3_kit::tokens::rules::SECRET_PREFIX) {
        return Ok(Verdict::Unknown);
    }
    let tokens = state.kit.store().token_store().await?;
    Ok(match tokens.authenticate(given).await? {
        TokenCheck::Valid(token) => Verdict::Known(Principal::of_token(&token)),
        TokenCheck::Expired(_) => Verdict::Expired,
        _ => Verdict::Unknown,
    })
}

/// Who a request is: the user a trusted proxy names, else the credential it presents.
async fn principal_of(
    state: &Shared,
    source: Option<std::net::IpAddr>,
    headers: &axum::http::HeaderMap,
    credentials: &Credentials,
) -> Result<Verdict, ApiError> {
    let proxied = state
        .proxy
        .as_ref()
        .and_then(|proxy| proxy.user(source, headers));
    match (proxied, credentials.given()) {
        (Some(Ok(user)), _) => Ok(Verdict::Known(Principal::proxied(user))),
        (Some(Err(())), _) | (None, None) => Ok(Verdict::Unknown),
        (None, Some(given)) => verify(state, given).await,
    }
}

/// The scope a request needs: webhooks (and anything administrative) `admin`, other
/// state changes `answer`, reads `read`.
fn required_scope(method: &Method, path: &str) -> TokenScope {
    if path.starts_with("/api/v1/webhooks") {
        TokenScope::Admin
    } else if is_safe(method) {
        TokenScope::Read
    } else {
        TokenScope::Answer
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
    let source = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let now = Instant::now();
    if source.is_some_and(|address| state.failures.is_blocked(address, now)) {
        return refuse(
            &path,
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_failures",
            "too many failed authentications from this address: try again in a minute",
        );
    }
    let failed = |response: Response| {
        if let Some(address) = source {
            state.failures.record_failure(address, now);
        }
        response
    };
    // A login link: the server's token, or (on any server) one of the store's.
    let login_token = query_token(request.uri()).filter(|given| {
        state.token.is_some() || given.starts_with(m3_kit::tokens::rules::SECRET_PREFIX)
    });
    if let Some(given) = login_token {
        return match verify(&state, &given).await {
            Ok(Verdict::Known(_)) => login(&state.base_path, &path, request.uri().query(), &given),
            Ok(Verdict::Expired) => failed(expired(&path)),
            Ok(Verdict::Unknown) => failed(unauthorized(&path)),
            Err(error) => error.into_response(),
        };
    }
    let credentials = Credentials {
        bearer: bearer.ok().map(|TypedHeader(header)| header),
        cookies,
    };
    if path == crate::metrics::METRICS_PATH && is_metrics_token(&state, &credentials) {
        return next.run(request).await;
    }
    let verdict = match principal_of(&state, source, request.headers(), &credentials).await {
        Ok(verdict) => verdict,
        Err(error) => return error.into_response(),
    };
    let principal = match verdict {
        Verdict::Known(principal) => principal,
        Verdict::Expired => return failed(expired(&path)),
        // Without a token the server is loopback only, and a request without a known
        // credential is nobody in particular.
        Verdict::Unknown if state.token.is_none() => Principal::anonymous(),
        Verdict::Unknown => return failed(unauthorized(&path)),
    };
    if !principal.allows(required_scope(request.method(), &path)) {
        return refuse(
            &path,
            StatusCode::FORBIDDEN,
            "forbidden_scope",
            "this token's scope does not allow this request",
        );
    }
    request.extensions_mut().insert(principal);
    next.run(request).await
}

/// Whether the request presents the server's metrics token (`--metrics-token`).
fn is_metrics_token(state: &Shared, credentials: &Credentials) -> bool {
    match (&state.metrics_token, credentials.bearer.as_ref()) {
        (Some(token), Some(bearer)) => equal(bearer.token(), token),
        _ => false,
    }
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

/// A correct `?token=` (checked by the caller) sets the cookie and redirects to the same
/// address without the token (other query parameters kept as they were sent).
fn login(base: &str, path: &str, query: Option<&str>, token: &str) -> Response {
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

fn expired(path: &str) -> Response {
    refuse(
        path,
        StatusCode::UNAUTHORIZED,
        "token_expired",
        "the token has expired: ask for a new one (m3 tokens create)",
    )
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
            assert_eq!(given.given(), Some("xyz"), "{value}");
        }
        let basic = credentials(header::AUTHORIZATION, "Basic xyz");
        assert!(basic.bearer.is_none());
        assert_eq!(basic.given(), None);
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let given = credentials(header::COOKIE, "a=1; m3_token=xyz; b=2");
        assert_eq!(given.cookies.get(COOKIE).map(Cookie::value), Some("xyz"));
        assert_eq!(given.given(), Some("xyz"));
    }

    #[test]
    fn the_login_cookie_is_http_only_and_strict() {
        let response = login("/m3", "/", Some("token=t"), "t");
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
