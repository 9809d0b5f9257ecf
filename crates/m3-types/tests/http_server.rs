//! HTTP server bindings: JSON shape, trust refusals, `${NAME}` headers.
#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::BTreeMap;

use m3_types::{ErrorCode, HttpServer, ServerBinding, ServerTrust, StdioServer};
use serde_json::json;

#[test]
fn http_binding_json_carries_its_type_and_defaults_to_untrusted() {
    let server = HttpServer::new("shipping", "https://mcp.example.com/mcp")
        .with_header("Authorization", "Bearer ${SHIP_TOKEN}");
    let shape = json!({
        "type": "http", "name": "shipping", "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer ${SHIP_TOKEN}"}, "trust": "untrusted"
    });
    assert_eq!(serde_json::to_value(&server).unwrap(), shape);
    let binding: ServerBinding = serde_json::from_value(shape.clone()).unwrap();
    assert_eq!(binding, ServerBinding::Http(server.clone()));
    assert_eq!(serde_json::to_value(&binding).unwrap(), shape);
    let minimal: ServerBinding =
        serde_json::from_value(json!({"type": "http", "name": "s", "url": "https://a.example/"}))
            .unwrap();
    assert_eq!(minimal.as_http().unwrap().trust, ServerTrust::Untrusted);
    let python: HttpServer = serde_json::from_value(
        json!({"type": "http", "name": "s", "url": "http://127.0.0.1:1/", "trust": "sdk_loopback"}),
    )
    .unwrap();
    assert_eq!(python.trust, ServerTrust::Loopback);
}

#[test]
fn stdio_bindings_keep_their_shape_with_or_without_a_type() {
    let stdio = StdioServer::new("s", "srv").with_args(["--x"]);
    let plain = serde_json::to_value(&stdio).unwrap();
    let binding: ServerBinding = serde_json::from_value(plain.clone()).unwrap();
    assert_eq!(binding, ServerBinding::Stdio(stdio.clone()));
    assert_eq!(serde_json::to_value(&binding).unwrap(), plain);
    let mut typed = plain;
    typed["type"] = json!("stdio");
    assert_eq!(
        serde_json::from_value::<ServerBinding>(typed).unwrap(),
        ServerBinding::Stdio(stdio)
    );
    let error = serde_json::from_value::<ServerBinding>(json!({"type": "sse", "name": "s"}))
        .unwrap_err()
        .to_string();
    assert!(error.contains("\"stdio\" or \"http\""), "{error}");
    let unknown = serde_json::from_value::<ServerBinding>(
        json!({"type": "http", "name": "s", "url": "https://a.example/", "extra": 1}),
    );
    assert!(unknown.is_err());
}

#[test]
fn untrusted_bindings_refuse_private_and_loopback_hosts_naming_host_and_trust() {
    for url in [
        "http://127.0.0.1:8080/mcp",
        "http://localhost/mcp",
        "http://10.1.2.3/mcp",
        "http://192.168.0.10/mcp",
        "http://169.254.169.254/latest",
        "http://[::1]:9/mcp",
        "http://[fd00::1]/mcp",
    ] {
        let error = HttpServer::new("s", url).validate().unwrap_err();
        assert_eq!(error.code(), ErrorCode::InvalidArgument.as_str(), "{url}");
        let message = error.to_string();
        assert!(message.contains("'untrusted'"), "{message}");
        let info = error.to_error_info();
        assert_eq!(info.details["trust"], json!("untrusted"));
        assert!(info.details["host"].is_string());
        assert!(
            HttpServer::new("s", url)
                .with_trust(ServerTrust::Public)
                .validate()
                .is_err(),
            "{url}"
        );
        HttpServer::new("s", url)
            .with_trust(ServerTrust::TrustedPrivate)
            .validate()
            .unwrap();
    }
    HttpServer::new("s", "https://mcp.example.com/mcp")
        .validate()
        .unwrap();
    HttpServer::new("s", "https://8.8.8.8/mcp")
        .validate()
        .unwrap();
}

#[test]
fn loopback_bindings_accept_only_loopback_hosts() {
    for url in [
        "http://127.0.0.1:1/mcp",
        "http://localhost:2/",
        "http://[::1]:3/",
    ] {
        HttpServer::new("s", url)
            .with_trust(ServerTrust::Loopback)
            .validate()
            .unwrap();
    }
    for url in ["http://10.0.0.1/", "https://8.8.8.8/"] {
        let error = HttpServer::new("s", url)
            .with_trust(ServerTrust::Loopback)
            .validate()
            .unwrap_err();
        assert!(error.to_string().contains("'loopback'"), "{error}");
    }
}

#[test]
fn urls_must_be_http_with_a_host_and_no_credentials() {
    for url in [
        "ftp://a.example/",
        "not a url",
        "https://user:pw@a.example/",
        "file:///x",
    ] {
        let error = HttpServer::new("s", url)
            .with_trust(ServerTrust::TrustedPrivate)
            .validate()
            .unwrap_err();
        assert_eq!(error.code(), "invalid_argument", "{url}");
        assert!(!error.to_string().contains("pw@"), "{error}");
    }
    assert!(
        HttpServer::new("a:b", "https://a.example/")
            .validate()
            .is_err()
    );
    assert!(
        HttpServer::new("s", "https://a.example/")
            .with_header("Bad Header", "x")
            .validate()
            .is_err()
    );
    assert!(
        HttpServer::new("s", "https://a.example/")
            .with_header("X", "${not closed")
            .validate()
            .is_err()
    );
}

#[test]
fn header_references_resolve_at_connection_time_and_are_registered_as_secrets() {
    let server = HttpServer::new("s", "https://a.example/")
        .with_header("Authorization", "Bearer ${TOKEN}")
        .with_header("X-Plain", "visible")
        .with_header("X-Both", "${A}-${B}");
    let env: BTreeMap<&str, &str> = [("TOKEN", "s3cret-token"), ("A", "alpha"), ("B", "beta")]
        .into_iter()
        .collect();
    let lookup = |name: &str| env.get(name).map(|v| (*v).to_owned());
    let resolved = server.resolve_headers(&lookup).unwrap();
    let headers: BTreeMap<_, _> = resolved.headers.iter().cloned().collect();
    assert_eq!(headers["Authorization"], "Bearer s3cret-token");
    assert_eq!(headers["X-Plain"], "visible");
    assert_eq!(headers["X-Both"], "alpha-beta");
    for secret in [
        "Bearer s3cret-token",
        "s3cret-token",
        "alpha",
        "beta",
        "alpha-beta",
    ] {
        assert!(resolved.secrets.iter().any(|s| s == secret), "{secret}");
    }
    assert!(!resolved.secrets.iter().any(|s| s == "visible"));
    assert_eq!(
        serde_json::to_value(&server).unwrap()["headers"]["Authorization"],
        json!("Bearer ${TOKEN}"),
        "the binding keeps the reference"
    );
    let missing = server.resolve_headers(&|_| None).unwrap_err();
    assert_eq!(missing.code(), "invalid_argument");
    assert!(missing.to_string().contains("'A'") || missing.to_string().contains("'TOKEN'"));
}
