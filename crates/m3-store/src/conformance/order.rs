//! The order a server gave: a round's requests keep their properties' order and the
//! operation's parameters theirs, through every store object; a replay that lists the same
//! keys in another order is still the same round (equality is canonical).

use m3_types::{ElicitationRequest, ManagedInputRecord};
use serde_json::{Map, Value, json};

use super::check::{CaseFailure, ensure, expect_same};
use super::fixture::{ADDRESS, create_request, round_ref};
use super::{CaseResult, Harness};

/// The property names of the address request's schema, in the order the record holds them.
fn property_order(record: &ManagedInputRecord) -> Result<Vec<String>, CaseFailure> {
    let Some(ElicitationRequest::Form(form)) = record.pending.requests.get(ADDRESS) else {
        return Err(CaseFailure::new("the address form request is missing"));
    };
    let properties = form
        .requested_schema
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| CaseFailure::new("the address schema lost its properties"))?;
    Ok(properties.keys().cloned().collect())
}

fn keys(map: &Map<String, Value>) -> Vec<&str> {
    map.keys().map(String::as_str).collect()
}

/// Parameters whose keys are not in alphabetical order.
fn parameters() -> Map<String, Value> {
    match json!({"weight_kg": 2, "destination": {"zip": "411001", "city": "Pune"}, "api": 1}) {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The requested schema's properties (`street` before `city`) and the operation
/// parameters come back in the order they were created in, from the store and from a
/// second store object, whether one round is read or the execution's rounds are listed.
pub async fn create_round_keeps_the_servers_property_order(h: &Harness) -> CaseResult {
    let request = create_request().with_operation_parameters(parameters());
    let created = h.store.create_round(request).await?;
    let expected = ["street", "city"];
    ensure!(
        property_order(&created)? == expected,
        "create_round reordered the properties: {:?}",
        property_order(&created)?
    );
    let reads = [
        ("get_round", h.store.get_round(&round_ref()).await?),
        ("a second store", h.peer.get_round(&round_ref()).await?),
        (
            "list_rounds",
            h.peer.list_rounds(&round_ref().execution_id).await?.pop(),
        ),
    ];
    for (how, read) in reads {
        let record = read.ok_or_else(|| CaseFailure::new(format!("{how}: no round")))?;
        ensure!(
            property_order(&record)? == expected,
            "{how} reordered the properties: {:?}",
            property_order(&record)?
        );
        ensure!(
            keys(&record.operation_parameters) == ["weight_kg", "destination", "api"],
            "{how} reordered the operation parameters: {:?}",
            keys(&record.operation_parameters)
        );
        let destination = record.operation_parameters.get("destination");
        ensure!(
            destination
                .and_then(Value::as_object)
                .is_some_and(|d| keys(d) == ["zip", "city"]),
            "{how} reordered a nested object: {destination:?}"
        );
    }
    Ok(())
}

/// A replay whose schema and parameters list the same keys in another order is the same
/// round: the stored record comes back (in its first order), no conflict.
pub async fn create_round_replay_in_another_key_order_is_the_same_round(h: &Harness) -> CaseResult {
    let first = h
        .store
        .create_round(create_request().with_operation_parameters(parameters()))
        .await?;
    let mut reordered = create_request();
    if let Some(ElicitationRequest::Form(form)) = reordered.pending.requests.get_mut(ADDRESS) {
        form.requested_schema.sort_keys();
        if let Some(Value::Object(properties)) = form.requested_schema.get_mut("properties") {
            properties.sort_keys();
        }
    }
    let mut sorted = parameters();
    sorted.sort_keys();
    let replay = h
        .peer
        .create_round(reordered.with_operation_parameters(sorted))
        .await?;
    expect_same(&first, &replay, "replay in another key order")?;
    ensure!(
        property_order(&replay)? == ["street", "city"],
        "the replay changed the stored order: {:?}",
        property_order(&replay)?
    );
    Ok(())
}
