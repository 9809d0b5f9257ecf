//! Driving the prompter with byte buffers.

use m3_types::{
    ElicitationAction, ElicitationRequest, FormElicitationRequest, OperationKind,
    PendingElicitationRound, ResponseMap, UrlElicitationRequest,
};
use serde_json::{Value, json};

use super::*;

fn address() -> FormElicitationRequest {
    let schema = json!({"type": "object", "required": ["street", "city"], "properties": {
        "street": {"type": "string", "title": "Street"},
        "city": {"type": "string", "title": "City"}
    }});
    FormElicitationRequest::new(
        "shipping_address",
        "Enter the delivery address.",
        schema.as_object().cloned().unwrap(),
    )
}

fn ask(input: &str, request: &ElicitationRequest) -> (Option<ElicitationResponse>, String) {
    let mut output = Vec::new();
    let response = Prompter::new(input.as_bytes(), &mut output)
        .ask(request, |_| Ok(()))
        .unwrap();
    (response, String::from_utf8(output).unwrap())
}

fn run(input: &str, request: &ElicitationRequest) -> (ElicitationResponse, String) {
    let (response, output) = ask(input, request);
    (response.expect("answered"), output)
}

#[test]
fn accept_fills_every_field() {
    // The server's `required` order comes first: street, then city.
    let (response, output) = run("\n1 Main Street\nPune\n", &address().into());
    assert_eq!(response.action, ElicitationAction::Accept);
    assert_eq!(
        Value::Object(response.content.unwrap()),
        json!({"street": "1 Main Street", "city": "Pune"})
    );
    assert!(output.contains("[shipping_address] Enter the delivery address."));
    assert!(output.contains("[d]ecline / [c]ancel"), "{output}");
    assert!(output.contains("City (required, text): "), "{output}");
    let street = output.find("Street (required").unwrap();
    assert!(street < output.find("City (required").unwrap(), "{output}");
}

#[test]
fn fields_are_asked_in_the_servers_property_order() {
    // Not by name, not required first: the order the schema lists its properties in.
    let schema: serde_json::Value = serde_json::from_str(
        r#"{"type": "object", "required": ["zip", "city"], "properties": {
            "note": {"type": "string"}, "city": {"type": "string"},
            "apt": {"type": "string"}, "zip": {"type": "string"}}}"#,
    )
    .unwrap();
    let names: Vec<String> = m3_types::form::fields(schema.as_object().unwrap())
        .into_iter()
        .map(|field| field.name)
        .collect();
    assert_eq!(names, ["note", "city", "apt", "zip"]);
}

#[test]
fn required_fields_are_asked_again_until_given() {
    let (response, output) = run("a\n\n1 Main Street\nPune\n", &address().into());
    assert_eq!(response.content.unwrap()["city"], "Pune");
    assert!(output.contains("! Street is required"), "{output}");
}

#[test]
fn decline_and_cancel_are_always_offered() {
    assert_eq!(
        run("d\n", &address().into()).0.action,
        ElicitationAction::Decline
    );
    assert_eq!(
        run("cancel\n", &address().into()).0.action,
        ElicitationAction::Cancel
    );
    assert_eq!(
        run("a\nPune\n:decline\n", &address().into()).0.action,
        ElicitationAction::Decline
    );
    assert_eq!(
        run("a\n:cancel\n", &address().into()).0.action,
        ElicitationAction::Cancel
    );
    let (response, output) = run("x\nd\n", &address().into());
    assert_eq!(response.action, ElicitationAction::Decline);
    assert!(output.contains("'x': answer a, d or c"));
    assert_eq!(response.content, None);
}

#[test]
fn end_of_input_gives_up_without_an_answer() {
    assert_eq!(ask("", &address().into()).0, None);
    assert_eq!(ask("a\n1 Main Street\n", &address().into()).0, None);
}

#[test]
fn defaults_enums_and_bounds_are_offered_and_enforced() {
    let schema = json!({"type": "object", "required": ["guests", "hero"], "properties": {
        "guests": {"type": "integer", "minimum": 1, "maximum": 12, "default": 2},
        "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]},
        "note": {"type": "string"},
        "vip": {"type": "boolean", "default": false}
    }});
    let request =
        FormElicitationRequest::new("booking", "Book.", schema.as_object().cloned().unwrap());
    // guests: 40 (too many) then default; hero: 3 (no such option) then 2; note: skipped; vip: y
    let (response, output) = run("a\n40\n\n3\n2\n\ny\n", &request.into());
    assert_eq!(
        Value::Object(response.content.unwrap()),
        json!({"guests": 2, "hero": "h2", "vip": true})
    );
    assert!(
        output.contains("guests (required, integer 1..12) [default: 2]: "),
        "{output}"
    );
    assert!(output.contains("2) Wonder Woman [h2]"), "{output}");
    assert!(
        output.contains("! enter a number of at most 12"),
        "{output}"
    );
    assert!(
        output.contains("! '3' is not one of the options"),
        "{output}"
    );
    assert!(
        output.contains("vip (optional, y/n) [default: false]"),
        "{output}"
    );
}

#[test]
fn a_refused_form_is_asked_again() {
    let mut output = Vec::new();
    let mut refusals = 1;
    let response = Prompter::new("a\nx\nPune\n1 Main Street\nPune\n".as_bytes(), &mut output)
        .ask_form(&address(), |content| {
            if refusals > 0 {
                refusals -= 1;
                Err(format!(
                    "street '{}' is too short",
                    content["street"].as_str().unwrap()
                ))
            } else {
                Ok(())
            }
        })
        .unwrap()
        .unwrap();
    let output = String::from_utf8(output).unwrap();
    assert!(output.contains("! street 'x' is too short"), "{output}");
    assert_eq!(response.content.unwrap()["street"], "1 Main Street");
}

#[test]
fn a_url_request_shows_the_url_and_asks_for_consent() {
    let request = UrlElicitationRequest::new(
        "verify",
        "Verify the recipient.",
        "https://verify.example/start?session=abc&step=2",
    );
    let (response, output) = run("\n", &request.clone().into());
    assert_eq!(response, ElicitationResponse::accept_url());
    assert_eq!(ask("", &request.clone().into()).0, None);
    assert!(output.contains("URL: https://verify.example/start?session=abc&step=2"));
    assert!(output.contains("does not open this URL"));
    assert_eq!(
        run("d\n", &request.into()).0.action,
        ElicitationAction::Decline
    );
}

fn contact_round() -> PendingElicitationRound {
    let schema = json!({"type": "object", "required": ["email"], "properties": {
        "email": {"type": "string", "format": "email", "maxLength": 40},
        "password": {"type": "string"}
    }});
    let contact =
        FormElicitationRequest::new("contact", "Contact?", schema.as_object().cloned().unwrap());
    let verify = UrlElicitationRequest::new("verify", "Verify.", "https://verify.example/x");
    let requests = PendingElicitationRound::request_map([contact.into(), verify.into()]).unwrap();
    PendingElicitationRound::new(
        "round-1",
        "exec-1",
        "op-1",
        "shipping",
        OperationKind::Tool,
        "book_verified_shipment",
        requests,
        time::OffsetDateTime::now_utc(),
    )
    .unwrap()
}

fn answer(input: &str) -> (Option<ResponseMap>, String) {
    let mut output = Vec::new();
    let mut prompter = Prompter::new(input.as_bytes(), &mut output);
    let responses = answer_round(&mut prompter, &contact_round()).unwrap();
    (responses, String::from_utf8(output).unwrap())
}

#[test]
fn a_round_is_answered_request_by_request_with_its_schema_checked_and_confirmed() {
    let (responses, output) = answer("a\nnot-an-email\nada@example.com\nhunter2\nc\n\n");
    let responses = responses.expect("confirmed");
    assert_eq!(
        responses["contact"].content.as_ref().unwrap()["email"],
        "ada@example.com"
    );
    assert_eq!(responses["verify"], ElicitationResponse::cancel());
    validate_responses(&contact_round(), &responses).unwrap();
    // The summary before the confirm step never shows a secret-named value.
    assert!(
        output
            .contains("  [contact] accept: email = \"ada@example.com\", password = \"[REDACTED]\""),
        "{output}"
    );
    assert!(output.contains("  [verify] cancel"), "{output}");
    assert!(!output.contains("hunter2"), "{output}");
    assert!(output.contains("Commit these responses? [y]es"), "{output}");
}

#[test]
fn editing_asks_again_and_quitting_or_giving_up_leaves_the_round_unanswered() {
    let (responses, _) = answer("a\nold@example.com\n\nd\ne\na\nnew@example.com\n\na\ny\n");
    let responses = responses.expect("confirmed after editing");
    assert_eq!(
        responses["contact"].content.as_ref().unwrap()["email"],
        "new@example.com"
    );
    assert_eq!(responses["verify"], ElicitationResponse::accept_url());
    assert_eq!(answer("a\nada@example.com\n\nd\nq\n").0, None);
    assert_eq!(answer("a\nada@example.com\n\nd\n").0, None);
    assert_eq!(answer("a\nada@example.com\n").0, None);
}

#[test]
fn a_hostile_form_reaches_the_output_with_its_controls_shown() {
    let schema = json!({"type": "object", "required": ["na\u{1b}]0;t\u{7}me"], "properties": {
        "na\u{1b}]0;t\u{7}me": {
            "type": "string",
            "description": "d\u{1b}[2K\rx",
            "default": "v\u{9b}1m"
        },
        "pick": {"type": "string", "oneOf": [
            {"const": "a\u{1b}[8m", "title": "A\u{202e}"},
            {"const": "b", "title": "B"}
        ]}
    }});
    let form = FormElicitationRequest::new(
        "k\u{1b}[1A",
        "M\u{1b}]8;;https://evil.example\u{1b}\\link\u{1b}]8;;\u{1b}\\\n- fake line",
        schema.as_object().cloned().unwrap(),
    );
    let url = UrlElicitationRequest::new(
        "u",
        "Go\u{7}",
        "https://evil.example/steal\u{1b}[2K\rhttps://accounts.example/login",
    );
    let (_, form_output) = run("a\n\n2\n", &form.into());
    let (_, url_output) = run("a\n", &url.into());
    for output in [&form_output, &url_output] {
        let raw: Vec<char> = output
            .chars()
            .filter(|c| (c.is_control() && *c != '\n') || *c == '\u{202e}')
            .collect();
        assert!(raw.is_empty(), "raw {raw:?} in:\n{output}");
    }
    assert!(
        form_output.contains(
            "[k\\x1b[1A] M\\x1b]8;;https://evil.example\\x1b\\link\\x1b]8;;\\x1b\\\\n- fake line"
        ),
        "{form_output}"
    );
    assert!(form_output.contains("  d\\x1b[2K\\rx\n"), "{form_output}");
    assert!(
        form_output.contains("na\\x1b]0;t\\x07me (required, text) [default: v\\u{9b}1m]: "),
        "{form_output}"
    );
    assert!(
        form_output.contains("1) A\\u{202e} [a\\x1b[8m]"),
        "{form_output}"
    );
    assert!(
        url_output
            .contains("URL: https://evil.example/steal\\x1b[2K\\rhttps://accounts.example/login"),
        "{url_output}"
    );
    assert!(
        url_output.contains("  host: evil.example\n"),
        "{url_output}"
    );
}

#[test]
fn the_summary_hides_fields_the_schema_marks_secret() {
    let schema = json!({"type": "object", "required": ["code", "memo", "city"], "properties": {
        "code": {"type": "string", "format": "password"},
        "memo": {"type": "string", "writeOnly": true},
        "city": {"type": "string"}
    }});
    let form =
        FormElicitationRequest::new("login", "Log in.", schema.as_object().cloned().unwrap());
    let requests = PendingElicitationRound::request_map([form.into()]).unwrap();
    let round = PendingElicitationRound::new(
        "round-1",
        "exec-1",
        "op-1",
        "shipping",
        OperationKind::Tool,
        "login",
        requests,
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let mut output = Vec::new();
    let mut prompter = Prompter::new(
        "a\n9876-code\nmy memo text\nPune\ny\n".as_bytes(),
        &mut output,
    );
    let responses = answer_round(&mut prompter, &round)
        .unwrap()
        .expect("confirmed");
    let output = String::from_utf8(output).unwrap();
    assert_eq!(
        responses["login"].content.as_ref().unwrap()["code"],
        "9876-code"
    );
    assert!(
        output.contains(
            "[login] accept: code = \"[REDACTED]\", memo = \"[REDACTED]\", city = \"Pune\""
        ),
        "{output}"
    );
    assert!(!output.contains("9876-code"), "{output}");
}
