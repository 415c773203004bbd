//! The routing rule every memoryd client shares (tests/data/routing_vectors.json).

use std::path::PathBuf;

use memoryd_client::routing::{normal_address, rendezvous_order, weight};
use memoryd_client::{Client, Config};
use serde_json::Value;

fn vectors() -> Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/routing_vectors.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn weights_match_the_shared_vectors() {
    let doc = vectors();
    let cases = doc["weights"].as_array().unwrap();
    assert!(cases.len() >= 5);
    for case in cases {
        let (address, agent) = (
            case["address"].as_str().unwrap(),
            case["agent_id"].as_str().unwrap(),
        );
        let hex: String = weight(address, agent)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, case["weight"].as_str().unwrap(), "{address} / {agent}");
    }
}

#[test]
fn orders_match_the_shared_vectors() {
    let doc = vectors();
    let cases = doc["orders"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let addresses: Vec<&str> = case["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let agent = case["agent_id"].as_str().unwrap();
        let got: Vec<&str> = rendezvous_order(&addresses, agent)
            .into_iter()
            .map(|i| addresses[i])
            .collect();
        let want: Vec<&str> = case["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(got, want, "{agent} over {addresses:?}");
    }
}

#[tokio::test]
async fn the_readme_example_routes_main_to_the_second_daemon_and_refuses_one_daemon_twice() {
    assert_eq!(normal_address("HTTP://10.0.0.5:50051/"), "10.0.0.5:50051");
    let client = Client::connect(Config::fleet(["10.0.0.1:50051", "10.0.0.2:50051"]))
        .await
        .unwrap();
    assert_eq!(
        client.daemons_for("main"),
        ["10.0.0.2:50051", "10.0.0.1:50051"]
    );
    let twice = Client::connect(Config::fleet(["10.0.0.1:50051", "http://10.0.0.1:50051/"])).await;
    assert_eq!(twice.err().unwrap().code_name(), "INVALID_ARGUMENT");
}
